// The manager's SQL on shard masters during a move or a repartition: control statements
// only (create the target like the source, read a table's shape or a binlog position,
// rename or drop a table), each in a session that the agent of the master's host holds for
// it (ShardDataAgent OpenSession/SessionQuery): the manager opens no SQL session itself, and
// rows are copied, caught up and compared by the agents (engine.ts). Also what a move needs
// to know of a table: its columns and primary key.

import type { Agents } from '@kcm/agent-api';
import { isAgentUnreachable } from '@kcm/agent-api';
import { KcmError } from '@kcm/protocol';
import type { ClusterAccountRole, ClusterRecord } from '../../meta/state';
import { liveAccount } from '../../secrets/live-accounts';
import type { SecretBox } from '../../secrets/secret-box';

export interface ShardLogin {
  host: string;
  port: number;
  user: string;
  password: string;
}

/** A login to `node` with the cluster's `role` account, as the engines take it now (a rotation's new password once every node has it). */
export function loginAs(secrets: SecretBox, cluster: ClusterRecord, node: { hostaddr: string; port: number }, role: ClusterAccountRole): ShardLogin {
  const a = liveAccount(secrets, cluster, role);
  return { host: node.hostaddr, port: node.port, user: a.user, password: a.password };
}

/** A statement as mysql2 takes it: text, or text with parameters and the rows' form. */
export type Statement = string | { sql: string; values?: unknown[]; rowsAsArray?: boolean };

/**
 * A session on a shard master, held by the agent of its host. `query` answers as mysql2's
 * does, `[result]` (rows for a SELECT, a result header otherwise), with values as the text
 * MariaDB gives (dates, decimals, big integers), so what is read is written back exactly.
 */
export interface ShardSession {
  query(statement: Statement, values?: unknown[]): Promise<[unknown]>;
  end(): Promise<void>;
}

/**
 * A session that cannot be opened names the instance's address: INSTANCE_FAILED when the
 * instance is down or refuses the login (the driver's own error says only "connect
 * ECONNREFUSED", which the job would report as a bug), AGENT_UNREACHABLE when the agent of
 * its host does not answer.
 */
export async function openShard(agents: Agents, login: ShardLogin, database = ''): Promise<ShardSession> {
  const agent = agents.shardData(login.host);
  let id: string;
  try {
    id = await agent.openSession(login, database);
  } catch (err) {
    if (isAgentUnreachable(err)) throw KcmError.of('AGENT_UNREACHABLE', `MariaDB at ${login.host}:${login.port}: the agent of its host did not answer (${(err as Error).message})`, { cause: err });
    throw KcmError.of('INSTANCE_FAILED', `MariaDB at ${login.host}:${login.port} did not accept a session: ${(err as Error).message}`, { cause: err });
  }
  let open = true;
  return {
    async query(statement, values) {
      const sql = typeof statement === 'string' ? statement : statement.sql;
      const params = typeof statement === 'string' ? (values ?? []) : (statement.values ?? values ?? []);
      const rowsAsArray = typeof statement === 'string' ? false : (statement.rowsAsArray ?? false);
      try {
        return [await agent.sessionQuery(id, sql, params, rowsAsArray)];
      } catch (err) {
        throw KcmError.of('INSTANCE_FAILED', `MariaDB at ${login.host}:${login.port}: ${(err as Error).message}`, { cause: err });
      }
    },
    async end() {
      if (!open) return;
      open = false;
      await agent.closeSession(id).catch(() => {});
    },
  };
}

export async function withShard<T>(agents: Agents, login: ShardLogin, work: (c: ShardSession) => Promise<T>): Promise<T> {
  const c = await openShard(agents, login);
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}

export const q = (name: string) => `\`${name.replaceAll('`', '``')}\``;

export interface TableShape {
  columns: string[];
  /** The primary key's columns in key order, with their 1-based ordinals among `columns`. */
  key: { name: string; ordinal: number }[];
  /**
   * The columns with a character set (char, varchar, text, enum, set): the verify compares
   * them as utf8mb4 text, since a target may store them in a wider set than the source
   * (repartition rule 6: latin1 -> utf8mb4), as other bytes for the same characters.
   */
  text?: string[];
}

/** Key column types whose binlog text maps back to the value exactly (binlog-rows.ts). */
const KEY_TYPES = new Set(['tinyint', 'smallint', 'mediumint', 'int', 'bigint', 'char', 'varchar', 'binary', 'varbinary']);

export async function readTableShape(c: ShardSession, db: string, table: string): Promise<TableShape | undefined> {
  const [cols] = (await c.query(
    `SELECT COLUMN_NAME AS name, ORDINAL_POSITION AS ordinal, DATA_TYPE AS type, COLUMN_KEY AS ckey, CHARACTER_SET_NAME AS charset FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`,
    [db, table],
  )) as unknown as [{ name: string; ordinal: number | string; type: string; ckey: string; charset: string | null }[]];
  if (cols.length === 0) return undefined;
  const [keys] = (await c.query(
    `SELECT COLUMN_NAME AS name FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX`,
    [db, table],
  )) as unknown as [{ name: string }[]];
  const byName = new Map(cols.map((col) => [col.name, col]));
  return {
    columns: cols.map((col) => col.name),
    text: cols.filter((col) => col.charset !== null && col.charset !== 'binary').map((col) => col.name),
    key: keys.map((k) => {
      const col = byName.get(k.name);
      if (!col) throw new Error(`primary key column ${k.name} is not a column of ${db}.${table}`);
      if (!KEY_TYPES.has(col.type)) throw KcmError.of('UNSUPPORTED', `${db}.${table}: primary key column ${k.name} is ${col.type}; a move supports integer and (var)char/(var)binary keys`);
      // information_schema's ORDINAL_POSITION is a BIGINT: a string through these sessions (bigNumberStrings).
      return { name: k.name, ordinal: Number(col.ordinal) };
    }),
  };
}

/** The binlog file and position now (SHOW MASTER STATUS needs BINLOG MONITOR: the replication account's login). */
export async function masterPosition(c: ShardSession): Promise<{ file: string; pos: number }> {
  const [rows] = (await c.query('SHOW MASTER STATUS')) as unknown as [{ File: string; Position: number | string }[]];
  if (rows.length === 0) throw KcmError.of('INSTANCE_FAILED', 'the source master has no binary log (SHOW MASTER STATUS is empty)');
  return { file: rows[0].File, pos: Number(rows[0].Position) };
}

/** `(a, b) > (?, ?)`-style conditions and the key tuple of a row. */
export function keyTuple(shape: TableShape): string {
  return `(${shape.key.map((k) => q(k.name)).join(', ')})`;
}
