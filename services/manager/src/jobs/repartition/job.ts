// Job: repartition_tables {src_cluster_id, dst_cluster_id, repartition_tables} (also sent as
// table_repartition; spec 4.5): copies each source table into its pre-created, empty target
// table (possibly in another cluster, another database, another shard layout), then
// switches names: the target takes the source's name and the source is renamed aside.
//
//   check the rules          rules 1-7 against both tables, before anything is copied (check.ts)
//   record / copy / catch up / verify    the move engine (jobs/moves/engine.ts), target not created
//   switch names             hold writers, last catch-up, renames, re-point (switch-names.ts)
//
// Rule 8: a failed import (a row the target refuses, a verify mismatch) fails the job. A
// failed or cancelled job stops the catch-up and empties the target again (it was empty),
// so the user's pre-created table is as it was; the source keeps serving throughout.

import { type ParasOf, type RepartitionTablesResult } from '@kcm/protocol';
import { changeableCluster } from '../cluster-lookup';
import type { JobOf, StepContext } from '../workflow';
import { keptForeignTables } from '../moves/cutover';
import { copyPhase, prepareMove, stopCatchUp, verifyPhase, catchUpPhase, type CaughtUp, type CopySummary, type MoveDeps, type MoveSpec, type PreparedMove, type VerifySummary } from '../moves/engine';
import { q, withShard } from '../moves/shard-sql';
import { clusterStillThere } from '../cluster-lookup';
import { checkRepartition, masterLogin, pairsOf, type LocatedPair } from './check';
import { asideName, switchNames, unswitchNames, type SwitchSummary } from './switch-names';

type RepartitionParas = ParasOf<'repartition_tables'>;

interface RepartitionOutputs {
  'check the rules': LocatedPair[];
  'record the source positions': PreparedMove[];
  'copy rows': CopySummary[];
  'catch up from the binlog': CaughtUp[];
  'verify the copies': VerifySummary[];
  'switch names': SwitchSummary[];
}

type Ctx = StepContext<RepartitionParas, RepartitionOutputs>;

/** `D_$$_S` -> {database D, schema S}. */
const computeSide = (mariaDb: string) => {
  const cut = mariaDb.indexOf('_$$_');
  return { database: mariaDb.slice(0, cut), schema: mariaDb.slice(cut + 4) };
};

export function repartitionMoves(p: RepartitionParas, located: readonly LocatedPair[]): MoveSpec[] {
  return located.map((l, i) => ({
    key: `r${i}`,
    source: { clusterId: p.src_cluster_id, shardId: l.source.shardId, db: l.source.database, table: l.source.table },
    target: { clusterId: p.dst_cluster_id, shardId: l.target.shardId, db: l.target.database, table: l.target.table, create: false },
    foreign: { ...computeSide(l.source.database), table: l.source.table },
  }));
}

function movesOf(ctx: Ctx): MoveSpec[] {
  return repartitionMoves(ctx.paras, ctx.outputs['check the rules']);
}

async function eachMove<T>(ctx: Ctx, phase: (spec: MoveSpec, i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (const [i, spec] of movesOf(ctx).entries()) out.push(await phase(spec, i));
  return out;
}

export interface RepartitionDeps extends MoveDeps {
  /** How long an agent keeps a hold if the manager goes silent (ms). */
  holdMs?: number;
}

export function repartitionTablesJob(deps: RepartitionDeps = {}): JobOf<'repartition_tables', RepartitionOutputs> {
  const logins = (ctx: Ctx, spec: MoveSpec) => {
    const state = ctx.state();
    return {
      sourceLogin: masterLogin(ctx.secrets, clusterStillThere(state, spec.source.clusterId), spec.source.shardId),
      targetLogin: masterLogin(ctx.secrets, clusterStillThere(state, spec.target.clusterId), spec.target.shardId),
    };
  };
  return {
    jobType: 'repartition_tables',
    validate: (p, state) => {
      changeableCluster(state, p.src_cluster_id, 'paras.src_cluster_id');
      changeableCluster(state, p.dst_cluster_id, 'paras.dst_cluster_id');
      pairsOf(p.repartition_tables);
    },
    // One lock: the source cluster's (the one whose table changes name under its users).
    lockKey: (p) => `cluster:${p.src_cluster_id}`,
    steps: () => [
      {
        name: 'check the rules',
        run: (ctx: Ctx) =>
          checkRepartition({ agents: ctx.agents, secrets: ctx.secrets, state: ctx.state(), srcClusterId: ctx.paras.src_cluster_id, dstClusterId: ctx.paras.dst_cluster_id, repartitionTables: ctx.paras.repartition_tables }),
      },
      { name: 'record the source positions', run: (ctx: Ctx) => eachMove(ctx, (m) => prepareMove(ctx, m)) },
      { name: 'copy rows', run: (ctx: Ctx) => eachMove(ctx, (m, i) => copyPhase(ctx, m, ctx.outputs['record the source positions'][i], deps)) },
      { name: 'catch up from the binlog', run: (ctx: Ctx) => eachMove(ctx, (m, i) => catchUpPhase(ctx, m, ctx.outputs['record the source positions'][i], deps)) },
      {
        name: 'verify the copies',
        run: (ctx: Ctx) => eachMove(ctx, (m, i) => verifyPhase(ctx, m, ctx.outputs['record the source positions'][i], ctx.outputs['catch up from the binlog'][i], deps)),
      },
      {
        name: 'switch names',
        run: (ctx: Ctx) =>
          eachMove(ctx, (m, i) => {
            const src = clusterStillThere(ctx.state(), m.source.clusterId);
            const inPlace = m.source.clusterId === m.target.clusterId && m.source.db === m.target.db;
            return switchNames(ctx, {
              spec: m,
              prepared: ctx.outputs['record the source positions'][i],
              caughtAt: ctx.outputs['catch up from the binlog'][i].at,
              ...logins(ctx, m),
              comps: Object.values(src.comps).map((c) => ({ hostaddr: c.hostaddr, port: c.port })),
              repointTo: inPlace ? `shard_${m.target.shardId}` : '',
              agent: deps.foreignTables ?? keptForeignTables((h) => ctx.agents.agentAddress(h)),
              moveDeps: deps,
              holdMs: deps.holdMs ?? 30_000,
            });
          }),
      },
    ],
    result: (o, p): RepartitionTablesResult => {
      const moves = repartitionMoves(p, o['check the rules']);
      return {
        src_cluster_id: p.src_cluster_id,
        dst_cluster_id: p.dst_cluster_id,
        blocked_ms_max: String(Math.max(0, ...o['switch names'].map((s) => s.blocked_ms))),
        list_table: moves.map((m, i) => ({
          source: `${m.source.db}.${m.source.table}`,
          target: `${m.target.db}.${m.target.table}`,
          table: o['switch names'][i].table,
          old_table: o['switch names'][i].old_table,
          rows_copied: String(o['copy rows'][i].rows),
          rows_resynced: String(o['catch up from the binlog'][i].rows_resynced + o['switch names'][i].rows_resynced),
          rows_verified: String(o['verify the copies'][i].rows),
          copy_ms: String(o['copy rows'][i].ms),
          blocked_ms: String(o['switch names'][i].blocked_ms),
        })),
      };
    },
    async rollback(ctx, failedStep) {
      const located = ctx.outputs['check the rules'];
      if (failedStep === 'check the rules' || !located) return undefined;
      const notes: string[] = [];
      for (const m of movesOf(ctx)) {
        try {
          await stopCatchUp(ctx.jobId, m.key);
          const { sourceLogin, targetLogin } = logins(ctx, m);
          // A switch that got as far as the renames is undone first: the source serves under its name.
          await unswitchNames(sourceLogin, targetLogin, m, asideName(m.source.table, ctx.jobId));
          // The check step found the target empty: empty it again (definition, keys and grants untouched).
          await withShard(targetLogin, (c) => c.query(`TRUNCATE TABLE ${q(m.target.db)}.${q(m.target.table)}`));
        } catch (err) {
          notes.push(`target ${m.target.db}.${m.target.table} on shard ${m.target.shardId} of cluster ${m.target.clusterId} could not be emptied again: ${(err as Error).message}`);
        }
      }
      return notes.length > 0 ? notes.join('; ') : undefined;
    },
  };
}
