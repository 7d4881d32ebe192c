// Phase 3 of a move: the verify gate. Walks the source in primary-key chunks; for each
// chunk, the source's and the target's row hashes over the same key range (count and a
// CRC32 per row of every column, NULLs marked) are compared. Rows that differ are checked
// again after the catch-up reaches the source's position then (a row written while the
// chunk was read differs only until its change is applied); a row that still differs is a
// bad copy: the gate fails naming its key, and the source keeps serving.

import type mysql from 'mysql2/promise';
import { keyTuple, q, type TableShape } from './shard-sql';

export interface VerifyOutcome {
  rows: number;
  chunks: number;
  /** Keys (as JSON) that differed after every re-check. */
  bad: string[];
  ms: number;
}

/**
 * The row's hash: character columns as utf8mb4 text, whatever set each side stores them in;
 * `casts` gives, for the source side, columns to read as the target's (wider) type stores them.
 */
export function rowHash(shape: TableShape, casts: ReadonlyMap<string, string> = new Map()): string {
  const text = new Set(shape.text ?? []);
  const value = (c: string) => {
    const as = casts.get(c);
    if (as) return `CAST(CAST(${q(c)} AS CHAR) AS ${as})`;
    return text.has(c) ? `CONVERT(${q(c)} USING utf8mb4)` : q(c);
  };
  return `CRC32(CONCAT_WS('#', ${shape.columns.map((c) => `${value(c)}, ISNULL(${q(c)})`).join(', ')}))`;
}

interface ColumnType {
  name: string;
  dataType: string;
  columnType: string;
  precision: number;
  scale: number;
  fsp: number;
}

async function columnTypes(c: mysql.Connection, t: { db: string; table: string }): Promise<Map<string, ColumnType>> {
  const [rows] = (await c.query(
    'SELECT COLUMN_NAME AS name, DATA_TYPE AS dataType, COLUMN_TYPE AS columnType, NUMERIC_PRECISION AS p, NUMERIC_SCALE AS s, DATETIME_PRECISION AS fsp FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
    [t.db, t.table],
  )) as unknown as [{ name: string; dataType: string; columnType: string; p: unknown; s: unknown; fsp: unknown }[]];
  return new Map(rows.map((r) => [r.name, { name: r.name, dataType: r.dataType.toLowerCase(), columnType: r.columnType.toLowerCase(), precision: Number(r.p ?? 0), scale: Number(r.s ?? 0), fsp: Number(r.fsp ?? 0) }]));
}

/**
 * For a target whose columns are wider than the source's (repartition rule 5: decimal(10,2)
 * -> decimal(12,4), float -> double, date -> datetime, datetime -> datetime(3)), the same
 * value prints differently on the two sides ('1.50' and '1.5000'): the source side of the
 * verify reads such a column as the target stores the copy's text of it.
 */
export async function widenedColumnCasts(src: mysql.Connection, dst: mysql.Connection, from: { db: string; table: string }, to: { db: string; table: string }, shape: TableShape): Promise<Map<string, string>> {
  const [s, d] = [await columnTypes(src, from), await columnTypes(dst, to)];
  const casts = new Map<string, string>();
  for (const name of shape.columns) {
    const [a, b] = [s.get(name), d.get(name)];
    if (!a || !b || a.columnType === b.columnType) continue;
    const as =
      b.dataType === 'decimal' ? `DECIMAL(${b.precision}, ${b.scale})`
      : b.dataType === 'double' || b.dataType === 'float' ? 'DOUBLE'
      : b.dataType === 'date' ? 'DATE'
      : b.dataType === 'datetime' || b.dataType === 'timestamp' ? `DATETIME(${b.fsp})`
      : b.dataType === 'time' ? `TIME(${b.fsp})`
      : undefined;
    if (as) casts.set(name, as);
  }
  return casts;
}

/** Row hash and key by the key's JSON form. */
export type Hashes = Map<string, { key: unknown[]; hash: number }>;

const keyJson = (key: unknown[]) => JSON.stringify(key.map((v) => (Buffer.isBuffer(v) ? v.toString('hex') : String(v))));

/** The row hashes of `t` WHERE `where` (over the key, in key order, at most `limit`). */
export async function hashes(c: mysql.Connection, t: { db: string; table: string }, shape: TableShape, where: string, values: unknown[], limit?: number, casts?: ReadonlyMap<string, string>): Promise<{ map: Hashes; last: unknown[] | null; count: number }> {
  const cols = shape.key.map((k) => q(k.name)).join(', ');
  const sql = `SELECT ${cols}, ${rowHash(shape, casts)} FROM ${q(t.db)}.${q(t.table)}${where ? ` WHERE ${where}` : ''} ORDER BY ${cols}${limit ? ` LIMIT ${limit}` : ''}`;
  const [rows] = (await c.query({ sql, values, rowsAsArray: true })) as unknown as [unknown[][]];
  const map: Hashes = new Map();
  for (const r of rows) {
    const key = r.slice(0, shape.key.length);
    map.set(keyJson(key), { key, hash: Number(r[shape.key.length]) });
  }
  return { map, last: rows.length > 0 ? rows[rows.length - 1].slice(0, shape.key.length) : null, count: rows.length };
}

/** The keys whose rows differ (present on one side only, or with another hash). */
export function differing(a: Hashes, b: Hashes): Map<string, unknown[]> {
  const out = new Map<string, unknown[]>();
  for (const [k, row] of a) if (b.get(k)?.hash !== row.hash) out.set(k, row.key);
  for (const [k, row] of b) if (!a.has(k)) out.set(k, row.key);
  return out;
}

export interface VerifyOptions {
  chunkRows: number;
  /** Waits until the catch-up has applied everything the source has now. */
  catchUp(): Promise<void>;
  rechecks: number;
  progress(rows: number, chunks: number): Promise<void>;
  /** Source columns read as the target's wider type (widenedColumnCasts). */
  sourceCasts?: ReadonlyMap<string, string>;
}

export async function verifyCopy(src: mysql.Connection, dst: mysql.Connection, from: { db: string; table: string }, to: { db: string; table: string }, shape: TableShape, opts: VerifyOptions): Promise<VerifyOutcome> {
  const started = performance.now();
  const tuple = keyTuple(shape);
  const marks = `(${shape.key.map(() => '?').join(', ')})`;
  let after: unknown[] | null = null;
  let rows = 0;
  let chunks = 0;
  let suspects = new Map<string, unknown[]>();
  for (;;) {
    const s = await hashes(src, from, shape, after ? `${tuple} > ${marks}` : '', after ?? [], opts.chunkRows, opts.sourceCasts);
    const last = s.count === opts.chunkRows ? s.last : null;
    // The target over the same range; the last chunk is open-ended so rows only the target has are seen.
    const cond = [after ? `${tuple} > ${marks}` : '', last ? `${tuple} <= ${marks}` : ''].filter(Boolean).join(' AND ');
    const d = await hashes(dst, to, shape, cond, [...(after ?? []), ...(last ?? [])]);
    for (const [k, key] of differing(s.map, d.map)) suspects.set(k, key);
    rows += s.count;
    chunks++;
    await opts.progress(rows, chunks);
    if (!last) break;
    after = last;
  }
  // Each re-check looks at the suspect rows only, after the catch-up has caught up; a row
  // written by the application between the two reads differs once, not every time.
  for (let round = 0; round < opts.rechecks && suspects.size > 0; round++) {
    await opts.catchUp();
    const still = new Map<string, unknown[]>();
    const keys = [...suspects.values()];
    for (let i = 0; i < keys.length; i += 500) {
      const batch = keys.slice(i, i + 500);
      const cond = `${tuple} IN (${batch.map(() => marks).join(', ')})`;
      const [s, d] = [await hashes(src, from, shape, cond, batch.flat(), undefined, opts.sourceCasts), await hashes(dst, to, shape, cond, batch.flat())];
      for (const [k, key] of differing(s.map, d.map)) if (suspects.has(k)) still.set(k, key);
    }
    suspects = still;
    if (suspects.size > 0) await new Promise((r) => setTimeout(r, 200));
  }
  return { rows, chunks, bad: [...suspects.keys()], ms: performance.now() - started };
}
