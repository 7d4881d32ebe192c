// Phase 1 of a move: copy the source table's rows into the target in primary-key chunks,
// from one consistent snapshot per run. Chunks are written in key order and committed in
// whole groups (one target transaction holds `commitRows` rows), so the target's highest
// key is the end of the last group committed: a run after a crash or a new leader resumes
// after it, from a new snapshot. Groups, not single chunks, because every commit on a shard
// master is a binlog fsync and a semi-sync standby ack; mariadb-dump's ~1 MB statements
// commit a few times per 100,000 rows, and so must the copy to keep up with it. That is safe because the catch-up starts
// from the position recorded before any run's snapshot and replays every changed key
// (resync.ts), so rows copied from a later snapshot converge too.

import type mysql from 'mysql2/promise';
import { keyTuple, q, type TableShape } from './shard-sql';

export interface CopyOptions {
  chunkRows: number;
  /** A target transaction is committed once it holds `commitRows` rows, `commitBytes` of INSERT text, or is `commitMs` old (default: every chunk). */
  commitRows?: number;
  commitBytes?: number;
  commitMs?: number;
  /** Called between chunks (not after the last): waits while the target's standbys lag, or for a rate limit. */
  throttle(rowsWritten: number): Promise<void>;
  progress(rowsCopied: number, chunks: number, lastKey: unknown[]): Promise<void>;
  signal?: AbortSignal;
  /**
   * Where to resume (null: from the start); by default after the target's highest key. A
   * target fed by several sources (a partitioned source's pieces into one table) holds other
   * sources' keys, so its highest key says nothing of this source's progress.
   */
  resumeAfter?: unknown[] | null;
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

async function snapshotStatus(c: mysql.Connection): Promise<{ file: string; pos: number }> {
  const [status] = (await c.query(`SHOW STATUS LIKE 'binlog_snapshot_%'`)) as unknown as [{ Variable_name: string; Value: string }[]];
  const snap = new Map(status.map((s) => [s.Variable_name.toLowerCase(), s.Value]));
  return { file: snap.get('binlog_snapshot_file') ?? '', pos: Number(snap.get('binlog_snapshot_position') ?? 0) };
}

/** The binlog position exactly consistent with a snapshot taken now (binlog_snapshot_file/position). */
export async function snapshotPosition(c: mysql.Connection): Promise<{ file: string; pos: number }> {
  await c.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
  try {
    return await snapshotStatus(c);
  } finally {
    await c.query('COMMIT');
  }
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
  const resumedAfter = opts.resumeAfter !== undefined ? opts.resumeAfter : await lastCopiedKey(dst, to.db, to.table, shape);
  await src.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
  await src.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
  const snapshot = await snapshotStatus(src);
  const keyAt = shape.key.map((k) => shape.columns.indexOf(k.name));
  const insert = `INSERT INTO ${q(to.db)}.${q(to.table)} (${shape.columns.map(q).join(', ')}) VALUES ?`;
  const commitRows = Math.max(opts.chunkRows, opts.commitRows ?? opts.chunkRows);
  let after = resumedAfter;
  let rows = 0;
  let chunks = 0;
  const commitBytes = opts.commitBytes ?? Infinity;
  const commitMs = opts.commitMs ?? Infinity;
  let openedAt = 0;
  /** Rows and INSERT bytes written in the open target transaction (0: none open). */
  let open = 0;
  let openBytes = 0;
  // A chunk's INSERT text is made as soon as its rows arrive, while the previous chunk's
  // INSERT is still on its way to the target, so the writes follow each other closely.
  const read = async (from_: unknown[] | null): Promise<{ batch: unknown[][]; text: string }> => {
    const chunk = chunkQuery(from.db, from.table, shape, from_, opts.chunkRows);
    const batch = ((await src.query({ sql: chunk.sql, values: chunk.values, rowsAsArray: true })) as unknown as [unknown[][]])[0];
    return { batch, text: batch.length > 0 ? dst.format(insert, [batch]) : '' };
  };
  const commit = async () => {
    if (open === 0) return;
    await dst.query('COMMIT');
    rows += open;
    open = 0;
    openBytes = 0;
    await opts.progress(rows, chunks, after ?? []);
  };
  // The next chunk is read from the source while this one is written to the target.
  let next: Promise<{ batch: unknown[][]; text: string }> | null = read(after);
  try {
    while (next) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? new Error('aborted');
      const { batch, text } = await next;
      next = null;
      if (batch.length === 0) break;
      const last = keyAt.map((i) => batch[batch.length - 1][i]);
      if (batch.length === opts.chunkRows) {
        next = read(last);
        next.catch(() => {}); // awaited next turn; a failure then is the copy's
      }
      if (open === 0) {
        await dst.query('START TRANSACTION');
        openedAt = performance.now();
      }
      await dst.query(text);
      open += batch.length;
      openBytes += text.length;
      after = last;
      chunks++;
      if (open >= commitRows || openBytes >= commitBytes || performance.now() - openedAt >= commitMs || !next) await commit();
      if (next) await opts.throttle(rows + open);
    }
    await commit();
  } catch (err) {
    if (open > 0) await dst.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await next?.catch(() => {});
    await src.query('COMMIT').catch(() => {});
  }
  return { rows, chunks, resumedAfter, snapshot, ms: performance.now() - started };
}
