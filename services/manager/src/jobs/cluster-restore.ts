// Job: cluster_restore {src_cluster_id, dst_cluster_id, restore_time} (spec 4.4), a
// point-in-time restore into a new, empty cluster with as many shards as the source had.
//
// Per shard (source shards and destination shards paired in id order): the newest full
// backup of the source finished at or before restore_time is read back from backup storage
// onto the destination shard's master, its standbys are rebuilt from that master (the
// rebuild_node path), and the source master's archived binlogs are replayed on it up to
// restore_time; the standbys replicate the replay. The multi-shard transactions the replay
// left prepared (open at restore_time) are then committed or rolled back by whether their
// decision was recorded by then (cluster-restore-xa.ts). Then the destination's compute nodes
// are synced, so they serve the restored tables, and the compute catalog of the backup set
// is put back on each of them: the objects only compute nodes hold (views, functions,
// types, sequences), owned by the destination's compute account.
//
// Nothing is written before every object the restore reads (each shard's backup, every
// binlog file to replay, the catalog dumps) has been verified against its sha256 on the
// storage, and before the destination has been found empty. A restore that fails after it
// started writing drops the destination's cluster databases (its standbys follow through
// replication), so nothing half-restored is left serving and the destination is empty
// again for another try.

import { gtidCovers, type Agents, type PgSchemaRestoreReply, type PgSchemaRestoreRequest } from '@kcm/agent-api';
import { KcmError, parseRestoreTime, type ClusterRestoreResult, type ParasOf, type RestoredCatalogResult, type RestoredShardResult } from '@kcm/protocol';
import { openBackupStorage, requireIntact } from '../backup/storage';
import { dataKeyOf } from '../backup/sealing';
import { newestFullBackupBefore } from '../meta/backup';
import { archiveCoversUntil, archivedUpTo, binlogsToReplay, shardArchive } from '../meta/binlog-archive';
import { own } from '../meta/dict';
import type { ArchivedBinlogRecord, BackupSetRecord, BackupStorageRecord, CatalogBackupRecord, ClusterRecord, CompRecord, MetaState, SealedObjectRef, ShardBackupRecord, ShardRecord } from '../meta/state';
import { readyCluster, clusterOfStep, forEachInstance } from './cluster-lookup';
import { errorNameOf } from './framework/errors';
import { applyCpuLimit, instanceSpec, opId, syncCompCatalogs } from './instance-ops';
import { copyIntoStandby, DEFAULT_ALLOWED_REPLICA_DELAY_S } from './nodes';
import { endTransactionsOpenAtRestoreTime, type EndedBranches } from './cluster-restore-xa';
import type { JobOf, JobStep, StepContext } from './framework/workflow';
import { liveAccount } from '../secrets/live-accounts';

type Paras = ParasOf<'cluster_restore'>;

interface ShardPlan {
  src: ShardBackupRecord;
  dst: ShardRecord;
  binlogs: ArchivedBinlogRecord[];
  /** The replay ends at this GTID position (a restore drill's point: a later set's), not only at stopTime. */
  stopGtid?: string;
}

export interface RestorePlan {
  dst: ClusterRecord;
  set: BackupSetRecord;
  stopTime: number;
  shards: ShardPlan[];
}

const byId = (a: { id: string }, b: { id: string }) => Number(a.id) - Number(b.id);
const isoOf = (unixSeconds: number) => new Date(unixSeconds * 1000).toISOString();

/** restore_time as Unix seconds (the paras schema accepted it, so it parses). */
export function restoreTimeOf(p: Paras): number {
  const parsed = parseRestoreTime(String(p.restore_time));
  if (!parsed.ok) throw KcmError.of('INVALID_PARAS', `paras.restore_time: ${parsed.rule}`, { field: 'paras.restore_time' });
  return parsed.value;
}

/** What the restore uses, or the refusal naming the field: checked at submission and again by the first step. */
export function restorePlan(state: MetaState, p: Paras): RestorePlan {
  const stopTime = restoreTimeOf(p);
  const dst = readyCluster(state, p.dst_cluster_id, 'paras.dst_cluster_id');
  const set = newestFullBackupBefore(state, p.src_cluster_id, stopTime * 1000);
  if (!set) {
    throw KcmError.of('NOT_FOUND', `paras.restore_time: cluster ${p.src_cluster_id} has no full backup finished at or before ${isoOf(stopTime)}; run manual_backup_cluster first, or restore to a later time`, { field: 'paras.restore_time' });
  }
  return restorePlanOfSet(state, { dst, set, stopTime, replay: true, dstField: 'paras.dst_cluster_id', timeField: 'paras.restore_time' });
}

/**
 * The plan of restoring `set` into `dst` up to `stopTime` (Unix seconds): with `replay`, the
 * archived binlogs after the set up to stopTime, which the archive must cover; without, the
 * set as it was taken (a restore drill of the set). `stopGtids` (by source shard id) end each
 * shard's replay at an exact position instead, which the archive must reach (a restore drill
 * up to a later set's point). Refusals name `dstField` / `timeField`.
 */
export function restorePlanOfSet(
  state: MetaState,
  t: { dst: ClusterRecord; set: BackupSetRecord; stopTime: number; replay: boolean; stopGtids?: ReadonlyMap<string, string>; dstField: string; timeField: string },
): RestorePlan {
  const { dst, set, stopTime } = t;
  const dstShards = Object.values(dst.shards).sort(byId);
  if (dstShards.length !== set.shards.length) {
    throw KcmError.of('INVALID_PARAS', `${t.dstField}: cluster ${dst.id} has ${dstShards.length} shard(s), the backup of cluster ${set.clusterId} has ${set.shards.length}; the destination must have the same number of shards`, { field: t.dstField });
  }
  const srcShards = [...set.shards].sort((a, b) => Number(a.shardId) - Number(b.shardId));
  const shards = srcShards.map((src, i): ShardPlan => {
    if (!t.replay) return { src, dst: dstShards[i], binlogs: [] };
    const archive = shardArchive(state, set.clusterId, src.shardId);
    const stopGtid = t.stopGtids?.get(src.shardId);
    if (stopGtid !== undefined) {
      const reached = archivedUpTo(archive);
      if (!gtidCovers(reached, stopGtid)) {
        throw KcmError.of('CONFLICT', `${t.timeField}: the archived binlogs of shard ${src.shardId} of cluster ${set.clusterId} reach ${reached || 'nothing'}, short of ${stopGtid}; wait for archiving to catch up`, { field: t.timeField });
      }
      return { src, dst: dstShards[i], binlogs: binlogsToReplay(archive, src.gtidPos, stopTime), stopGtid };
    }
    const coveredUntil = archiveCoversUntil(archive);
    if (coveredUntil < stopTime) {
      throw KcmError.of(
        'INVALID_PARAS',
        `${t.timeField}: ${isoOf(stopTime)} is beyond the archived binlogs of shard ${src.shardId} of cluster ${set.clusterId} (${coveredUntil ? `archived up to ${isoOf(coveredUntil)}` : 'none archived'}); choose an earlier time or wait for archiving to catch up`,
        { field: t.timeField },
      );
    }
    return { src, dst: dstShards[i], binlogs: binlogsToReplay(archive, src.gtidPos, stopTime) };
  });
  return { dst, set, stopTime, shards };
}

function storageOf(state: MetaState, name: string): BackupStorageRecord {
  const record = own(state.backupStorages, name);
  if (!record) throw KcmError.of('NOT_FOUND', `backup storage ${name} is no longer registered`);
  return record;
}

function masterOf(shard: ShardRecord) {
  const master = shard.nodes[shard.masterNodeId];
  if (!master) throw new Error(`${shard.name} has no master node ${shard.masterNodeId}`);
  return master;
}

/** The restore's step outputs, by step name (a restore drill's outputs include them: jobs/restore-drill). */
export interface RestoreOutputs {
  'verify the backup set and the empty destination': { backupId: string; stopTime: number };
  /** By destination shard id: the source shard and the GTID position of its restored backup. */
  'restore each shard master from the full backup': Record<string, { srcShardId: string; gtid: string }>;
  'rebuild the standbys from the restored masters': null;
  'replay archived binlogs up to restore_time': Record<string, { gtid: string; files: number }>;
  /** By destination shard id: the XA branches left prepared at restore_time, ended. */
  'end the multi-shard transactions open at restore_time': Record<string, EndedBranches>;
  'sync the compute nodes and apply cpu limits': null;
  'restore the compute catalog': RestoredCatalogResult[];
}

type Outputs = RestoreOutputs;

/**
 * What the restore steps restore, and where: cluster_restore's paras, or a restore drill's
 * chosen set and scratch cluster. `plan` is called by every step, on the state as it is then.
 */
export interface RestoreTarget {
  plan(ctx: StepContext<unknown, RestoreOutputs>): RestorePlan;
  dstClusterId(ctx: StepContext<unknown, RestoreOutputs>): string;
}

/** The plan the job committed to in its first step (the same backup set on every resume). */
function committedPlan(ctx: StepContext<unknown, Outputs>, target: RestoreTarget): RestorePlan {
  const plan = target.plan(ctx);
  const chosen = ctx.outputs['verify the backup set and the empty destination'];
  if (plan.set.id !== chosen.backupId) throw KcmError.of('CONFLICT', `the backup set changed during the restore (${chosen.backupId} -> ${plan.set.id})`);
  return plan;
}

const restoreTargetOf = (p: Paras): RestoreTarget => ({ plan: (ctx) => restorePlan(ctx.state(), p), dstClusterId: () => p.dst_cluster_id });

export const clusterRestore: JobOf<'cluster_restore', Outputs> = {
  jobType: 'cluster_restore',
  validate: (p, state) => void restorePlan(state, p),
  lockKey: (p) => `cluster:${p.dst_cluster_id}`,
  steps: (p) => restoreSteps(restoreTargetOf(p)) as JobStep<Paras, Outputs>[],
  result(outputs, p): ClusterRestoreResult {
    return restoreResult(outputs, p);
  },
  async rollback(ctx, failedStep) {
    return dropPartialRestore(ctx, failedStep, ctx.paras.dst_cluster_id);
  },
};

/**
 * The restore, step by step: cluster_restore's steps, which a restore drill runs too (with
 * its own job id in every op id, so a resumed drill finds its own work done).
 */
export function restoreSteps(target: RestoreTarget): JobStep<unknown, Outputs>[] {
  return [
    {
      name: 'verify the backup set and the empty destination',
      async run(ctx) {
        const plan = target.plan(ctx);
        // Every object first: an altered or missing file refuses the restore before anything is written.
        // A sealed object's tags are checked too, where it is stored: one altered together with
        // its manifest fails here, before any shard is touched (docs/backup-encryption.md).
        const byStorage = new Map<string, string[]>();
        const dataKeys = new Map<string, Buffer>();
        const want = (storageName: string, key: string, sealed?: SealedObjectRef) => {
          byStorage.set(storageName, [...(byStorage.get(storageName) ?? []), key]);
          const dataKey = dataKeyOf(ctx.secrets, storageOf(ctx.state(), storageName), sealed);
          if (dataKey) dataKeys.set(`${storageName}/${key}`, dataKey);
        };
        for (const s of plan.shards) {
          want(plan.set.storageName, s.src.key, s.src.sealed);
          for (const b of s.binlogs) want(b.storageName, b.key, b.sealed);
        }
        for (const c of plan.set.catalog) want(plan.set.storageName, c.key);
        for (const [name, keys] of byStorage) {
          const storage = openBackupStorage(storageOf(ctx.state(), name));
          try {
            await requireIntact(storage, keys, new Map(keys.flatMap((k) => (dataKeys.has(`${name}/${k}`) ? [[k, dataKeys.get(`${name}/${k}`)!] as const] : []))));
          } finally {
            storage.close();
          }
        }
        const tables = await Promise.all(plan.shards.map(async ({ dst }) => {
          const master = masterOf(dst);
          return (await ctx.agents.mariadb(master.hostaddr).listTables(master.port)).tables.map((t) => `${dst.name}: ${t}`);
        }));
        const found = tables.flat();
        if (found.length > 0) {
          throw KcmError.of('CONFLICT', `paras.dst_cluster_id: cluster ${plan.dst.id} is not empty (${found.slice(0, 5).join(', ')}${found.length > 5 ? ', ...' : ''}); restore into a new, empty cluster`, { field: 'paras.dst_cluster_id' });
        }
        return { backupId: plan.set.id, stopTime: plan.stopTime };
      },
    },
    {
      name: 'restore each shard master from the full backup',
      async run(ctx) {
        const plan = committedPlan(ctx, target);
        const storage = openBackupStorage(storageOf(ctx.state(), plan.set.storageName));
        const gtids: Record<string, { srcShardId: string; gtid: string }> = Object.create(null);
        try {
          await forEachInstance(plan.shards, (s) => s.dst.name, async ({ src, dst }) => {
            const master = masterOf(dst);
            const where = storage.locate(src.key);
            // A sealed backup is opened by the destination's agent, which uses no record whose tag failed.
            const dataKey = dataKeyOf(ctx.secrets, storage.record, src.sealed);
            const reply = await ctx.agents.mariadbRestore(master.hostaddr).restoreFullBackup({
              op_id: opId(ctx.jobId, 'restore', `node-${master.id}`),
              spec: instanceSpec(plan.dst, master),
              admin: liveAccount(ctx.secrets, plan.dst, 'admin'),
              replication: liveAccount(ctx.secrets, plan.dst, 'replication'),
              storage: liveAccount(ctx.secrets, plan.dst, 'storage'),
              objects: [{ storage_agent_address: where.address, root: where.root, key: where.key, compression: src.compression ?? '', ...(dataKey ? { data_key: dataKey } : {}) }],
            });
            gtids[dst.id] = { srcShardId: src.shardId, gtid: reply.gtid_pos };
          });
        } finally {
          storage.close();
        }
        return gtids;
      },
    },
    {
      name: 'rebuild the standbys from the restored masters',
      async run(ctx) {
        const plan = committedPlan(ctx, target);
        const policy = { allowReplicaDelayS: DEFAULT_ALLOWED_REPLICA_DELAY_S, allowPullFromMaster: true, pvLimitMb: 0, needBackup: false };
        await forEachInstance(plan.shards, (s) => s.dst.name, async ({ dst }) => {
          const master = masterOf(dst);
          for (const node of Object.values(dst.nodes).filter((n) => n.id !== master.id)) {
            await copyIntoStandby(ctx.agents, ctx.secrets, opId(ctx.jobId, 'rebuild', `node-${node.id}`), plan.dst, dst, node, [master], policy, false);
          }
        });
        return null;
      },
    },
    {
      name: 'replay archived binlogs up to restore_time',
      async run(ctx) {
        const plan = committedPlan(ctx, target);
        const restored = ctx.outputs['restore each shard master from the full backup'];
        const replayed: Record<string, { gtid: string; files: number }> = Object.create(null);
        await forEachInstance(plan.shards, (s) => s.dst.name, async ({ dst, binlogs, stopGtid }) => {
          const master = masterOf(dst);
          const reply = await ctx.agents.mariadbRestore(master.hostaddr).replayBinlogs({
            op_id: opId(ctx.jobId, 'replay', `node-${master.id}`),
            port: master.port,
            binlogs: binlogs.map((b) => {
              const storage = storageOf(ctx.state(), b.storageName);
              const where = openBackupStorage(storage);
              try {
                const at = where.locate(b.key);
                const dataKey = dataKeyOf(ctx.secrets, storage, b.sealed);
                return { storage_agent_address: at.address, root: at.root, key: at.key, ...(dataKey ? { data_key: dataKey } : {}) };
              } finally {
                where.close();
              }
            }),
            start_gtid: own(restored, dst.id)?.gtid ?? '',
            stop_time: plan.stopTime,
            ...(stopGtid ? { stop_gtid: stopGtid } : {}),
          });
          replayed[dst.id] = { gtid: reply.gtid_pos, files: reply.files };
        });
        return replayed;
      },
    },
    {
      // After every shard's replay: a branch's decision is on another shard.
      name: 'end the multi-shard transactions open at restore_time',
      async run(ctx) {
        const plan = committedPlan(ctx, target);
        return endTransactionsOpenAtRestoreTime(ctx.agents, ctx.logger, plan.shards.map(({ src, dst }) => ({ srcShardId: src.shardId, dst })), ctx.signal);
      },
    },
    {
      name: 'sync the compute nodes and apply cpu limits',
      async run(ctx) {
        const dst = clusterOfStep(ctx, target.dstClusterId(ctx));
        await syncCompCatalogs(ctx.agents, ctx.secrets, ctx.jobId, 'catalog', dst, Object.values(dst.comps));
        // Restored and rebuilt instances are new processes, outside their predecessors' cgroups.
        const nodes = Object.values(dst.shards).flatMap((s) => Object.values(s.nodes));
        await forEachInstance(nodes, (n) => `mysql ${n.hostaddr}:${n.port}`, (n) => applyCpuLimit(ctx.agents, ctx.jobId, dst, n, 'mysql'));
        return null;
      },
    },
    {
      name: 'restore the compute catalog',
      async run(ctx) {
        const plan = committedPlan(ctx, target);
        const dst = clusterOfStep(ctx, target.dstClusterId(ctx));
        const dumps = await readCatalogDumps(ctx.state(), plan.set);
        const role = liveAccount(ctx.secrets, dst, 'computer').user;
        const restored: RestoredCatalogResult[] = [];
        await forEachInstance(Object.values(dst.comps), (c) => c.name, async (comp) => {
          for (const { record, dump } of dumps) {
            if (!dump) {
              restored.push({ comp_id: comp.id, database: record.database, objects: [], note: 'a plain-SQL dump (a backup from before custom-format dumps): kept, not restored' });
              continue;
            }
            const reply = await restoreCatalogOn(ctx.agents, comp, { op_id: opId(ctx.jobId, 'catalog-restore', `comp-${comp.id}-${record.database}`), port: comp.port, database: record.database, dump, role });
            restored.push({ comp_id: comp.id, database: record.database, objects: reply.objects, ...(reply.database_missing ? { note: 'no such database on this compute node (no shard holds it)' } : {}) });
            ctx.logger.info({ comp: comp.name, database: record.database, objects: reply.objects, database_missing: reply.database_missing }, 'compute catalog restored');
          }
        });
        return restored.sort((a, b) => Number(a.comp_id) - Number(b.comp_id) || a.database.localeCompare(b.database));
      },
    },
  ];
}

function restoreResult(outputs: Outputs, p: Paras): ClusterRestoreResult {
  const restored = outputs['restore each shard master from the full backup'];
  const replayed = outputs['replay archived binlogs up to restore_time'];
  const ended = outputs['end the multi-shard transactions open at restore_time'];
  const list: RestoredShardResult[] = Object.keys(restored).sort((a, b) => Number(a) - Number(b)).map((dstShardId) => ({
    src_shard_id: restored[dstShardId].srcShardId,
    dst_shard_id: dstShardId,
    backup_gtid: restored[dstShardId].gtid,
    restored_gtid: own(replayed, dstShardId)?.gtid ?? '',
    binlogs: String(own(replayed, dstShardId)?.files ?? 0),
    xa_committed: String(own(ended, dstShardId)?.committed ?? 0),
    xa_rolled_back: String(own(ended, dstShardId)?.rolledBack ?? 0),
  }));
  return {
    src_cluster_id: p.src_cluster_id,
    dst_cluster_id: p.dst_cluster_id,
    restore_time: String(outputs['verify the backup set and the empty destination'].stopTime),
    backup_id: outputs['verify the backup set and the empty destination'].backupId,
    list_shard: list,
    list_catalog: outputs['restore the compute catalog'] ?? [],
  };
}

/**
 * Nothing half-restored may serve: once a step after the checks failed, every cluster
 * database on the destination's masters is dropped (the standbys replicate the drops).
 * A master that cannot be reached keeps what it has; the note says which.
 */
export async function dropPartialRestore(ctx: StepContext<unknown, Outputs>, failedStep: string, dstClusterId: string): Promise<string | undefined> {
  if (failedStep === 'verify the backup set and the empty destination') return;
  const dst = own(ctx.state().clusters, dstClusterId);
  if (!dst) return;
  const left: string[] = [];
  await Promise.all(Object.values(dst.shards).map(async (shard) => {
    const master = shard.nodes[shard.masterNodeId];
    if (!master) return;
    try {
      await ctx.agents.mariadbRestore(master.hostaddr).dropClusterDatabases(opId(ctx.jobId, 'undo-restore', `node-${master.id}`), master.port);
    } catch (err) {
      left.push(`${shard.name} on ${master.hostaddr}:${master.port} (${errorNameOf(err, 'INSTANCE_FAILED')}: ${(err as Error).message})`);
    }
  }));
  if (left.length) return `the partly restored data could not be dropped from ${left.join('; ')}`;
}

/** The set's catalog dumps, read back whole (a few KiB each; the storage checks each sha256 as it reads); plain-SQL ones as null. */
async function readCatalogDumps(state: MetaState, set: BackupSetRecord): Promise<{ record: CatalogBackupRecord; dump: Buffer | null }[]> {
  if (set.catalog.length === 0) return [];
  const storage = openBackupStorage(storageOf(state, set.storageName));
  try {
    const dumps = [];
    for (const record of set.catalog) {
      if (record.format !== 'custom') {
        dumps.push({ record, dump: null });
        continue;
      }
      const pieces: Buffer[] = [];
      for await (const piece of storage.get(record.key)) pieces.push(piece);
      dumps.push({ record, dump: Buffer.concat(pieces) });
    }
    return dumps;
  } finally {
    storage.close();
  }
}

async function restoreCatalogOn(agents: Agents, comp: CompRecord, req: PgSchemaRestoreRequest): Promise<PgSchemaRestoreReply> {
  try {
    return await agents.catalogDump(comp.hostaddr).restorePgSchema(req);
  } catch (err) {
    throw new Error(`restoring the catalog of database ${req.database} on ${comp.name} at ${comp.hostaddr}:${comp.port} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}
