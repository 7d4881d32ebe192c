// The verify gate's comparison, run by the target master's agent (the Compare rpc): the
// target walked in primary-key chunks, each compared with the rows of every source over the
// same key range by a row hash (CRC32 of every column, NULLs marked). Several sources are
// the pieces of a partitioned table copied into one target (keys are unique over the
// pieces: a partitioned table's key includes its partition key). The last chunk is
// open-ended on the source side, so rows only the sources have are seen too. The keys that
// differ go back to the manager, which brings the catch-ups level and asks again for those
// keys only: a row the application changed between two reads differs once, not every time.

import type mysql from 'mysql2/promise';
import { keyTuple, q, type TableName, type TableShape } from './shard-sql';

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

async function columnTypes(c: mysql.Connection, t: TableName): Promise<Map<string, ColumnType>> {
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
 * comparison reads such a column as the target stores the copy's text of it.
 */
export async function widenedColumnCasts(src: mysql.Connection, dst: mysql.Connection, from: TableName, to: TableName, shape: TableShape): Promise<Map<string, string>> {
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
export async function hashes(c: mysql.Connection, t: TableName, shape: TableShape, where: string, values: unknown[], limit?: number, casts?: ReadonlyMap<string, string>): Promise<{ map: Hashes; last: unknown[] | null; count: number }> {
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

/** One source of the target: its session and table. */
export interface CompareSource {
  conn: mysql.Connection;
  table: TableName;
}

export interface CompareOutcome {
  /** Rows read from each source, in order. */
  sourceRows: number[];
  chunks: number;
  /** The keys of rows that differ, in the order found. */
  differing: unknown[][];
  ms: number;
}

/** Keys compared in one statement when only some rows are compared. */
export const COMPARE_KEYS_BATCH = 500;

/**
 * Compares the target with its sources: every row (keys null) in chunks of `chunkRows`
 * target rows, or only the rows of `keys`, in batches of 500.
 */
export async function compareTarget(dst: mysql.Connection, target: TableName, sources: readonly CompareSource[], shape: TableShape, chunkRows: number, keys: unknown[][] | null): Promise<CompareOutcome> {
  const started = performance.now();
  const tuple = keyTuple(shape);
  const marks = `(${shape.key.map(() => '?').join(', ')})`;
  const casts = await Promise.all(sources.map((s) => widenedColumnCasts(s.conn, dst, s.table, target, shape)));
  const sourceRows = sources.map(() => 0);
  /** Every source's rows WHERE `where`, merged. */
  const fromSources = async (where: string, values: unknown[]): Promise<Hashes> => {
    const read = await Promise.all(sources.map((s, i) => hashes(s.conn, s.table, shape, where, values, undefined, casts[i])));
    const map: Hashes = new Map();
    read.forEach((r, i) => {
      sourceRows[i] += r.count;
      for (const [k, v] of r.map) map.set(k, v);
    });
    return map;
  };
  const found = new Map<string, unknown[]>();
  let chunks = 0;
  if (keys) {
    for (let i = 0; i < keys.length; i += COMPARE_KEYS_BATCH) {
      const batch = keys.slice(i, i + COMPARE_KEYS_BATCH);
      const cond = `${tuple} IN (${batch.map(() => marks).join(', ')})`;
      const [s, d] = await Promise.all([fromSources(cond, batch.flat()), hashes(dst, target, shape, cond, batch.flat())]);
      for (const [k, key] of differing(s, d.map)) found.set(k, key);
      chunks++;
    }
  } else {
    let after: unknown[] | null = null;
    for (;;) {
      const d = await hashes(dst, target, shape, after ? `${tuple} > ${marks}` : '', after ?? [], chunkRows);
      const last = d.count === chunkRows ? d.last : null;
      // The sources over the same range; the last chunk is open-ended so rows only the sources have are seen.
      const cond = [after ? `${tuple} > ${marks}` : '', last ? `${tuple} <= ${marks}` : ''].filter(Boolean).join(' AND ');
      const s = await fromSources(cond, [...(after ?? []), ...(last ?? [])]);
      for (const [k, key] of differing(s, d.map)) found.set(k, key);
      chunks++;
      if (!last) break;
      after = last;
    }
  }
  return { sourceRows, chunks, differing: [...found.values()], ms: performance.now() - started };
}
