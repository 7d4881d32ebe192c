// Job family: logical backup and restore (spec 4.4).
//
// logical_backup checks that every entry's object is on some shard of the cluster (a
// partitioned parent: some of its partitions), records one daily schedule per entry
// (meta/logical-backups.ts), and, for each entry whose window is open now, waits for the
// run the leader's scheduler (leader/logical-backup-scheduler.ts) starts at once: the job answers
// done only once that run stored its backup set, and fails with the run's error otherwise.
// A logical_backup that stored nothing never answers done. logical_restore picks, for
// each entry, the newest backup set of that object taken before its restore_time, checks
// every file of it against its checksum before anything is written, loads each shard's
// dump into the destination cluster's shard that is to hold it, and syncs the destination's
// compute nodes so they see the tables (each must take every restored table; a partitioned
// parent is rebuilt from its partitions). done_dts names each restored table (a partitioned
// parent first, then its partitions), a comma after each.

import type { Agents } from '@kcm/agent-api';
import { ERROR_CATALOG, KcmError, parseBackupWindow, type ErrorName, parseRestoreTime, type LogicalBackupResult, type LogicalRestoreResult, type ObjectType, type ParasOf } from '@kcm/protocol';
import { setTimeout as sleep } from 'node:timers/promises';
import { doneDts, objectNotFound, restoredTables } from '../backup/logical-objects';
import { shardsHolding, shardsInOrder } from '../backup/logical-run';
import { openWindowAt } from '../backup/logical-window';
import type { OpenLogicalStorage } from '../backup/logical-storage';
import { syncRestoredCatalogs } from '../backup/logical-sync';
import { CommandKind } from '../meta/commands';
import { scheduleKeyOf, type LogicalBackupSet } from '../meta/logical-backup-records';
import type { ClusterRecord, MetaState } from '../meta/state';
import { clusterOfStep, readyCluster } from './cluster-lookup';
import { orThrow } from './framework/errors';
import { opId } from './instance-ops';
import type { JobOf } from './framework/workflow';

export interface LogicalJobDeps {
  openStorage: OpenLogicalStorage;

}


// ---------------------------------------------------------------- logical_backup

type BackupParas = ParasOf<'logical_backup'>;

/** How often a logical_backup waiting for the run of an open window looks at the replicated state. */
const RUN_POLL_MS = 250;

interface BackupOutputs {
  'check objects': { holders: { dbTable: string; shards: string[] }[] };
  'record schedules': { keys: string[] };
  'wait for the open windows\' runs': { sets: string[] };
}

const windowsOf = (p: BackupParas) =>
  p.backup.map((e, i) => {
    const w = parseBackupWindow(e.backup_time);
    if (!w.ok) throw KcmError.of('INVALID_PARAS', `paras.backup[${i}].backup_time: ${e.backup_time} ${w.rule}`, { field: `paras.backup[${i}].backup_time` });
    return { dbTable: e.db_table, window: e.backup_time, ...w.value };
  });

/** The catalog name a failed run's recorded error starts with (`NAME: message`, leader/logical-backup-scheduler.ts). */
const errorNameOfRun = (error: string | null): ErrorName => ERROR_CATALOG.find((e) => error?.startsWith(`${e.name}: `))?.name ?? 'INTERNAL';

/**
 * The id of the set stored by the run of `key`'s window that opened on `windowDay`, once that
 * run finished; throws its error when it failed. Undefined while it has not finished.
 */
function finishedRun(state: MetaState, key: string, windowDay: string): string | undefined {
  const run = state.logicalBackups.schedules[key]?.lastRun;
  if (!run || run.windowDay !== windowDay || run.finishedAt === null) return undefined;
  if (!run.ok) throw KcmError.of(errorNameOfRun(run.error), `the logical backup run of ${key} in the window of ${windowDay} stored nothing (${run.attempts} attempts): ${run.error ?? 'failed'}`);
  if (!state.logicalBackups.sets[run.runId]) throw KcmError.of('INTERNAL', `the logical backup run ${run.runId} of ${key} finished without a backup set`);
  return run.runId;
}

export function logicalBackupJob(deps: LogicalJobDeps): JobOf<'logical_backup', BackupOutputs> {
  return {
    jobType: 'logical_backup',
    validate: (p, state) => {
      readyCluster(state, p.cluster_id);
      windowsOf(p);
    },
    lockKey: (p) => `cluster:${p.cluster_id}`,
    steps: (p: BackupParas) => [
      {
        // Before anything is recorded: a schedule of an object no shard holds would only ever fail.
        name: 'check objects',
        async run(ctx) {
          const cluster = clusterOfStep(ctx, p.cluster_id);
          const holders: { dbTable: string; shards: string[] }[] = [];
          for (const [i, e] of p.backup.entries()) {
            const found = await shardsHolding(ctx.agents, cluster, { objectType: p.backup_type, dbTable: e.db_table });
            if (found.length === 0) {
              const err = objectNotFound(cluster.id, p.backup_type, e.db_table);
              throw KcmError.of('NOT_FOUND', `paras.backup[${i}].db_table: ${err.message}`, { field: `paras.backup[${i}].db_table` });
            }
            holders.push({ dbTable: e.db_table, shards: found.map((h) => h.shard.id) });
          }
          return { holders };
        },
      },
      {
        name: 'record schedules',
        async run(ctx) {
          // Re-running it replaces the schedules with the same ones: idempotent.
          return orThrow(await ctx.propose({ kind: CommandKind.LogicalBackupScheduled, at: ctx.now(), clusterId: p.cluster_id, jobId: ctx.jobId, objectType: p.backup_type, entries: windowsOf(p) })) as { keys: string[] };
        },
      },
      {
        // The scheduler starts the run of an open window at once (it is notified of the
        // schedule); a dump takes as long as the object is big, so there is no deadline here,
        // only the job's cancellation and the cluster leaving 'ready' (runs are not started then).
        name: "wait for the open windows' runs",
        async run(ctx) {
          const waiting = windowsOf(p).flatMap((w) => {
            const open = openWindowAt(ctx.now(), w);
            return open ? [{ key: scheduleKeyOf(p.cluster_id, p.backup_type, w.dbTable), windowDay: open.windowDay }] : [];
          });
          const sets: string[] = [];
          for (const w of waiting) {
            for (;;) {
              const state = ctx.state();
              const setId = finishedRun(state, w.key, w.windowDay);
              if (setId !== undefined) {
                sets.push(setId);
                break;
              }
              const status = state.clusters[p.cluster_id]?.status;
              if (status !== 'ready') throw KcmError.of('CONFLICT', `cluster ${p.cluster_id} is ${status ?? 'gone'}; the logical backup run of ${w.key} did not finish`);
              await sleep(RUN_POLL_MS, undefined, { signal: ctx.signal });
            }
          }
          return { sets };
        },
      },
    ],
    result: (_o, p): LogicalBackupResult => ({ backup_type: p.backup_type, backup: p.backup.map((e) => ({ db_table: e.db_table, backup_time: e.backup_time })) }),
  };
}

// ---------------------------------------------------------------- logical_restore

type RestoreParas = ParasOf<'logical_restore'>;

/** One shard's dump of a chosen backup set, and the destination shard it loads into. */
interface PlannedLoad {
  /** What the set restores, as done_dts names it (on the set's first load only; absent from jobs planned before it). */
  restores?: string[];
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
async function destinationShard(agents: Agents, src: ClusterRecord | undefined, dst: ClusterRecord, set: LogicalBackupSet, partIndex: number): Promise<string> {
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
            const restores = restoredTables(set.objectType, set.dbTable, set.parts.flatMap((part) => part.tables));
            for (let i = 0; i < set.parts.length; i++) {
              const part = set.parts[i];
              loads.push({ ...(i === 0 ? { restores } : {}), setId: set.id, storage: part.storage, location: part.location, tables: part.tables, dstShardId: await destinationShard(ctx.agents, src, dst, set, i) });
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
            const client = ctx.agents.mariadbLogical(master.hostaddr);
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
          // Every restored shard table must be on every compute node (a partition attached to its parent).
          const tables = new Set(ctx.outputs['choose backup sets'].loads.flatMap((l) => l.tables));
          await syncRestoredCatalogs(ctx.agents, ctx.secrets, ctx.jobId, dst, tables);
          return {};
        },
      },
    ],
    result: (o): LogicalRestoreResult => ({ done_dts: doneDts(o['choose backup sets'].loads.flatMap((l) => l.restores ?? l.tables)) }),
  };
}
