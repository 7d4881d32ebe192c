// Moves whose targets are shared: several source pieces (the partitions of a partitioned
// table, each a table on its shard) copied into one target table (a plain table, or one
// partition of a partitioned target whose bound holds them all). Each piece is an ordinary
// move for the engine's prepare and catch-up (jobs/moves/engine.ts): the catch-up re-copies
// only the keys the piece's own binlog names, which are its own rows. Two phases differ:
//
//   copyPieces    a target fed by several pieces holds the others' keys, so a piece's copy
//                 cannot resume after the target's highest key: each starts from its first
//                 key, and a run that finds such a target not empty (a re-run after a new
//                 leader) empties it first, then copies every piece again.
//   verifyTarget  the engine's verify compares a source's key chunks with the target's same
//                 key range, where a shared target also holds the other pieces' rows: here
//                 the target is walked in key chunks and compared with all of its pieces
//                 over the same range, read from their shards and merged (keys are unique
//                 over the pieces: a partitioned table's key includes its partition key).

import { KcmError } from '@kcm/protocol';
import { clusterOfStep } from '../cluster-lookup';
import type { StepContext } from '../framework/workflow';
import { compareWithCatchUps, copyPhase, keyText, type CaughtUp, type CopySummary, type MoveDeps, type MoveEnd, type MoveSpec, type PreparedMove, type VerifySummary } from './engine';
import { loginAs, q, withShard, type ShardLogin } from './shard-sql';

type Ctx = StepContext<unknown, object>;

/** The storage account's login to the master of `end`'s shard. */
export function pieceLogin(ctx: Ctx, end: MoveEnd): ShardLogin {
  const cluster = clusterOfStep(ctx, end.clusterId);
  const shard = cluster.shards[end.shardId];
  const master = shard?.nodes[shard.masterNodeId];
  if (!master) throw KcmError.of('INSTANCE_FAILED', `shard ${end.shardId} of cluster ${end.clusterId} has no master`);
  return loginAs(ctx.secrets, cluster, master, 'storage');
}

const targetId = (e: MoveEnd) => `${e.clusterId}\0${e.shardId}\0${e.db}\0${e.table}`;

/** The moves grouped by the target table they write (in first-seen order), with their indexes. */
export function byTarget(specs: readonly MoveSpec[]): { target: MoveEnd; moves: number[] }[] {
  const groups = new Map<string, { target: MoveEnd; moves: number[] }>();
  for (const [i, s] of specs.entries()) {
    const id = targetId(s.target);
    const g = groups.get(id) ?? { target: s.target, moves: [] };
    g.moves.push(i);
    groups.set(id, g);
  }
  return [...groups.values()];
}

/** Copies every piece (each by its source's agent); pieces sharing a target start from their first key (see above). */
export async function copyPieces(ctx: Ctx, specs: readonly MoveSpec[], prepared: readonly PreparedMove[], deps: MoveDeps = {}): Promise<CopySummary[]> {
  const shared = new Set<number>();
  for (const g of byTarget(specs)) {
    if (g.moves.length < 2) continue;
    for (const i of g.moves) shared.add(i);
    await withShard(ctx.agents, pieceLogin(ctx, g.target), async (dst) => {
      const [rows] = (await dst.query(`SELECT 1 FROM ${q(g.target.db)}.${q(g.target.table)} LIMIT 1`)) as unknown as [unknown[]];
      if (rows.length > 0) await dst.query(`TRUNCATE TABLE ${q(g.target.db)}.${q(g.target.table)}`);
    });
  }
  const out: CopySummary[] = [];
  let before = 0;
  for (const [i, spec] of specs.entries()) {
    const done = await copyPhase(ctx, spec, prepared[i], deps, { fromStart: shared.has(i), progress: (rows) => ctx.progress(before + rows, 0) });
    before += done.rows;
    out.push(done);
  }
  return out;
}

interface Feeder {
  spec: MoveSpec;
  prepared: PreparedMove;
  caught: CaughtUp;
}

/**
 * The verify gate of one target fed by `feeders`: rows verified per feeder, in order. The
 * target's agent walks the target in key chunks and compares each with all of its pieces
 * over the same range; rows that differ are checked again after every feeder's catch-up
 * reached its source's position then; a row that still differs fails the gate naming its
 * key, and the sources keep serving.
 */
export async function verifyTarget(ctx: Ctx, target: MoveEnd, feeders: readonly Feeder[], deps: MoveDeps = {}): Promise<VerifySummary[]> {
  const started = performance.now();
  const out = await compareWithCatchUps(ctx, target, feeders.map((f) => ({ spec: f.spec, prepared: f.prepared, from: f.caught.at })), deps);
  if (out.bad.length > 0) {
    const keyNames = feeders[0].prepared.shape.key.map((k) => k.name).join(', ');
    throw KcmError.of(
      'DATA_CHECK_FAILED',
      `verify: ${out.bad.length} row(s) of ${target.db}.${target.table} on shard ${target.shardId} differ from its ${feeders.length} source piece(s) after the catch-up; primary key (${keyNames}) = ${out.bad.slice(0, 10).map(keyText).join('; ')}${out.bad.length > 10 ? '; ...' : ''}. The source keeps serving`,
    );
  }
  const ms = Math.round(performance.now() - started);
  return out.sourceRows.map((n) => ({ rows: n, chunks: out.chunks, ms }));
}
