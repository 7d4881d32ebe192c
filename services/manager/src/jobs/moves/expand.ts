// Job: expand_cluster {cluster_id, src_shard_id, dst_shard_id, table_list, drop_old_table}:
// moves whole tables to another shard of the same cluster with the move engine (engine.ts),
// one job step per phase over every listed table, so a new leader resumes at the phase
// (and the copy at the chunk). drop_old_table: `1`/true drops each source table after its
// cut-over; `0`/false (the default) renames it aside to `<table>__moved_<job_id>` in its
// database, so nothing is lost until the user drops it.
//
// Partitions move like tables: the compute nodes' agents re-point a partition under its
// parent (cut-over), and a partition retired aside loses its partition record.
//
// Before anything is made, the first step checks every listed table (precheck.ts) and
// refuses the job naming each one that cannot be moved. A failed or cancelled job (cancel_job
// stops it between phases) stops the catch-ups and drops the target tables it created for
// tables not yet cut over, which keep being served by the source shard as before; tables
// that had cut over stay moved and their sources are retired as drop_old_table says, so no
// live-named copy is left behind; the job's error names which tables moved and which did
// not, and a retry of those that did not works.

import { KcmError, parseQualifiedTable, type ExpandClusterResult, type ParasOf } from '@kcm/protocol';
import { changeableCluster, shardOf } from '../cluster-lookup';
import type { JobOf, StepContext } from '../framework/workflow';
import { foreignTablesOf } from './cutover';
import { isPrecheckRefusal, precheckMoves } from './precheck';
import {
  abandonMove,
  catchUpPhase,
  copyPhase,
  cutOverPhase,
  prepareMove,
  retireSource,
  storageLogin,
  verifyPhase,
  type CaughtUp,
  type CopySummary,
  type CutOverSummary,
  type MoveDeps,
  type MoveSpec,
  type PreparedMove,
  type VerifySummary,
} from './engine';

type ExpandParas = ParasOf<'expand_cluster'>;

interface ExpandOutputs {
  'record the source positions': PreparedMove[];
  'copy rows': CopySummary[];
  'catch up from the binlog': CaughtUp[];
  'verify the copies': VerifySummary[];
  'cut over': CutOverSummary[];
  'retire the source tables': string[];
}

/** The move of each listed table: same database and name on the destination shard. */
export function expandMoves(p: ExpandParas): MoveSpec[] {
  return p.table_list.map((name, i) => {
    const t = parseQualifiedTable(name);
    if (!t.ok) throw KcmError.of('INVALID_PARAS', `paras.table_list[${i}]: ${name} must be <database>.<schema>.<table>`, { field: `paras.table_list[${i}]` });
    const db = `${t.value.database}_$$_${t.value.schema}`;
    return {
      key: String(i),
      source: { clusterId: p.cluster_id, shardId: p.src_shard_id, db, table: t.value.table },
      target: { clusterId: p.cluster_id, shardId: p.dst_shard_id, db, table: t.value.table, create: true },
      foreign: { database: t.value.database, schema: t.value.schema, table: t.value.table },
    };
  });
}

function checkParas(p: ExpandParas, state: Parameters<NonNullable<JobOf<'expand_cluster', ExpandOutputs>['validate']>>[1]): void {
  const cluster = changeableCluster(state, p.cluster_id);
  shardOf(cluster, p.src_shard_id, 'paras.src_shard_id');
  shardOf(cluster, p.dst_shard_id, 'paras.dst_shard_id');
  if (p.src_shard_id === p.dst_shard_id) throw KcmError.of('INVALID_PARAS', `paras.dst_shard_id: ${p.dst_shard_id} is the source shard; a move needs another shard`, { field: 'paras.dst_shard_id' });
  const seen = new Map<string, number>();
  for (const [i, spec] of expandMoves(p).entries()) {
    const name = `${spec.source.db}.${spec.source.table}`;
    const first = seen.get(name);
    if (first !== undefined) throw KcmError.of('INVALID_PARAS', `paras.table_list[${i}]: ${p.table_list[i]} is listed twice (also at [${first}])`, { field: `paras.table_list[${i}]` });
    seen.set(name, i);
  }
}

/**
 * Runs `phase` for each move in turn (the copy step runs them at once instead: copyAll).
 * A failure names its table, and the tables before it that this phase finished.
 */
async function eachMove<T>(p: ExpandParas, phase: (spec: MoveSpec, i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (const [i, spec] of expandMoves(p).entries()) {
    try {
      out.push(await phase(spec, i));
    } catch (err) {
      const done = out.length > 0 ? ` (done for ${p.table_list.slice(0, i).join(', ')})` : '';
      const message = `table ${p.table_list[i]}${done}: ${(err as Error).message}`;
      throw err instanceof KcmError ? KcmError.of(err.errorName, message, { cause: err }) : new Error(message, { cause: err });
    }
  }
  return out;
}

/**
 * Copies every listed table at once, each by its source master's agent straight into the
 * target master (the copies are I/O bound on two hosts, not on the manager). The step's
 * progress is the rows all copies committed. A copy that fails stops the others and fails
 * the step naming its table.
 */
async function copyAll(ctx: StepContext<ExpandParas, ExpandOutputs>, p: ExpandParas, deps: MoveDeps): Promise<CopySummary[]> {
  const moves = expandMoves(p);
  const rows = moves.map(() => 0);
  const stopOthers = new AbortController();
  let first: { i: number; err: Error } | null = null;
  const settled = await Promise.allSettled(
    moves.map(async (m, i) => {
      try {
        return await copyPhase(ctx, m, ctx.outputs['record the source positions'][i], deps, {
          signal: stopOthers.signal,
          progress: (n) => {
            rows[i] = n;
            return ctx.progress(rows.reduce((a, b) => a + b, 0), 0);
          },
        });
      } catch (err) {
        if (!first) {
          first = { i, err: err as Error };
          stopOthers.abort(err);
        }
        throw err;
      }
    }),
  );
  const failed = first as { i: number; err: Error } | null;
  if (failed) {
    const message = `table ${p.table_list[failed.i]}: ${failed.err.message}`;
    throw failed.err instanceof KcmError ? KcmError.of(failed.err.errorName, message, { cause: failed.err }) : new Error(message, { cause: failed.err });
  }
  return settled.map((r) => (r as PromiseFulfilledResult<CopySummary>).value);
}

export function expandClusterJob(deps: MoveDeps = {}): JobOf<'expand_cluster', ExpandOutputs> {
  type Ctx = StepContext<ExpandParas, ExpandOutputs>;
  return {
    jobType: 'expand_cluster',
    validate: checkParas,
    lockKey: (p) => `cluster:${p.cluster_id}`,
    dryRunPlan: (p) => ({
      moves: expandMoves(p).map((m) => ({ table: `${m.source.db}.${m.source.table}`, from_shard: m.source.shardId, to_shard: m.target.shardId, old_table: p.drop_old_table ? 'dropped' : `renamed to ${m.source.table}__moved_<job_id>` })),
    }),
    steps: (p) => [
      {
        name: 'record the source positions',
        run: async (ctx: Ctx) => {
          const foreignTables = foreignTablesOf(ctx.agents);
          await precheckMoves(ctx, expandMoves(p), p.table_list, { login: storageLogin, foreignTables });
          return eachMove(p, (m) => prepareMove(ctx, m));
        },
      },
      { name: 'copy rows', run: (ctx: Ctx) => copyAll(ctx, p, deps) },
      { name: 'catch up from the binlog', run: (ctx: Ctx) => eachMove(p, (m, i) => catchUpPhase(ctx, m, ctx.outputs['record the source positions'][i], deps)) },
      {
        name: 'verify the copies',
        run: (ctx: Ctx) => eachMove(p, (m, i) => verifyPhase(ctx, m, ctx.outputs['record the source positions'][i], ctx.outputs['catch up from the binlog'][i], deps)),
      },
      {
        name: 'cut over',
        run: (ctx: Ctx) => eachMove(p, (m, i) => cutOverPhase(ctx, m, ctx.outputs['record the source positions'][i], ctx.outputs['catch up from the binlog'][i], deps)),
      },
      { name: 'retire the source tables', run: (ctx: Ctx) => eachMove(p, (m) => retireSource(ctx, m, p.drop_old_table ? 'drop' : 'rename')) },
    ],
    result: (o, p): ExpandClusterResult => {
      const blocked = o['cut over'].map((c) => c.blocked_ms);
      return {
        cluster_id: p.cluster_id,
        src_shard_id: p.src_shard_id,
        dst_shard_id: p.dst_shard_id,
        blocked_ms_max: String(Math.max(0, ...blocked)),
        list_table: expandMoves(p).map((m, i) => ({
          table: p.table_list[i],
          rows_copied: String(o['copy rows'][i].rows),
          rows_resynced: String(o['cut over'][i].rows_resynced),
          rows_verified: String(o['verify the copies'][i].rows),
          copy_ms: String(o['copy rows'][i].ms),
          copy_started_at: String(o['copy rows'][i].started_at ?? ''),
          copy_ended_at: String(o['copy rows'][i].ended_at ?? ''),
          blocked_ms: String(o['cut over'][i].blocked_ms),
          cut_over_ms: String(o['cut over'][i].cut_over_ms ?? ''),
          old_table: o['retire the source tables'][i],
        })),
      };
    },
    async rollback(ctx, failedStep, error) {
      if (failedStep === 'retire the source tables') return 'every table was cut over; the source tables that were not retired are still on the source shard';
      if (isPrecheckRefusal(error)) return undefined;
      const p = ctx.paras;
      const moved: string[] = [];
      const notMoved: string[] = [];
      const problems: string[] = [];
      for (const [i, m] of expandMoves(p).entries()) {
        try {
          const what = await abandonMove(ctx, m, deps);
          if (what === 'partial') {
            problems.push(`${p.table_list[i]} is read from shard ${p.dst_shard_id} by some compute nodes and from shard ${p.src_shard_id} by others; both copies were left as they are`);
            continue;
          }
          if (what !== 'moved') {
            notMoved.push(p.table_list[i]);
            continue;
          }
          // Only this job's cut-over moves a table after the pre-check found it on the source.
          if (failedStep !== 'cut over') {
            problems.push(`${p.table_list[i]} is read from shard ${p.dst_shard_id} already, though the job failed before its cut-over; its source on shard ${p.src_shard_id} was left as it is`);
            continue;
          }
          // Cut over: it stays on the target, and its source goes as a finished move's would,
          // so no copy is left under the live name on the source shard.
          const aside = await retireSource(ctx, m, p.drop_old_table ? 'drop' : 'rename');
          moved.push(`${p.table_list[i]} (source ${aside ? `renamed to ${aside}` : 'dropped'})`);
        } catch (err) {
          problems.push(`${p.table_list[i]} could not be cleaned up on shard ${m.source.shardId} or ${m.target.shardId}: ${(err as Error).message}`);
        }
      }
      if (moved.length === 0 && problems.length === 0) return undefined;
      const parts = [
        moved.length > 0 ? `moved to shard ${p.dst_shard_id}: ${moved.join(', ')}` : 'no table moved',
        notMoved.length > 0 ? `not moved, still on shard ${p.src_shard_id}: ${notMoved.join(', ')}` : '',
        ...problems,
      ];
      return parts.filter(Boolean).join('; ');
    },
  };
}
