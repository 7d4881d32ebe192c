// Job family: full backups (manual_backup_cluster, spec 4.4; DESIGN.md section 9).
//
// A cluster: per shard a mariabackup --stream of a healthy standby (the master only when no
// standby qualifies), pulled by the storage host's agent straight into backup storage at
// most `pvLimitMb` MB/s (compressed at the source unless configured not to), with its GTID
// position; meanwhile the compute catalog (pg_dump
// --schema-only of each cluster database from one compute node); then the backup set is
// recorded in the replicated state. Writes are never blocked (mariabackup takes no global
// lock that stops DML on InnoDB tables).
//
// cluster_id -1: the metadata, as one image of the replicated state at a Raft index, stored
// as a snapshot image a brand-new group can start from (backup/metadata-image.ts).
//
// Every agent command carries an op_id of the job and shard: a new leader resuming the job
// re-runs the step and the storage agent answers with the first attempt (or joins it while
// it still runs), so a leader change neither loses nor doubles a copy.

import { KcmError, METADATA_CLUSTER_ID, type ManualBackupClusterResult, type ParasOf } from '@kcm/protocol';
import { isAgentUnreachable, type MariaDbBackupSource, type MariaDbProbeReply, type PgSchemaDumpReply, type Agents } from '@kcm/agent-api';
import { CommandKind } from '../meta/commands';
import { defaultBackupStorage } from '../meta/backup';
import { own } from '../meta/dict';
import type { BackupObjectRecord, BackupSetRecord, BackupStorageRecord, CatalogBackupRecord, MetaState, ShardBackupRecord, ShardRecord } from '../meta/state';
import { metadataBackupImage } from '../backup/metadata-image';
import type { BackupStorage } from '../backup/storage';
import { newSealing, sealedRefOf } from '../backup/sealing';
import type { BackupStorageOpener } from './backup-storage';
import { clusterOfStep, readyCluster } from './cluster-lookup';
import { backUpHeld, resumeHeldStandbys } from './restore-drill/held-source';
import { errorNameOf, orThrow } from './framework/errors';
import { opId } from './instance-ops';
import type { JobOf, StepContext } from './framework/workflow';

/** The paras as committed: the storage is chosen at submission, so a resumed job keeps it. */
type BackupParas = ParasOf<'manual_backup_cluster'> & { storage_name?: string };

export interface BackupJobDeps {
  openStorage: BackupStorageOpener;
  /** Transfer limit of each shard's stream, MB/s (0 = none): the shard's own traffic comes first. */
  pvLimitMb: number;
  /** How shard streams are stored: 'zstd' compressed at the source, '' as they are (default). */
  compression?: '' | 'zstd';
  /** A standby lagging more than this is not a backup source. */
  maxReplicaDelayS: number;
  /** The Raft index the state machine has applied (a metadata backup records it). */
  appliedIndex(): number;
}

/**
 * The shards' backups and, taken at the same time, the catalog. (A job begun by an older
 * leader recorded this step's output as the bare list of shards, and dumps the catalog in
 * the next step.)
 */
type ShardsAndCatalog = { shards: ShardBackupRecord[]; catalog: CatalogBackupRecord[] };

interface BackupOutputs {
  'back up shards': ShardsAndCatalog | ShardBackupRecord[];
  'dump catalog': CatalogBackupRecord[];
  'store metadata image': BackupObjectRecord & { appliedIndex: number };
  'record backup set': BackupSetRecord;
}

const shardsOf = (taken: ShardsAndCatalog | ShardBackupRecord[] | undefined): ShardBackupRecord[] => (taken === undefined ? [] : Array.isArray(taken) ? taken : taken.shards);

export const backupSetPrefix = (clusterId: string, setId: string): string =>
  clusterId === METADATA_CLUSTER_ID ? `metadata/backup_${setId}/` : `cluster_${clusterId}/backup_${setId}/`;

function storageOf(state: MetaState, name: string | undefined): BackupStorageRecord {
  const record = name === undefined ? undefined : own(state.backupStorages, name);
  if (!record) throw KcmError.of('NOT_FOUND', `backup storage ${name ?? '(none)'} no longer exists`);
  return record;
}

async function withStorage<T>(ctx: StepContext<BackupParas>, deps: BackupJobDeps, use: (storage: BackupStorage) => Promise<T>): Promise<T> {
  const storage = deps.openStorage(storageOf(ctx.state(), ctx.paras.storage_name));
  try {
    return await use(storage);
  } finally {
    storage.close();
  }
}

/** Why a standby is no backup source now, or undefined when it is one. */
function standbyUnsuitable(probe: MariaDbProbeReply | undefined, maxDelayS: number): string | undefined {
  if (!probe) return 'its agent did not answer';
  if (probe.state !== 'online') return `it is ${probe.state}`;
  if (!probe.is_replica || !probe.io_running || !probe.sql_running) return 'it is not replicating';
  if (probe.seconds_behind_master < 0 || probe.seconds_behind_master > maxDelayS) return `its lag ${probe.seconds_behind_master} s is beyond ${maxDelayS} s`;
  return undefined;
}

/**
 * The healthy standby with the least lag, else the master when it answers; probed now.
 * When no node qualifies: AGENT_UNREACHABLE if no node's agent answered (the hosts are
 * the problem, not the instances), else INSTANCE_FAILED, each node's reason in the message.
 */
export async function chooseShardBackupSource(agents: Agents, shard: ShardRecord, maxDelayS: number): Promise<MariaDbBackupSource> {
  const nodes = Object.values(shard.nodes).sort((a, b) => Number(a.id) - Number(b.id));
  const failures: unknown[] = [];
  const probes = await Promise.all(nodes.map((n) => agents.mariadb(n.hostaddr).probe(n.port).catch((err: unknown) => void failures.push(err))));
  const reasons: string[] = [];
  let best: { index: number; lag: number } | undefined;
  nodes.forEach((node, i) => {
    if (node.id === shard.masterNodeId) return;
    const why = standbyUnsuitable(probes[i], maxDelayS);
    if (why) reasons.push(`standby ${node.hostaddr}:${node.port}: ${why}`);
    else if (!best || probes[i]!.seconds_behind_master < best.lag) best = { index: i, lag: probes[i]!.seconds_behind_master };
  });
  const masterIndex = nodes.findIndex((n) => n.id === shard.masterNodeId);
  const chosen = best?.index ?? (masterIndex >= 0 && probes[masterIndex]?.state === 'online' ? masterIndex : undefined);
  if (chosen === undefined) {
    const master = nodes[masterIndex];
    if (master) reasons.push(`master ${master.hostaddr}:${master.port}: ${probes[masterIndex] ? `it is ${probes[masterIndex]!.state}` : 'its agent did not answer'}`);
    const unanswered = failures.length === nodes.length && failures.every(isAgentUnreachable);
    const why = unanswered ? 'no node can be backed up, the agent of every node is unreachable' : 'no node can be backed up';
    throw KcmError.of(unanswered ? 'AGENT_UNREACHABLE' : 'INSTANCE_FAILED', `shard ${shard.name}: ${why} (${reasons.join('; ')})`, { cause: failures[0] });
  }
  const node = nodes[chosen];
  return { agent_address: agents.agentAddress(node.hostaddr), hostaddr: node.hostaddr, port: node.port, is_master: node.id === shard.masterNodeId };
}

async function backUpShards(ctx: StepContext<BackupParas, BackupOutputs>, deps: BackupJobDeps): Promise<ShardBackupRecord[]> {
  const cluster = clusterOfStep(ctx, ctx.paras.cluster_id);
  const shards = Object.values(cluster.shards).sort((a, b) => Number(a.id) - Number(b.id));
  let done = 0;
  return withStorage(ctx, deps, async (storage) => {
    // Shards in parallel: each stream comes from its own shard's host, each at pv_limit.
    const settled = await Promise.allSettled(
      shards.map(async (shard): Promise<ShardBackupRecord> => {
        const source = await chooseShardBackupSource(ctx.agents, shard, deps.maxReplicaDelayS);
        const key = `${backupSetPrefix(cluster.id, ctx.jobId)}shard_${shard.id}.mbstream`;
        // Encryption at rest: a data key of this object only, sealed in at the source (docs/backup-encryption.md).
        const sealing = newSealing(ctx.secrets, storage.record);
        ctx.logger.info({ job: ctx.jobId, shard: shard.id, source: `${source.hostaddr}:${source.port}`, master: source.is_master, key }, 'backing up shard');
        // A standby is held still while it is checksummed and backed up (restore-drill/held-source.ts).
        const held = await backUpHeld(ctx.agents, source, () =>
          storage.storePhysicalBackup(opId(ctx.jobId, 'backup', `shard-${shard.id}`), key, source, deps.pvLimitMb, {
            cluster_id: cluster.id,
            shard_id: shard.id,
            backup_id: ctx.jobId,
            ...sealing?.meta,
          }, sealing ? 'zstd' : deps.compression ?? '', sealing?.dataKey),
        );
        const stored = held.stored;
        if (held.checksumsOmitted) ctx.logger.warn({ job: ctx.jobId, shard: shard.id, why: held.checksumsOmitted }, 'backup recorded without table checksums');
        // Whatever the storage's kind, an object the job asked sealed carries where it was sealed:
        // one without it was stored in clear by an agent from before encryption.
        if (sealing && !stored.object.meta.sealed_at) throw KcmError.of('UNSUPPORTED', `shard ${shard.name}: backup storage ${storage.record.name} encrypts, and ${key} was stored without being sealed (an agent from before encryption?)`);
        await ctx.progress(++done, shards.length).catch(() => {});
        return {
          shardId: shard.id,
          shardName: shard.name,
          key: stored.object.key,
          bytes: stored.object.bytes,
          sha256: stored.object.sha256,
          gtidPos: stored.gtidPos,
          sourceHostaddr: stored.object.meta.source?.split(':')[0] ?? source.hostaddr,
          sourcePort: Number(stored.object.meta.source?.split(':')[1] ?? source.port),
          sourceWasMaster: source.is_master,
          transferMs: stored.transferMs,
          storedAt: ctx.now(),
          ...(stored.compression ? { compression: stored.compression, rawBytes: stored.rawBytes } : {}),
          // From the manifest, not `sealing`: a resumed job's PullBackup answers with the first
          // attempt's object, sealed with the first attempt's data key.
          ...sealedRefOf(stored.object.meta),
          ...(held.tableChecksums ? { tableChecksums: held.tableChecksums } : {}),
          ...(held.checksumsOmitted ? { checksumsOmitted: held.checksumsOmitted } : {}),
        };
      }),
    );
    const failed = settled.flatMap((s, i) => (s.status === 'rejected' ? [{ shard: shards[i], err: s.reason as unknown }] : []));
    if (failed.length > 0) {
      const message = failed.map((f) => `shard ${f.shard.name}: ${f.err instanceof Error ? f.err.message : String(f.err)}`).join('; ');
      throw KcmError.of(errorNameOf(failed[0].err, 'INSTANCE_FAILED'), `backup failed: ${message}`, { cause: failed[0].err });
    }
    return settled.map((s) => (s as PromiseFulfilledResult<ShardBackupRecord>).value);
  });
}

/** The catalog from the first compute node that answers (every compute node holds the same one). */
async function dumpCatalog(ctx: StepContext<BackupParas, BackupOutputs>, deps: BackupJobDeps): Promise<CatalogBackupRecord[]> {
  const cluster = clusterOfStep(ctx, ctx.paras.cluster_id);
  const comps = Object.values(cluster.comps).sort((a, b) => Number(a.id) - Number(b.id));
  if (comps.length === 0) return [];
  const problems: string[] = [];
  for (const comp of comps) {
    let reply: PgSchemaDumpReply;
    try {
      reply = await ctx.agents.catalogDump(comp.hostaddr).dumpPgSchema(comp.port);
    } catch (err) {
      problems.push(`${comp.name} at ${comp.hostaddr}:${comp.port}: ${err instanceof Error ? err.message : String(err)}`);
      continue;
    }
    return withStorage(ctx, deps, async (storage) => {
      const records: CatalogBackupRecord[] = [];
      for (const dump of reply.dumps) {
        // A custom-format dump is what a restore puts back (pg_restore); plain SQL, from an agent before it, is kept only.
        const custom = dump.format === 'custom';
        const key = `${backupSetPrefix(cluster.id, ctx.jobId)}catalog/${dump.database}.${custom ? 'pgdump' : 'sql'}`;
        const object = await storage.put(key, dump.dump, { database: dump.database, comp_id: comp.id, format: custom ? 'pg_dump-custom-schema-only' : 'pg_dump-schema-only' });
        records.push({ database: dump.database, compId: comp.id, key: object.key, bytes: object.bytes, sha256: object.sha256, ...(custom ? { format: 'custom' as const } : {}) });
      }
      return records;
    });
  }
  throw KcmError.of('INSTANCE_FAILED', `no compute node could dump the catalog: ${problems.join('; ')}`);
}

async function storeMetadataImage(ctx: StepContext<BackupParas, BackupOutputs>, deps: BackupJobDeps): Promise<BackupObjectRecord & { appliedIndex: number }> {
  // Read and serialised in one turn of the event loop: the image is the state exactly as
  // of one applied Raft index, nothing applied half-way.
  const appliedIndex = deps.appliedIndex();
  const image = metadataBackupImage(ctx.state(), { backupJobId: ctx.jobId, appliedIndex, takenAt: ctx.now() });
  return withStorage(ctx, deps, async (storage) => {
    const object = await storage.put(`${backupSetPrefix(METADATA_CLUSTER_ID, ctx.jobId)}metadata.json`, image, { applied_index: String(appliedIndex), backup_job_id: ctx.jobId, format: 'kcm-metadata-snapshot' });
    return { key: object.key, bytes: object.bytes, sha256: object.sha256, appliedIndex };
  });
}

function backupTimeLocal(ms: number): string {
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, '0');
  const offset = -d.getTimezoneOffset();
  const sign = offset >= 0 ? '+' : '-';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${sign}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
}

/** The result attachment of a recorded backup set (also what get_cluster_detail lists per set). */
export function backupSetResult(set: BackupSetRecord): ManualBackupClusterResult {
  const location = (key: string) => `${set.storageName}:${key}`;
  const shardBytes = set.shards.reduce((n, s) => n + s.bytes, 0) + set.catalog.reduce((n, c) => n + c.bytes, 0);
  return {
    backup_id: set.id,
    cluster_id: set.clusterId,
    storage: set.storageName,
    backup_time: String(Math.floor(set.finishedAt / 1000)),
    backup_time_local: backupTimeLocal(set.finishedAt),
    bytes: String(set.metadata ? set.metadata.bytes : shardBytes),
    list_shard: set.shards.map((s) => ({
      shard_id: s.shardId,
      shard_name: s.shardName,
      location: location(s.key),
      bytes: String(s.bytes),
      sha256: s.sha256,
      gtid_pos: s.gtidPos,
      source: `${s.sourceHostaddr}:${s.sourcePort}`,
      source_master: String(s.sourceWasMaster),
    })),
    list_catalog: set.catalog.map((c) => ({ database: c.database, location: location(c.key), bytes: String(c.bytes) })),
    ...(set.metadata ? { location: location(set.metadata.key), sha256: set.metadata.sha256, applied_index: String(set.metadata.appliedIndex) } : {}),
  };
}

export function manualBackupClusterJob(deps: BackupJobDeps): JobOf<'manual_backup_cluster', BackupOutputs, BackupParas> {
  return {
    jobType: 'manual_backup_cluster',
    validate(p, state) {
      if (p.cluster_id !== METADATA_CLUSTER_ID) readyCluster(state, p.cluster_id);
      if (!defaultBackupStorage(state)) throw KcmError.of('CONFLICT', 'no backup storage is registered; register one with create_backup_storage first');
      // Only a backup policy's run names a storage (Emit's paras have no storage_name).
      if (p.storage_name !== undefined && !own(state.backupStorages, p.storage_name)) throw KcmError.of('NOT_FOUND', `backup storage ${p.storage_name} of the cluster's backup policy no longer exists`);
    },
    resolve: (p, state) => ({ ...p, storage_name: p.storage_name ?? defaultBackupStorage(state)?.name }),
    // A cluster's backup runs in the cluster's queue (no delete or shrink under it); metadata
    // backups in their own.
    lockKey: (p) => (p.cluster_id === METADATA_CLUSTER_ID ? 'metadata-backup' : `cluster:${p.cluster_id}`),
    steps(p) {
      const record = {
        name: 'record backup set' as const,
        async run(ctx: StepContext<BackupParas, BackupOutputs>): Promise<BackupSetRecord> {
          const existing = own(ctx.state().backupSets, ctx.jobId);
          if (existing) return existing; // re-run after a crash: recorded already
          const job = ctx.state().jobs[ctx.jobId];
          const set: BackupSetRecord = {
            id: ctx.jobId,
            clusterId: p.cluster_id,
            storageName: storageOf(ctx.state(), p.storage_name).name,
            startedAt: job?.submittedAt ?? ctx.now(),
            finishedAt: ctx.now(),
            shards: shardsOf(ctx.outputs['back up shards']),
            catalog: ctx.outputs['dump catalog'] ?? [],
            ...(ctx.outputs['store metadata image'] ? { metadata: ctx.outputs['store metadata image'] } : {}),
          };
          orThrow(await ctx.propose({ kind: CommandKind.BackupSetRecorded, at: ctx.now(), set }));
          return set;
        },
      };
      if (p.cluster_id === METADATA_CLUSTER_ID) {
        return [{ name: 'store metadata image', run: (ctx) => storeMetadataImage(ctx, deps) }, record];
      }
      return [
        {
          name: 'back up shards',
          // The catalog dump (pg_dump --schema-only, a second or so) runs while the shards
          // stream instead of after them: it no longer adds to the backup's time.
          async run(ctx) {
            const [shards, catalog] = await Promise.all([backUpShards(ctx, deps), dumpCatalog(ctx, deps)]);
            return { shards, catalog };
          },
        },
        {
          name: 'dump catalog',
          run: async (ctx) => {
            const taken = ctx.outputs['back up shards'];
            return taken && !Array.isArray(taken) ? taken.catalog : dumpCatalog(ctx, deps);
          },
        },
        record,
      ];
    },
    result: (o) => backupSetResult(o['record backup set']),
    // A failed backup leaves no set; its stored files are deleted so that nothing in storage
    // looks like a backup no set accounts for. An unreachable storage keeps them (said in
    // the job's error): they are named by the job id and harmless.
    async rollback(ctx) {
      const prefix = backupSetPrefix(ctx.paras.cluster_id, ctx.jobId);
      // A standby whose hold this job's finally did not end (its leader died) applies again.
      const cluster = ctx.paras.cluster_id === METADATA_CLUSTER_ID ? undefined : own(ctx.state().clusters, ctx.paras.cluster_id);
      const unresumed = cluster ? await resumeHeldStandbys(ctx.agents, cluster) : [];
      const notResumed = unresumed.length > 0 ? `; applying was not confirmed resumed on ${unresumed.join('; ')}` : '';
      try {
        await withStorage(ctx, deps, (storage) => storage.delete(opId(ctx.jobId, 'drop-partial-backup', 'all'), prefix));
        return notResumed ? notResumed.slice(2) : undefined;
      } catch (err) {
        return `the files stored so far under ${prefix} were not deleted: ${err instanceof Error ? err.message : String(err)}${notResumed}`;
      }
    },
  };
}
