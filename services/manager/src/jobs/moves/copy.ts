// Phase 1 of a move: copy the source table's rows into the target in primary-key chunks,
// from one consistent snapshot per run. Each chunk is one target transaction, so the
// target's highest key is the end of the last chunk copied: a run after a crash or a new
// leader resumes after it, from a new snapshot. That is safe because the catch-up starts
// from the position recorded before any run's snapshot and replays every changed key
// (resync.ts), so rows copied from a later snapshot converge too.

import type mysql from 'mysql2/promise';
import { keyTuple, q, type TableShape } from './shard-sql';

export interface CopyOptions {
  chunkRows: number;
  /** Called between chunks: waits while the target's standbys lag (throttle). */
  throttle(): Promise<void>;
  progress(rowsCopied: number, chunks: number, lastKey: unknown[]): Promise<void>;
  signal?: AbortSignal;
}

export interface CopyOutcome {
  rows: number;
  chunks: number;
  /** The key copying resumed after (null: from the start). */
  resumedAfter: unknown[] | null;
  /** The snapshot this run read from (binlog_snapshot_file/position). */
  snapshot: { file: string; pos: number };
  ms: number;
}

/** The target's highest key, or null when the target is empty: where a copy resumes. */
export async function lastCopiedKey(dst: mysql.Connection, db: string, table: string, shape: TableShape): Promise<unknown[] | null> {
  const order = shape.key.map((k) => `${q(k.name)} DESC`).join(', ');
  const [rows] = (await dst.query({ sql: `SELECT ${shape.key.map((k) => q(k.name)).join(', ')} FROM ${q(db)}.${q(table)} ORDER BY ${order} LIMIT 1`, rowsAsArray: true })) as unknown as [unknown[][]];
  return rows.length > 0 ? rows[0] : null;
}

/** The SELECT of the chunk after `after` (the first chunk when null). */
export function chunkQuery(db: string, table: string, shape: TableShape, after: unknown[] | null, rows: number): { sql: string; values: unknown[] } {
  const order = shape.key.map((k) => q(k.name)).join(', ');
  const where = after === null ? '' : ` WHERE ${keyTuple(shape)} > (${shape.key.map(() => '?').join(', ')})`;
  return { sql: `SELECT ${shape.columns.map(q).join(', ')} FROM ${q(db)}.${q(table)}${where} ORDER BY ${order} LIMIT ${rows}`, values: after ?? [] };
}

export async function copyRows(src: mysql.Connection, dst: mysql.Connection, from: { db: string; table: string }, to: { db: string; table: string }, shape: TableShape, opts: CopyOptions): Promise<CopyOutcome> {
  const started = performance.now();
  const resumedAfter = await lastCopiedKey(dst, to.db, to.table, shape);
  await src.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
  await src.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
  const [status] = (await src.query(`SHOW STATUS LIKE 'binlog_snapshot_%'`)) as unknown as [{ Variable_name: string; Value: string }[]];
  const snap = new Map(status.map((s) => [s.Variable_name.toLowerCase(), s.Value]));
  const snapshot = { file: snap.get('binlog_snapshot_file') ?? '', pos: Number(snap.get('binlog_snapshot_position') ?? 0) };
  const keyAt = shape.key.map((k) => shape.columns.indexOf(k.name));
  const insert = `INSERT INTO ${q(to.db)}.${q(to.table)} (${shape.columns.map(q).join(', ')}) VALUES ?`;
  let after = resumedAfter;
  let rows = 0;
  let chunks = 0;
  try {
    for (;;) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? new Error('aborted');
      const chunk = chunkQuery(from.db, from.table, shape, after, opts.chunkRows);
      const [batch] = (await src.query({ sql: chunk.sql, values: chunk.values, rowsAsArray: true })) as unknown as [unknown[][]];
      if (batch.length === 0) break;
      await dst.query(insert, [batch]);
      rows += batch.length;
      chunks++;
      after = keyAt.map((i) => batch[batch.length - 1][i]);
      await opts.progress(rows, chunks, after);
      if (batch.length < opts.chunkRows) break;
      await opts.throttle();
    }
  } finally {
    await src.query('COMMIT').catch(() => {});
  }
  return { rows, chunks, resumedAfter, snapshot, ms: performance.now() - started };
}
