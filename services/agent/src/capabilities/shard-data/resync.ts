// The catch-up's apply: for keys the binlog says changed, copy those rows' current state
// from the source to the target (delete the target's rows with those keys, insert what the
// source has now, in one target transaction). Replaying the same keys again, or keys of
// changes already in the copy, gives the same end state, which is what makes the catch-up
// resumable from any earlier position.

import type mysql from 'mysql2/promise';
import { keyTuple, q, type TableShape } from './shard-sql';
import type { KeyValue } from './binlog-rows';

export function keyId(key: KeyValue[]): string {
  return JSON.stringify(key.map((v) => (Buffer.isBuffer(v) ? `b:${v.toString('hex')}` : v === null ? null : `s:${String(v)}`)));
}

/** InnoDB chose this statement as a deadlock's victim (ER_LOCK_DEADLOCK): nothing of it stayed. */
const isDeadlock = (err: unknown) => (err as { errno?: number }).errno === 1213;

/**
 * Re-copies the rows of `keys`. The locking read of the source can meet the application's
 * transactions, and the target's delete and insert another piece's catch-up writing the
 * same table (a partitioned source's pieces into one target): InnoDB then breaks a deadlock
 * by failing one side. The apply is idempotent, so a victim here is applied again.
 */
export async function resyncKeys(src: mysql.Connection, dst: mysql.Connection, from: { db: string; table: string }, to: { db: string; table: string }, shape: TableShape, keys: KeyValue[][]): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await resyncOnce(src, dst, from, to, shape, keys);
    } catch (err) {
      if (!isDeadlock(err) || attempt >= 10) throw err;
      await new Promise((r) => setTimeout(r, 5 * attempt));
    }
  }
}

async function resyncOnce(src: mysql.Connection, dst: mysql.Connection, from: { db: string; table: string }, to: { db: string; table: string }, shape: TableShape, keys: KeyValue[][]): Promise<number> {
  if (keys.length === 0) return 0;
  const tuple = `(${shape.key.map(() => '?').join(', ')})`;
  const inList = keys.map(() => tuple).join(', ');
  const flat = keys.flat();
  // A locking read: with semi-sync AFTER_SYNC a transaction is in the binlog (and so read by
  // the catch-up) before it is committed; a plain read could still see the row before it,
  // and the key would never come again. The locking read waits for that commit.
  const [rows] = (await src.query({ sql: `SELECT ${shape.columns.map(q).join(', ')} FROM ${q(from.db)}.${q(from.table)} WHERE ${keyTuple(shape)} IN (${inList}) LOCK IN SHARE MODE`, values: flat, rowsAsArray: true })) as unknown as [unknown[][]];
  await dst.query('START TRANSACTION');
  try {
    await dst.query(`DELETE FROM ${q(to.db)}.${q(to.table)} WHERE ${keyTuple(shape)} IN (${inList})`, flat);
    if (rows.length > 0) await dst.query(`INSERT INTO ${q(to.db)}.${q(to.table)} (${shape.columns.map(q).join(', ')}) VALUES ?`, [rows]);
    await dst.query('COMMIT');
  } catch (err) {
    await dst.query('ROLLBACK').catch(() => {});
    throw err;
  }
  return rows.length;
}
