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

type Hashes = Map<string, number>;

async function hashes(c: mysql.Connection, t: { db: string; table: string }, shape: TableShape, where: string, values: unknown[], limit?: number): Promise<{ map: Hashes; keys: unknown[][] }> {
  const cols = shape.key.map((k) => q(k.name)).join(', ');
  const sql = `SELECT ${cols}, ${rowHash(shape)} FROM ${q(t.db)}.${q(t.table)}${where ? ` WHERE ${where}` : ''} ORDER BY ${cols}${limit ? ` LIMIT ${limit}` : ''}`;
  const [rows] = (await c.query({ sql, values, rowsAsArray: true })) as unknown as [unknown[][]];
  const map: Hashes = new Map();
  const keys: unknown[][] = [];
  for (const r of rows) {
    const key = r.slice(0, shape.key.length);
    keys.push(key);
    map.set(JSON.stringify(key.map((v) => (Buffer.isBuffer(v) ? v.toString('hex') : String(v)))), Number(r[shape.key.length]));
  }
  return { map, keys };
}

function differing(a: Hashes, b: Hashes): string[] {
  const out: string[] = [];
  for (const [k, h] of a) if (b.get(k) !== h) out.push(k);
  for (const k of b.keys()) if (!a.has(k)) out.push(k);
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
  const marks = shape.key.map(() => '?').join(', ');
  let after: unknown[] | null = null;
  let rows = 0;
  let chunks = 0;
  const suspects: { lo: unknown[] | null; hi: unknown[] | null; keys: string[] }[] = [];
  for (;;) {
    const s = await hashes(src, from, shape, after ? `${tuple} > (${marks})` : '', after ?? [], opts.chunkRows);
    const last = s.keys.length === opts.chunkRows ? s.keys[s.keys.length - 1] : null;
    // The target over the same range; the last chunk is open-ended so rows only the target has are seen.
    const cond = [after ? `${tuple} > (${marks})` : '', last ? `${tuple} <= (${marks})` : ''].filter(Boolean).join(' AND ');
    const d = await hashes(dst, to, shape, cond, [...(after ?? []), ...(last ?? [])]);
    const diff = differing(s.map, d.map);
    if (diff.length > 0) suspects.push({ lo: after, hi: last, keys: diff });
    rows += s.keys.length;
    chunks++;
    await opts.progress(rows, chunks);
    if (!last) break;
    after = last;
  }
  let bad = suspects;
  for (let round = 0; round < opts.rechecks && bad.length > 0; round++) {
    await opts.catchUp();
    const still: typeof suspects = [];
    for (const range of bad) {
      const cond = [range.lo ? `${tuple} > (${marks})` : '', range.hi ? `${tuple} <= (${marks})` : ''].filter(Boolean).join(' AND ');
      const values = [...(range.lo ?? []), ...(range.hi ?? [])];
      const [s, d] = [await hashes(src, from, shape, cond, values), await hashes(dst, to, shape, cond, values)];
      const diff = differing(s.map, d.map);
      if (diff.length > 0) still.push({ ...range, keys: diff });
    }
    bad = still;
    if (bad.length > 0) await new Promise((r) => setTimeout(r, 200));
  }
  return { rows, chunks, bad: bad.flatMap((b) => b.keys), ms: performance.now() - started };
}
