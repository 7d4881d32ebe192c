// Job: repartition_tables {src_cluster_id, dst_cluster_id, repartition_tables} (also sent as
// table_repartition; spec 4.5): copies each source table into its pre-created, empty target
// table (possibly in another cluster, another database, another shard layout), then
// switches names: the target takes the source's name and the source is renamed aside.
//
//   check the rules          rules 1-7 against both tables, before anything is copied (check.ts)
//   record / copy / catch up / verify    the move engine (jobs/moves/engine.ts), target not created
//   switch names             hold writers, last catch-up, renames, re-point (switch-names.ts)
//
// A partitioned side (a parent on the compute nodes, its partitions on shards; check.ts,
// partitions.ts) is moved in pieces: one move per source partition, into the target piece
// (the plain target, or the target partition whose bound holds it); pieces that share a
// target are copied and verified together (moves/pieces.ts); the switch renames the parents
// on the compute nodes and the partitions' records on the shards (parent-switch.ts).
//
// Rule 8: a failed import (a row the target refuses, a verify mismatch) fails the job. A
// failed or cancelled job stops the catch-up and empties the target again (it was empty),
// so the user's pre-created table is as it was; the source keeps serving throughout.

import { type ParasOf, type RepartitionTablesResult } from '@kcm/protocol';
import { changeableCluster } from '../cluster-lookup';
import type { JobOf, StepContext } from '../framework/workflow';
import { foreignTablesOf } from '../moves/cutover';
import { copyPhase, prepareMove, stopCatchUp, verifyPhase, catchUpPhase, type CaughtUp, type CopySummary, type MoveDeps, type MoveSpec, type PreparedMove, type VerifySummary } from '../moves/engine';
import { q, withShard } from '../moves/shard-sql';
import { clusterStillThere } from '../cluster-lookup';
import { checkRepartition, masterLogin, pairsOf, type LocatedPair } from './check';
import { asideName, switchNames, unswitchNames, type SwitchSummary } from './switch-names';
import { byTarget, copyPieces, verifyTarget } from '../moves/pieces';
import { switchParent, unswitchParent, type ParentSwitchPlan } from './parent-switch';

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

/** The moves of every pair, in order: one per pair of plain tables, one per source piece of a partitioned pair. */
export function repartitionMoves(p: RepartitionParas, located: readonly LocatedPair[]): MoveSpec[] {
  return located.flatMap((l, i) => movesOfPair(p, l, i));
}

function movesOfPair(p: RepartitionParas, l: LocatedPair, i: number): MoveSpec[] {
  const foreign = (table: string) => ({ ...computeSide(l.source.database), table });
  if (!l.pieces) {
    return [{
      key: `r${i}`,
      source: { clusterId: p.src_cluster_id, shardId: l.source.shardId, db: l.source.database, table: l.source.table },
      target: { clusterId: p.dst_cluster_id, shardId: l.target.shardId, db: l.target.database, table: l.target.table, create: false },
      foreign: foreign(l.source.table),
    }];
  }
  const { source, target, into } = l.pieces;
  return source.pieces.map((piece, k) => ({
    key: `r${i}p${k}`,
    source: { clusterId: p.src_cluster_id, shardId: piece.shardId, db: l.source.database, table: piece.table },
    target: { clusterId: p.dst_cluster_id, shardId: target.pieces[into[k]].shardId, db: l.target.database, table: target.pieces[into[k]].table, create: false },
    foreign: foreign(piece.table),
  }));
}

/** Each pair's moves' indexes among repartitionMoves. */
function pairMoveIndexes(p: RepartitionParas, located: readonly LocatedPair[]): number[][] {
  let next = 0;
  return located.map((l, i) => movesOfPair(p, l, i).map(() => next++));
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
  const parentPlan = (ctx: Ctx, l: LocatedPair, idx: number[]): ParentSwitchPlan => {
    const moves = movesOf(ctx);
    const cluster = clusterStillThere(ctx.state(), ctx.paras.src_cluster_id);
    return {
      pair: l as ParentSwitchPlan['pair'],
      // (A rollback before the positions were recorded has no moves to hold: it only switches back.)
      moves: idx.flatMap((i) => {
        const prepared = ctx.outputs['record the source positions']?.[i];
        return prepared ? [{ spec: moves[i], prepared, caughtAt: ctx.outputs['catch up from the binlog']?.[i]?.at ?? prepared.start }] : [];
      }),
      login: (shardId) => masterLogin(ctx.secrets, cluster, shardId),
      comps: Object.values(cluster.comps).map((c) => ({ hostaddr: c.hostaddr, port: c.port })),
      compute: computeSide(l.source.database),
      aside: asideName(l.source.table, ctx.jobId),
      moveDeps: deps,
      holdMs: deps.holdMs ?? 30_000,
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
      {
        name: 'copy rows',
        run: async (ctx: Ctx) => {
          const moves = movesOf(ctx);
          const prepared = ctx.outputs['record the source positions'];
          const out: CopySummary[] = [];
          for (const [n, l] of ctx.outputs['check the rules'].entries()) {
            const idx = pairMoveIndexes(ctx.paras, ctx.outputs['check the rules'])[n];
            if (!l.pieces) out[idx[0]] = await copyPhase(ctx, moves[idx[0]], prepared[idx[0]], deps);
            else (await copyPieces(ctx, idx.map((i) => moves[i]), idx.map((i) => prepared[i]), deps)).forEach((c, k) => (out[idx[k]] = c));
          }
          return out;
        },
      },
      { name: 'catch up from the binlog', run: (ctx: Ctx) => eachMove(ctx, (m, i) => catchUpPhase(ctx, m, ctx.outputs['record the source positions'][i], deps)) },
      {
        name: 'verify the copies',
        run: async (ctx: Ctx) => {
          const moves = movesOf(ctx);
          const [prepared, caught] = [ctx.outputs['record the source positions'], ctx.outputs['catch up from the binlog']];
          const out: VerifySummary[] = [];
          for (const [n, l] of ctx.outputs['check the rules'].entries()) {
            const idx = pairMoveIndexes(ctx.paras, ctx.outputs['check the rules'])[n];
            if (!l.pieces) {
              out[idx[0]] = await verifyPhase(ctx, moves[idx[0]], prepared[idx[0]], caught[idx[0]], deps);
              continue;
            }
            // Per target piece, against every source piece that feeds it.
            for (const g of byTarget(idx.map((i) => moves[i]))) {
              const feeders = g.moves.map((k) => idx[k]);
              const summaries = await verifyTarget(ctx, g.target, feeders.map((i) => ({ spec: moves[i], prepared: prepared[i], caught: caught[i] })), deps);
              summaries.forEach((v, k) => (out[feeders[k]] = v));
            }
          }
          return out;
        },
      },
      {
        name: 'switch names',
        run: async (ctx: Ctx) => {
          const moves = movesOf(ctx);
          const out: SwitchSummary[] = [];
          for (const [n, l] of ctx.outputs['check the rules'].entries()) {
            const idx = pairMoveIndexes(ctx.paras, ctx.outputs['check the rules'])[n];
            if (l.pieces) {
              out.push(await switchParent(ctx, parentPlan(ctx, l, idx)));
              continue;
            }
            const [m, i] = [moves[idx[0]], idx[0]];
            const src = clusterStillThere(ctx.state(), m.source.clusterId);
            const inPlace = m.source.clusterId === m.target.clusterId && m.source.db === m.target.db;
            out.push(
              await switchNames(ctx, {
                spec: m,
                prepared: ctx.outputs['record the source positions'][i],
                caughtAt: ctx.outputs['catch up from the binlog'][i].at,
                ...logins(ctx, m),
                comps: Object.values(src.comps).map((c) => ({ hostaddr: c.hostaddr, port: c.port })),
                repointTo: inPlace ? `shard_${m.target.shardId}` : '',
                agent: foreignTablesOf(ctx.agents),
                moveDeps: deps,
                holdMs: deps.holdMs ?? 30_000,
              }),
            );
          }
          return out;
        },
      },
    ],
    result: (o, p): RepartitionTablesResult => {
      const located = o['check the rules'];
      const indexes = pairMoveIndexes(p, located);
      // One entry per pair; a partitioned pair's figures are its pieces' sums (copy_ms: the longest piece).
      const sum = (idx: number[], f: (i: number) => number) => idx.reduce((n, i) => n + f(i), 0);
      return {
        src_cluster_id: p.src_cluster_id,
        dst_cluster_id: p.dst_cluster_id,
        blocked_ms_max: String(Math.max(0, ...o['switch names'].map((s) => s.blocked_ms))),
        list_table: located.map((l, n) => {
          const idx = indexes[n];
          return {
            source: `${l.source.database}.${l.source.table}`,
            target: `${l.target.database}.${l.target.table}`,
            table: o['switch names'][n].table,
            old_table: o['switch names'][n].old_table,
            rows_copied: String(sum(idx, (i) => o['copy rows'][i].rows)),
            rows_resynced: String(sum(idx, (i) => o['catch up from the binlog'][i].rows_resynced) + o['switch names'][n].rows_resynced),
            rows_verified: String(sum(idx, (i) => o['verify the copies'][i].rows)),
            copy_ms: String(Math.max(...idx.map((i) => o['copy rows'][i].ms))),
            blocked_ms: String(o['switch names'][n].blocked_ms),
          };
        }),
      };
    },
    async rollback(ctx, failedStep) {
      const located = ctx.outputs['check the rules'];
      if (failedStep === 'check the rules' || !located) return undefined;
      const notes: string[] = [];
      const moves = movesOf(ctx);
      for (const m of moves) await stopCatchUp(ctx, m).catch(() => {});
      for (const [n, l] of located.entries()) {
        const idx = pairMoveIndexes(ctx.paras, located)[n];
        try {
          // A switch that got as far as the renames is undone first: the source serves under its name.
          if (l.pieces) await unswitchParent(ctx, parentPlan(ctx, l, idx));
          else {
            const { sourceLogin, targetLogin } = logins(ctx, moves[idx[0]]);
            await unswitchNames(ctx.agents, sourceLogin, targetLogin, moves[idx[0]], asideName(l.source.table, ctx.jobId));
          }
        } catch (err) {
          notes.push(`the names of ${l.source.database}.${l.source.table} could not be switched back: ${(err as Error).message}`);
        }
        // The check step found every target piece empty: empty them again (definition, keys and grants untouched).
        for (const t of byTarget(idx.map((i) => moves[i]))) {
          try {
            await withShard(ctx.agents, logins(ctx, { ...moves[idx[0]], target: { ...t.target, create: false } }).targetLogin, (c) => c.query(`TRUNCATE TABLE ${q(t.target.db)}.${q(t.target.table)}`));
          } catch (err) {
            notes.push(`target ${t.target.db}.${t.target.table} on shard ${t.target.shardId} of cluster ${t.target.clusterId} could not be emptied again: ${(err as Error).message}`);
          }
        }
      }
      return notes.length > 0 ? notes.join('; ') : undefined;
    },
  };
}
