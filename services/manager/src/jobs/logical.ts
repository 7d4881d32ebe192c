// Job family: logical backup and restore (spec 4.4).
//
// logical_backup records one daily schedule per entry (meta/logical-backups.ts); the
// leader's scheduler (backup/logical-scheduler.ts) runs them. logical_restore picks, for
// each entry, the newest backup set of that object taken before its restore_time, checks
// every file of it against its checksum before anything is written, loads each shard's
// dump into the destination cluster's shard that is to hold it, and syncs the destination's
// compute nodes so they see the tables. done_dts names each restored table, comma after each.

import { MariaDbLogicalAgentClient } from '@kcm/agent-api';
import { KcmError, parseBackupWindow, parseRestoreTime, type LogicalBackupResult, type LogicalRestoreResult, type ObjectType, type ParasOf } from '@kcm/protocol';
import { doneDts } from '../backup/logical-objects';
import { shardsInOrder } from '../backup/logical-run';
import type { OpenLogicalStorage } from '../backup/logical-storage';
import { CommandKind } from '../meta/commands';
import type { LogicalBackupSet } from '../meta/logical-backups';
import type { ClusterRecord, MetaState } from '../meta/state';
import { clusterOfStep, readyCluster } from './cluster-lookup';
import { orThrow } from './errors';
import { opId, syncCompCatalogs, type EngineAgents } from './instance-ops';
import type { JobOf } from './workflow';

export interface LogicalJobDeps {
  openStorage: OpenLogicalStorage;
  /** A client of the MariaDbLogicalAgent of a host, for one operation; default: gRPC at the host's agent. */
  logicalAgent?(agents: EngineAgents, hostaddr: string): MariaDbLogicalAgentClient;
}

const defaultLogicalAgent = (agents: EngineAgents, hostaddr: string) => new MariaDbLogicalAgentClient(agents.agentAddress(hostaddr));

// ---------------------------------------------------------------- logical_backup

type BackupParas = ParasOf<'logical_backup'>;

export const logicalBackup: JobOf<'logical_backup', { 'record schedules': { keys: string[] } }> = {
  jobType: 'logical_backup',
  validate: (p, state) => void readyCluster(state, p.cluster_id),
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: (p: BackupParas) => [
    {
      name: 'record schedules',
      async run(ctx) {
        const entries = p.backup.map((e) => {
          const w = parseBackupWindow(e.backup_time);
          if (!w.ok) throw KcmError.of('INVALID_PARAS', `paras.backup: ${e.backup_time} ${w.rule}`);
          return { dbTable: e.db_table, window: e.backup_time, ...w.value };
        });
        // Re-running it replaces the schedules with the same ones: idempotent.
        return orThrow(await ctx.propose({ kind: CommandKind.LogicalBackupScheduled, at: ctx.now(), clusterId: p.cluster_id, jobId: ctx.jobId, objectType: p.backup_type, entries })) as { keys: string[] };
      },
    },
  ],
  result: (_o, p): LogicalBackupResult => ({ backup_type: p.backup_type, backup: p.backup.map((e) => ({ db_table: e.db_table, backup_time: e.backup_time })) }),
};

// ---------------------------------------------------------------- logical_restore

type RestoreParas = ParasOf<'logical_restore'>;

/** One shard's dump of a chosen backup set, and the destination shard it loads into. */
interface PlannedLoad {
  setId: string;
  storage: string;
  location: string;
  tables: string[];
  dstShardId: string;
}

interface RestoreOutputs {
  'choose backup sets': { loads: PlannedLoad[] };
  'load dumps': { bytes: number };
  'sync compute nodes': Record<string, never>;
}

/** The newest backup set of the object in the source cluster taken before restoreTimeMs. */
export function newestSetBefore(state: MetaState, srcClusterId: string, objectType: ObjectType, dbTable: string, restoreTimeMs: number): LogicalBackupSet | undefined {
  let best: LogicalBackupSet | undefined;
  for (const set of Object.values(state.logicalBackups.sets)) {
    if (set.clusterId !== srcClusterId || set.objectType !== objectType || set.dbTable !== dbTable || set.takenAt >= restoreTimeMs) continue;
    if (!best || set.takenAt > best.takenAt) best = set;
  }
  return best;
}

/** The chosen set of every restore entry, or NOT_FOUND naming the entry that has none. */
function chooseSets(state: MetaState, p: RestoreParas): LogicalBackupSet[] {
  return p.restore.map((entry, i) => {
    const parsed = parseRestoreTime(entry.restore_time);
    const field = `paras.restore[${i}].restore_time`;
    if (!parsed.ok) throw KcmError.of('INVALID_PARAS', `${field}: ${parsed.rule}`, { field });
    const set = newestSetBefore(state, p.src_cluster_id, p.restore_type, entry.db_table, parsed.value * 1000);
    if (!set) {
      throw KcmError.of('NOT_FOUND', `${field}: cluster ${p.src_cluster_id} has no logical backup of ${p.restore_type} ${entry.db_table} taken before ${entry.restore_time}`, { field });
    }
    return set;
  });
}

/**
 * The destination shard of one part: the same shard when restoring into the source
 * cluster, else the shard that holds one of its tables now, else the shard at the same
 * place in shard order as the part's in its set (parts are in the source's shard order).
 */
async function destinationShard(agents: EngineAgents, src: ClusterRecord | undefined, dst: ClusterRecord, set: LogicalBackupSet, partIndex: number): Promise<string> {
  const part = set.parts[partIndex];
  if (src?.id === dst.id && dst.shards[part.shardId]) return part.shardId;
  const shards = shardsInOrder(dst);
  for (const shard of shards) {
    const master = shard.nodes[shard.masterNodeId];
    if (!master) continue;
    const { tables } = await agents.mariadb(master.hostaddr).listTables(master.port);
    if (tables.some((t) => part.tables.includes(t))) return shard.id;
  }
  return shards[partIndex % shards.length].id;
}

export function logicalRestoreJob(deps: LogicalJobDeps): JobOf<'logical_restore', RestoreOutputs> {
  const logicalAgent = deps.logicalAgent ?? defaultLogicalAgent;
  return {
    jobType: 'logical_restore',
    validate: (p, state) => {
      readyCluster(state, p.dst_cluster_id, 'paras.dst_cluster_id');
      chooseSets(state, p);
    },
    lockKey: (p) => `cluster:${p.dst_cluster_id}`,
    steps: (p) => [
      {
        name: 'choose backup sets',
        async run(ctx) {
          const state = ctx.state();
          const dst = clusterOfStep(ctx, p.dst_cluster_id);
          const src = state.clusters[p.src_cluster_id];
          const loads: PlannedLoad[] = [];
          for (const set of chooseSets(state, p)) {
            for (let i = 0; i < set.parts.length; i++) {
              const part = set.parts[i];
              loads.push({ setId: set.id, storage: part.storage, location: part.location, tables: part.tables, dstShardId: await destinationShard(ctx.agents, src, dst, set, i) });
            }
          }
          // Every file is checked before anything is written: an altered set is refused whole.
          const bad: string[] = [];
          for (const load of loads) {
            const storage = deps.openStorage(state, load.storage);
            try {
              const check = await storage.verify(load.location).catch((err: unknown) => ({ ok: false, problem: err instanceof Error ? err.message : String(err) }));
              if (!check.ok) bad.push(`${load.location}: ${check.problem}`);
            } finally {
              storage.close();
            }
          }
          if (bad.length > 0) throw KcmError.of('DATA_CHECK_FAILED', `logical backup refused before anything was restored, its files do not match their checksums (${bad.join('; ')})`);
          return { loads };
        },
      },
      {
        name: 'load dumps',
        async run(ctx) {
          const dst = clusterOfStep(ctx, p.dst_cluster_id);
          let bytes = 0;
          let done = 0;
          for (const load of ctx.outputs['choose backup sets'].loads) {
            const shard = dst.shards[load.dstShardId];
            const master = shard?.nodes[shard.masterNodeId];
            if (!master) throw KcmError.of('NOT_FOUND', `shard ${load.dstShardId} of cluster ${dst.id} has no master to restore into`);
            const storage = deps.openStorage(ctx.state(), load.storage);
            const client = logicalAgent(ctx.agents, master.hostaddr);
            try {
              // A dump drops and re-creates each of its tables: loading it again after a crash is a retry.
              bytes += (await client.load(opId(ctx.jobId, 'logical-load', `${load.setId}-${load.dstShardId}`), master.port, storage.get(load.location))).bytes;
            } finally {
              client.close();
              storage.close();
            }
            await ctx.progress(++done, ctx.outputs['choose backup sets'].loads.length);
          }
          return { bytes };
        },
      },
      {
        name: 'sync compute nodes',
        async run(ctx) {
          const dst = clusterOfStep(ctx, p.dst_cluster_id);
          await syncCompCatalogs(ctx.agents, ctx.secrets, ctx.jobId, 'logical-restore-sync', dst, Object.values(dst.comps));
          return {};
        },
      },
    ],
    result: (o): LogicalRestoreResult => ({ done_dts: doneDts(o['choose backup sets'].loads.flatMap((l) => l.tables)) }),
  };
}
