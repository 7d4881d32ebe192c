// What a shard master holds: every base table in a database named <D>_$$_<S>, with a
// signature of its columns (names and types, in order) so a changed table is re-imported,
// and each column's NOT NULL and default as the foreign table should carry them, with a
// signature of those so a changed default is applied in place.

import { createHash } from 'node:crypto';
import { ONE_SHOT_MYSQL_OPTIONS } from '@kcm/common';
import mysql from 'mysql2/promise';
import { mapMariadbDefault } from './column-defaults';
import type { ShardEndpoint } from '@kcm/agent-api';

/** PostgreSQL database D, schema S <-> MariaDB database D_$$_S on a shard (the spec's `db_table` shapes use the same convention). */
export const SCHEMA_SEPARATOR = '_$$_';

export interface RemoteTable {
  /** MariaDB database, D_$$_S. */
  remoteDb: string;
  database: string;
  schema: string;
  table: string;
  signature: string;
  /** NOT NULL and default of every column, in order. */
  columns: RemoteColumn[];
  /** Hash of `columns`' notNull and defaultSql: what the foreign table's columns must carry. */
  attributes: string;
  /** Set when kcm_ddl made this table as a partition (recorded in the table's COMMENT). */
  partition?: PartitionOf;
}

/** The partitioned parent a shard table belongs to on the compute nodes. */
export interface PartitionOf {
  schema: string;
  table: string;
  /** pg_get_partkeydef of the parent, e.g. `HASH (id)`. */
  key: string;
  /** The partition bound, e.g. `FOR VALUES WITH (modulus 4, remainder 0)`. */
  bound: string;
}

/** The partition record kcm_ddl writes as a table COMMENT; undefined for any other comment. */
export function parsePartitionComment(comment: string | null): PartitionOf | undefined {
  if (!comment?.startsWith('{"kcm_partition_of"')) return undefined;
  try {
    const v = JSON.parse(comment) as { kcm_partition_of?: unknown; key?: unknown; bound?: unknown };
    const of = v.kcm_partition_of;
    if (!Array.isArray(of) || of.length !== 2 || !of.every((x) => typeof x === 'string') || typeof v.key !== 'string' || typeof v.bound !== 'string') return undefined;
    return { schema: of[0] as string, table: of[1] as string, key: v.key, bound: v.bound };
  } catch {
    return undefined;
  }
}

export interface RemoteColumn {
  name: string;
  notNull: boolean;
  /** The PostgreSQL default expression; null = none. */
  defaultSql: string | null;
  /** Why the MariaDB default (`rawDefault`) is not carried; empty when it is. */
  unmapped: string;
  rawDefault: string | null;
}

export interface ShardView {
  shardId: string;
  /** False when the shard could not be read: its foreign tables are left as they are. */
  reachable: boolean;
  problem: string;
  tables: RemoteTable[];
  /**
   * Every D_$$_S database on the shard, tables or not: schema S of database D exists on
   * every compute node while some shard has it (kcm_ddl makes it on CREATE SCHEMA).
   */
  schemas?: { database: string; schema: string }[];
}

/** Splits D_$$_S at the first separator; undefined for databases outside the convention. */
export function splitRemoteDb(remoteDb: string): { database: string; schema: string } | undefined {
  const at = remoteDb.indexOf(SCHEMA_SEPARATOR);
  if (at <= 0 || at + SCHEMA_SEPARATOR.length >= remoteDb.length) return undefined;
  return { database: remoteDb.slice(0, at), schema: remoteDb.slice(at + SCHEMA_SEPARATOR.length) };
}

function hash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 24);
}

export function columnSignature(columns: [name: string, type: string][]): string {
  return hash(columns);
}

export function attributeSignature(columns: RemoteColumn[]): string {
  return hash(columns.map((c) => [c.name, c.notNull, c.defaultSql]));
}

/** One information_schema.COLUMNS row as the foreign column should be. */
export function remoteColumn(name: string, nullable: string, columnDefault: string | null, columnType: string, generated: string): RemoteColumn {
  const mapped = mapMariadbDefault(columnDefault, columnType, generated === 'ALWAYS');
  return 'sql' in mapped
    ? { name, notNull: nullable === 'NO', defaultSql: mapped.sql, unmapped: '', rawDefault: columnDefault }
    : { name, notNull: nullable === 'NO', defaultSql: null, unmapped: mapped.unmapped, rawDefault: columnDefault };
}

interface ColumnRow {
  db: string;
  tbl: string;
  col: string;
  type: string;
  nullable: string;
  dflt: string | null;
  generated: string;
  tcomment: string | null;
}

export async function readShardTables(shard: ShardEndpoint, timeoutMs = 5_000): Promise<ShardView> {
  let conn: mysql.Connection | undefined;
  try {
    conn = await mysql.createConnection({ ...ONE_SHOT_MYSQL_OPTIONS, host: shard.host, port: shard.port, user: shard.user, password: shard.password, connectTimeout: timeoutMs });
    const [rows] = await conn.query({
      sql: `SELECT c.TABLE_SCHEMA AS db, c.TABLE_NAME AS tbl, c.COLUMN_NAME AS col, c.COLUMN_TYPE AS type,
                   c.IS_NULLABLE AS nullable, c.COLUMN_DEFAULT AS dflt, c.IS_GENERATED AS generated, t.TABLE_COMMENT AS tcomment
              FROM information_schema.COLUMNS c
              JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
             WHERE t.TABLE_TYPE = 'BASE TABLE' AND c.TABLE_SCHEMA LIKE ?
             ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION`,
      values: ['%\\_$$\\_%'],
      timeout: timeoutMs,
    });
    const byTable = new Map<string, { db: string; tbl: string; types: [string, string][]; columns: RemoteColumn[]; partition?: PartitionOf }>();
    for (const r of rows as ColumnRow[]) {
      const key = `${r.db}\0${r.tbl}`;
      const entry = byTable.get(key) ?? { db: r.db, tbl: r.tbl, types: [], columns: [], partition: parsePartitionComment(r.tcomment) };
      entry.types.push([r.col, r.type]);
      entry.columns.push(remoteColumn(r.col, r.nullable, r.dflt, r.type, r.generated));
      byTable.set(key, entry);
    }
    const [databases] = await conn.query({ sql: 'SELECT SCHEMA_NAME AS db FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?', values: ['%\\_$$\\_%'], timeout: timeoutMs });
    const schemas = (databases as { db: string }[]).map((r) => splitRemoteDb(r.db)).filter((n): n is { database: string; schema: string } => n !== undefined);
    const tables: RemoteTable[] = [];
    for (const { db, tbl, types, columns, partition } of byTable.values()) {
      const names = splitRemoteDb(db);
      if (names) tables.push({ remoteDb: db, ...names, table: tbl, signature: columnSignature(types), columns, attributes: attributeSignature(columns), ...(partition ? { partition } : {}) });
    }
    return { shardId: shard.shard_id, reachable: true, problem: '', tables, schemas };
  } catch (err) {
    return { shardId: shard.shard_id, reachable: false, problem: (err as Error).message, tables: [] };
  } finally {
    await conn?.end().catch(() => {});
  }
}
