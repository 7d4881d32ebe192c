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

function rowHash(shape: TableShape): string {
  return `CRC32(CONCAT_WS('#', ${shape.columns.map((c) => `${q(c)}, ISNULL(${q(c)})`).join(', ')}))`;
}

/** Row hash and key by the key's JSON form. */
type Hashes = Map<string, { key: unknown[]; hash: number }>;

const keyJson = (key: unknown[]) => JSON.stringify(key.map((v) => (Buffer.isBuffer(v) ? v.toString('hex') : String(v))));

async function hashes(c: mysql.Connection, t: { db: string; table: string }, shape: TableShape, where: string, values: unknown[], limit?: number): Promise<{ map: Hashes; last: unknown[] | null; count: number }> {
  const cols = shape.key.map((k) => q(k.name)).join(', ');
  const sql = `SELECT ${cols}, ${rowHash(shape)} FROM ${q(t.db)}.${q(t.table)}${where ? ` WHERE ${where}` : ''} ORDER BY ${cols}${limit ? ` LIMIT ${limit}` : ''}`;
  const [rows] = (await c.query({ sql, values, rowsAsArray: true })) as unknown as [unknown[][]];
  const map: Hashes = new Map();
  for (const r of rows) {
    const key = r.slice(0, shape.key.length);
    map.set(keyJson(key), { key, hash: Number(r[shape.key.length]) });
  }
  return { map, last: rows.length > 0 ? rows[rows.length - 1].slice(0, shape.key.length) : null, count: rows.length };
}

/** The keys whose rows differ (present on one side only, or with another hash). */
function differing(a: Hashes, b: Hashes): Map<string, unknown[]> {
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
    const s = await hashes(src, from, shape, after ? `${tuple} > ${marks}` : '', after ?? [], opts.chunkRows);
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
      const [s, d] = [await hashes(src, from, shape, cond, batch.flat()), await hashes(dst, to, shape, cond, batch.flat())];
      for (const [k, key] of differing(s.map, d.map)) if (suspects.has(k)) still.set(k, key);
    }
    suspects = still;
    if (suspects.size > 0) await new Promise((r) => setTimeout(r, 200));
  }
  return { rows, chunks, bad: [...suspects.keys()], ms: performance.now() - started };
}
