// What a shard master holds: every base table in a database named <D>_$$_<S>, with a
// signature of its columns (names and types, in order) so a changed table is re-imported.

import { createHash } from 'node:crypto';
import mysql from 'mysql2/promise';
import type { ShardEndpoint } from './postgres-proto';

/** PostgreSQL database D, schema S <-> MariaDB database D_$$_S (DESIGN.md section 1). */
export const SCHEMA_SEPARATOR = '_$$_';

export interface RemoteTable {
  /** MariaDB database, D_$$_S. */
  remoteDb: string;
  database: string;
  schema: string;
  table: string;
  signature: string;
}

export interface ShardView {
  shardId: string;
  /** False when the shard could not be read: its foreign tables are left as they are. */
  reachable: boolean;
  problem: string;
  tables: RemoteTable[];
}

/** Splits D_$$_S at the first separator; undefined for databases outside the convention. */
export function splitRemoteDb(remoteDb: string): { database: string; schema: string } | undefined {
  const at = remoteDb.indexOf(SCHEMA_SEPARATOR);
  if (at <= 0 || at + SCHEMA_SEPARATOR.length >= remoteDb.length) return undefined;
  return { database: remoteDb.slice(0, at), schema: remoteDb.slice(at + SCHEMA_SEPARATOR.length) };
}

export function columnSignature(columns: [name: string, type: string][]): string {
  return createHash('sha256').update(JSON.stringify(columns)).digest('hex').slice(0, 24);
}

interface ColumnRow {
  db: string;
  tbl: string;
  col: string;
  type: string;
}

export async function readShardTables(shard: ShardEndpoint, timeoutMs = 5_000): Promise<ShardView> {
  let conn: mysql.Connection | undefined;
  try {
    conn = await mysql.createConnection({ host: shard.host, port: shard.port, user: shard.user, password: shard.password, connectTimeout: timeoutMs });
    const [rows] = await conn.query({
      sql: `SELECT c.TABLE_SCHEMA AS db, c.TABLE_NAME AS tbl, c.COLUMN_NAME AS col, c.COLUMN_TYPE AS type
              FROM information_schema.COLUMNS c
              JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
             WHERE t.TABLE_TYPE = 'BASE TABLE' AND c.TABLE_SCHEMA LIKE ?
             ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION`,
      values: ['%\\_$$\\_%'],
      timeout: timeoutMs,
    });
    const byTable = new Map<string, { db: string; tbl: string; columns: [string, string][] }>();
    for (const r of rows as ColumnRow[]) {
      const key = `${r.db}\0${r.tbl}`;
      const entry = byTable.get(key) ?? { db: r.db, tbl: r.tbl, columns: [] };
      entry.columns.push([r.col, r.type]);
      byTable.set(key, entry);
    }
    const tables: RemoteTable[] = [];
    for (const { db, tbl, columns } of byTable.values()) {
      const names = splitRemoteDb(db);
      if (names) tables.push({ remoteDb: db, ...names, table: tbl, signature: columnSignature(columns) });
    }
    return { shardId: shard.shard_id, reachable: true, problem: '', tables };
  } catch (err) {
    return { shardId: shard.shard_id, reachable: false, problem: (err as Error).message, tables: [] };
  } finally {
    await conn?.end().catch(() => {});
  }
}
