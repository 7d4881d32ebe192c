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

import type mysql from 'mysql2/promise';
import { KcmError } from '@kcm/protocol';
import { clusterOfStep } from '../cluster-lookup';
import type { StepContext } from '../workflow';
import { copyRows } from './copy';
import { catchUpPhase, DEFAULT_MOVE_LIMITS, type CaughtUp, type CopySummary, type MoveDeps, type MoveEnd, type MoveSpec, type PreparedMove, type VerifySummary } from './engine';
import { keyTuple, loginAs, openShard, q, withShard, type ShardLogin } from './shard-sql';
import { differing, hashes, widenedColumnCasts, type Hashes } from './verify';

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

/** Copies every piece; pieces sharing a target start from their first key (see above). */
export async function copyPieces(ctx: Ctx, specs: readonly MoveSpec[], prepared: readonly PreparedMove[], deps: MoveDeps = {}): Promise<CopySummary[]> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const shared = new Set<number>();
  for (const g of byTarget(specs)) {
    if (g.moves.length < 2) continue;
    for (const i of g.moves) shared.add(i);
    await withShard(pieceLogin(ctx, g.target), async (dst) => {
      const [rows] = (await dst.query(`SELECT 1 FROM ${q(g.target.db)}.${q(g.target.table)} LIMIT 1`)) as unknown as [unknown[]];
      if (rows.length > 0) await dst.query(`TRUNCATE TABLE ${q(g.target.db)}.${q(g.target.table)}`);
    });
  }
  const out: CopySummary[] = [];
  let before = 0;
  for (const [i, spec] of specs.entries()) {
    const src = await openShard(pieceLogin(ctx, spec.source));
    const dst = await openShard(pieceLogin(ctx, spec.target));
    src.on('error', () => {});
    dst.on('error', () => {});
    try {
      const done = await copyRows(src, dst, spec.source, spec.target, prepared[i].shape, {
        chunkRows: limits.chunkRows,
        commitRows: limits.copyCommitRows,
        commitBytes: limits.copyCommitBytes,
        commitMs: limits.copyCommitMs,
        signal: ctx.signal,
        ...(shared.has(i) ? { resumeAfter: null } : {}),
        throttle: async () => {},
        progress: async (rows) => {
          await ctx.progress(before + rows, 0);
        },
      });
      before += done.rows;
      out.push({ rows: done.rows, chunks: done.chunks, resumed_after: done.resumedAfter === null ? '' : JSON.stringify(done.resumedAfter), ms: Math.round(done.ms) });
    } finally {
      await Promise.all([src.end().catch(() => src.destroy()), dst.end().catch(() => dst.destroy())]);
    }
  }
  return out;
}

interface Feeder {
  spec: MoveSpec;
  prepared: PreparedMove;
  caught: CaughtUp;
}

/**
 * The verify gate of one target fed by `feeders`: rows verified per feeder, in order. Rows
 * that differ are checked again after every feeder's catch-up reached its source's position
 * then; a row that still differs fails the gate naming its key, and the sources keep serving.
 */
export async function verifyTarget(ctx: Ctx, target: MoveEnd, feeders: readonly Feeder[], deps: MoveDeps = {}): Promise<VerifySummary[]> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const started = performance.now();
  const shape = feeders[0].prepared.shape;
  const tuple = keyTuple(shape);
  const marks = `(${shape.key.map(() => '?').join(', ')})`;
  const dst = await openShard(pieceLogin(ctx, target));
  dst.on('error', () => {});
  const sources: mysql.Connection[] = [];
  try {
    for (const f of feeders) {
      const c = await openShard(pieceLogin(ctx, f.spec.source));
      c.on('error', () => {});
      sources.push(c);
    }
    const casts = await Promise.all(feeders.map((f, i) => widenedColumnCasts(sources[i], dst, f.spec.source, target, f.prepared.shape)));
    /** Every feeder's rows WHERE `where`, merged; and how many each gave. */
    const fromSources = async (where: string, values: unknown[]): Promise<{ map: Hashes; counts: number[] }> => {
      const read = await Promise.all(feeders.map((f, i) => hashes(sources[i], f.spec.source, f.prepared.shape, where, values, undefined, casts[i])));
      const map: Hashes = new Map();
      for (const r of read) for (const [k, v] of r.map) map.set(k, v);
      return { map, counts: read.map((r) => r.count) };
    };
    const rows = feeders.map(() => 0);
    let chunks = 0;
    let after: unknown[] | null = null;
    let suspects = new Map<string, unknown[]>();
    for (;;) {
      const d = await hashes(dst, target, shape, after ? `${tuple} > ${marks}` : '', after ?? [], limits.chunkRows);
      const last = d.count === limits.chunkRows ? d.last : null;
      // The sources over the same range; the last chunk is open-ended so rows only the sources have are seen.
      const cond = [after ? `${tuple} > ${marks}` : '', last ? `${tuple} <= ${marks}` : ''].filter(Boolean).join(' AND ');
      const s = await fromSources(cond, [...(after ?? []), ...(last ?? [])]);
      for (const [k, key] of differing(s.map, d.map)) suspects.set(k, key);
      s.counts.forEach((n, i) => (rows[i] += n));
      chunks++;
      await ctx.progress(rows.reduce((a, b) => a + b, 0), 0);
      if (!last) break;
      after = last;
    }
    for (let round = 0; round < 3 && suspects.size > 0; round++) {
      // A catch-up not running in this member (a new leader) starts where the catch-up step left off.
      for (const f of feeders) await catchUpPhase(ctx, f.spec, { ...f.prepared, start: f.caught.at }, deps);
      const still = new Map<string, unknown[]>();
      const keys = [...suspects.values()];
      for (let i = 0; i < keys.length; i += 500) {
        const batch = keys.slice(i, i + 500);
        const cond = `${tuple} IN (${batch.map(() => marks).join(', ')})`;
        const [s, d] = [await fromSources(cond, batch.flat()), await hashes(dst, target, shape, cond, batch.flat())];
        for (const [k, key] of differing(s.map, d.map)) if (suspects.has(k)) still.set(k, key);
      }
      suspects = still;
      if (suspects.size > 0) await new Promise((r) => setTimeout(r, 200));
    }
    if (suspects.size > 0) {
      const bad = [...suspects.keys()];
      const keyNames = shape.key.map((k) => k.name).join(', ');
      throw KcmError.of(
        'DATA_CHECK_FAILED',
        `verify: ${bad.length} row(s) of ${target.db}.${target.table} on shard ${target.shardId} differ from its ${feeders.length} source piece(s) after the catch-up; primary key (${keyNames}) = ${bad.slice(0, 10).join('; ')}${bad.length > 10 ? '; ...' : ''}. The source keeps serving`,
      );
    }
    const ms = Math.round(performance.now() - started);
    return rows.map((n) => ({ rows: n, chunks, ms }));
  } finally {
    for (const c of [dst, ...sources]) await c.end().catch(() => c.destroy());
  }
}
