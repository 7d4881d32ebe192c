// SQL sessions on a shard master, opened by the agent for a move's data work and for the
// manager's control statements (sessions.ts): mysql2 over TCP to the login's host:port,
// as the cluster's storage account (or its replication account for binlog positions).

import { ONE_SHOT_MYSQL_OPTIONS } from '@kcm/common';
import mysql from 'mysql2/promise';
import { AgentFailure, type BinlogPosition, type ShardLogin, type TableShape as ContractShape } from '@kcm/agent-api';

/**
 * What a move knows of a table: its columns, its primary key's columns in key order (with
 * their 1-based ordinals among `columns`: binlog rows name columns by ordinal) and its
 * character columns (`text`: compared as utf8mb4, since a target may store them in a wider
 * set than the source, as other bytes for the same characters).
 */
export type TableShape = Pick<ContractShape, 'columns' | 'key'> & { text?: string[] };

/** A table on a shard master: the move's source or target. */
export interface TableName {
  db: string;
  table: string;
}

/**
 * Values come back as the text MariaDB gives (dates, decimals, big integers), so a copy
 * writes back exactly what it read, and so a session's result survives JSON to the manager.
 * A session that cannot be opened (the instance down, its host cut off, the login refused)
 * is instance_failed naming the instance's address: the driver's own error says only
 * "connect ECONNREFUSED".
 */
export async function openShard(login: ShardLogin, database = ''): Promise<mysql.Connection> {
  try {
    const c = await mysql.createConnection({
      ...ONE_SHOT_MYSQL_OPTIONS,
      host: login.host,
      port: login.port,
      user: login.user,
      password: login.password,
      ...(database ? { database } : {}),
      connectTimeout: 5000,
      dateStrings: true,
      supportBigNumbers: true,
      bigNumberStrings: true,
      decimalNumbers: false,
      charset: 'utf8mb4',
    });
    // A session the server drops between statements: the next statement on it fails instead.
    c.on('error', () => {});
    return c;
  } catch (err) {
    throw new AgentFailure('instance_failed', `MariaDB at ${login.host}:${login.port} did not accept a session: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

export async function closeShard(c: mysql.Connection): Promise<void> {
  await c.end().catch(() => c.destroy());
}

export async function withShard<T>(login: ShardLogin, work: (c: mysql.Connection) => Promise<T>): Promise<T> {
  const c = await openShard(login);
  try {
    return await work(c);
  } finally {
    await closeShard(c);
  }
}

export const q = (name: string) => `\`${name.replaceAll('`', '``')}\``;

/** The key's columns as a row constructor, for `(a, b) > (?, ?)`-style conditions. */
export function keyTuple(shape: TableShape): string {
  return `(${shape.key.map((k) => q(k.name)).join(', ')})`;
}

/** The binlog file and position now (SHOW MASTER STATUS needs BINLOG MONITOR: the replication account's login). */
export async function masterPosition(c: mysql.Connection): Promise<BinlogPosition> {
  const [rows] = (await c.query('SHOW MASTER STATUS')) as unknown as [{ File: string; Position: number | string }[]];
  if (rows.length === 0) throw new AgentFailure('instance_failed', 'the source master has no binary log (SHOW MASTER STATUS is empty)');
  return { file: rows[0].File, pos: Number(rows[0].Position) };
}

/**
 * A failure of MariaDB (a refused statement, a lost session) as the manager should read it:
 * instance_failed with the server's message and error code, after `where` (the instance's
 * address, or the move's two ends). The statement text mysql2 attaches is left out (it may
 * hold row values).
 */
export function instanceFailure(where: string, err: unknown): Error {
  if (err instanceof AgentFailure) return err;
  const e = err as { code?: string; sqlMessage?: string; message?: string; sqlState?: string };
  if (typeof e.sqlState !== 'string' && !/^(E[A-Z]+|PROTOCOL_)/.test(e.code ?? '')) return err instanceof Error ? err : new Error(String(err));
  const code = e.code ? ` (${e.code})` : '';
  return new AgentFailure('instance_failed', `${where}: ${e.sqlMessage ?? e.message ?? String(err)}${code}`, { cause: err });
}

export const addressOf = (login: ShardLogin) => `${login.host}:${login.port}`;
