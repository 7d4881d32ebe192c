// A partitioned table as repartition_tables sees it. The parent exists only on the compute
// nodes; each partition is a table on a shard whose COMMENT (written by kcm_ddl) records
// `{"kcm_partition_of":[schema, parent], "key": "HASH (id)", "bound": "FOR VALUES ..."}`.
// Those records are the parent's definition here: its partitions, where each lives, its key
// and bounds; its columns are any partition's (PostgreSQL gives every partition the parent's).
//
// Which target piece each source piece goes to (pure, `pieceTargets`). The copy and the
// catch-up move whole source pieces (a table on one shard), each into one target piece, so
// every source partition's bound must lie inside one target partition's:
//   target a plain table          every source partition goes into it
//   hash -> hash                  same key; the target's modulus divides the source's (PostgreSQL's
//                                 partition hash of a row is the same on both sides, so remainder r
//                                 of modulus M lands in remainder r mod m of modulus m)
//   range -> range                one integer key column; each source [from, to) inside one target range
//   list -> list                  each source value list a subset of one target partition's
// Anything else (a plain source into a partitioned target, hash into range, a source range
// across two target ranges) is refused before anything is copied: routing the rows of one
// source piece to several targets would need the catch-up to filter rows by bound, which the
// move engine does not do.

import type { Agents } from '@kcm/agent-api';
import type { ShardLogin } from '../moves/shard-sql';
import { withShard } from '../moves/shard-sql';

export const PARTITION_COMMENT_PREFIX = '{"kcm_partition_of"';

/** A table on one shard that is one piece of a repartition side: a partition, or a whole plain table. */
export interface TablePiece {
  table: string;
  shardId: string;
  /** The partition's bound as PostgreSQL prints it ('' for a plain table). */
  bound: string;
}

export interface PartitionedParent {
  /** The compute nodes' schema and parent name (the shard's database is `<db>_$$_<schema>`). */
  schema: string;
  parent: string;
  /** pg_get_partkeydef, e.g. `HASH (id)`. */
  key: string;
  partitions: TablePiece[];
}

export interface PartitionRecord {
  schema: string;
  parent: string;
  key: string;
  bound: string;
}

/** The record kcm_ddl wrote as a shard table's COMMENT; undefined for any other comment. */
export function parsePartitionRecord(comment: string | null | undefined): PartitionRecord | undefined {
  if (!comment?.startsWith(PARTITION_COMMENT_PREFIX)) return undefined;
  try {
    const v = JSON.parse(comment) as { kcm_partition_of?: unknown; key?: unknown; bound?: unknown };
    const of = v.kcm_partition_of;
    if (!Array.isArray(of) || of.length !== 2 || !of.every((x) => typeof x === 'string') || typeof v.key !== 'string' || typeof v.bound !== 'string') return undefined;
    return { schema: of[0] as string, parent: of[1] as string, key: v.key, bound: v.bound };
  } catch {
    return undefined;
  }
}

/** The same record naming another parent (every other field kept): what the switch of names writes. */
export function repointPartitionComment(comment: string, parent: string): string {
  const v = JSON.parse(comment) as Record<string, unknown> & { kcm_partition_of: [string, string] };
  return JSON.stringify({ ...v, kcm_partition_of: [v.kcm_partition_of[0], parent] });
}

/**
 * The partitioned parents of one MariaDB database (`<db>_$$_<schema>`) as the shards record
 * them, by parent name (a Map: names come from the request and the shards).
 */
export async function partitionedParents(agents: Agents, shards: { shardId: string; login: ShardLogin }[], mariaDb: string): Promise<Map<string, PartitionedParent>> {
  const parents = new Map<string, PartitionedParent>();
  for (const { shardId, login } of shards) {
    const rows = await withShard(agents, login, async (c) => {
      const [r] = (await c.query(`SELECT TABLE_NAME AS t, TABLE_COMMENT AS c FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' AND TABLE_COMMENT LIKE ?`, [mariaDb, `${PARTITION_COMMENT_PREFIX}%`])) as unknown as [{ t: string; c: string }[]];
      return r;
    });
    for (const row of rows) {
      const rec = parsePartitionRecord(row.c);
      if (!rec) continue;
      const p = parents.get(rec.parent) ?? { schema: rec.schema, parent: rec.parent, key: rec.key, partitions: [] };
      p.partitions.push({ table: row.t, shardId, bound: rec.bound });
      parents.set(rec.parent, p);
    }
  }
  for (const p of parents.values()) p.partitions.sort((a, b) => a.table.localeCompare(b.table));
  return parents;
}

type Bound =
  | { kind: 'hash'; modulus: number; remainder: number }
  | { kind: 'range'; from: bigint | null; to: bigint | null }
  | { kind: 'list'; values: string[] };

interface Key {
  strategy: 'hash' | 'range' | 'list';
  columns: string[];
}

export function parseKey(key: string): Key | undefined {
  const m = /^(HASH|RANGE|LIST) \((.+)\)$/i.exec(key.trim());
  if (!m) return undefined;
  return { strategy: m[1].toLowerCase() as Key['strategy'], columns: m[2].split(',').map((c) => c.trim().replace(/^"(.*)"$/, '$1').toLowerCase()) };
}

const rangeValue = (text: string): bigint | null | undefined => {
  const t = text.trim();
  if (/^MINVALUE$|^MAXVALUE$/i.test(t)) return null;
  return /^-?\d+$/.test(t) ? BigInt(t) : /^'-?\d+'$/.test(t) ? BigInt(t.slice(1, -1)) : undefined;
};

/** A bound as PostgreSQL prints it (pg_get_expr of relpartbound); undefined when kcm cannot reason about it. */
export function parseBound(bound: string): Bound | undefined {
  const hash = /^FOR VALUES WITH \(modulus (\d+), remainder (\d+)\)$/i.exec(bound);
  if (hash) return { kind: 'hash', modulus: Number(hash[1]), remainder: Number(hash[2]) };
  const range = /^FOR VALUES FROM \(([^,()]+)\) TO \(([^,()]+)\)$/i.exec(bound);
  if (range) {
    const [from, to] = [rangeValue(range[1]), rangeValue(range[2])];
    if (from === undefined || to === undefined) return undefined;
    // MINVALUE below, MAXVALUE above: null, unbounded on that side.
    return { kind: 'range', from, to };
  }
  const list = /^FOR VALUES IN \((.*)\)$/i.exec(bound);
  if (list) return { kind: 'list', values: list[1].split(',').map((v) => v.trim()) };
  return undefined;
}

/** Whether every row of source bound `s` belongs to target bound `t` (same key). */
function inside(s: Bound, t: Bound): boolean {
  if (s.kind === 'hash' && t.kind === 'hash') return s.modulus % t.modulus === 0 && s.remainder % t.modulus === t.remainder;
  if (s.kind === 'range' && t.kind === 'range') {
    const lowOk = t.from === null || (s.from !== null && s.from >= t.from);
    const highOk = t.to === null || (s.to !== null && s.to <= t.to);
    return lowOk && highOk;
  }
  if (s.kind === 'list' && t.kind === 'list') return s.values.every((v) => t.values.includes(v));
  return false;
}

/** One side of a pair: a plain table (one piece) or a partitioned parent. */
export type RepartitionSide = { kind: 'plain'; piece: TablePiece } | { kind: 'partitioned'; parent: PartitionedParent };

export const piecesOf = (side: RepartitionSide): TablePiece[] => (side.kind === 'plain' ? [side.piece] : side.parent.partitions);

/**
 * For each source piece, the index of the target piece its rows all belong to; or why no
 * such mapping exists (the text a refusal carries). `source`/`target` name the tables.
 */
export function pieceTargets(source: RepartitionSide, target: RepartitionSide, names: { source: string; target: string }): { into: number[] } | { refusal: string } {
  const sourcePieces = piecesOf(source);
  if (target.kind === 'plain') return { into: sourcePieces.map(() => 0) };
  const refuse = (why: string) => ({ refusal: `${names.source} cannot go into partitioned ${names.target}: ${why}; kcm moves each source partition whole into one target partition (a target whose partitions each hold whole source partitions, or a plain target table)` });
  if (source.kind === 'plain') return refuse(`${names.source} is not partitioned, so its rows would have to be split over ${target.parent.partitions.length} partitions`);
  const [sk, tk] = [parseKey(source.parent.key), parseKey(target.parent.key)];
  if (!sk || !tk) return refuse(`partition key ${source.parent.key} or ${target.parent.key} is not one kcm reads`);
  if (sk.strategy !== tk.strategy || sk.columns.join(',') !== tk.columns.join(',')) return refuse(`partition keys differ (${source.parent.key}, ${target.parent.key})`);
  if (sk.strategy !== 'hash' && sk.columns.length !== 1) return refuse(`${sk.strategy} partitioning on ${sk.columns.length} columns`);
  const targetBounds = target.parent.partitions.map((p) => parseBound(p.bound));
  const into: number[] = [];
  for (const piece of source.parent.partitions) {
    const b = parseBound(piece.bound);
    if (!b) return refuse(`bound of ${piece.table} (${piece.bound}) is not one kcm reads (hash, integer range, or list)`);
    const found = targetBounds.findIndex((t) => t !== undefined && inside(b, t));
    if (found < 0) return refuse(`no partition of ${names.target} holds every row of ${piece.table} (${piece.bound})`);
    into.push(found);
  }
  return { into };
}
