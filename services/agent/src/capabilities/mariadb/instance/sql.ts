// SQL from the agent to a local instance: mysql2 over the instance's unix socket, as the
// agent's admin account. Passwords go in connection options or as escaped values in SQL
// sent over that connection, never in argv. mysql2 errors carry the statement text (`sql`),
// which may hold a password: every error leaving here is rebuilt without it.

import { ONE_SHOT_MYSQL_OPTIONS } from '@kcm/common';
import mysql, { type Connection, type ResultSetHeader, type RowDataPacket } from 'mysql2/promise';
import type { InstanceLayout } from './instance-layout';
import type { MariaDbAccount } from '@kcm/agent-api';

export class MariaDbSqlError extends Error {
  constructor(
    readonly what: string,
    readonly code: string | undefined,
    readonly errno: number | undefined,
    message: string,
  ) {
    super(`${what}: ${message}`);
    this.name = 'MariaDbSqlError';
  }
}

/** Replaces every secret in a message; used on anything that might echo a statement. */
export function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (secret) out = out.split(secret).join('[secret]');
  return out;
}

function rebuildError(what: string, err: unknown, secrets: readonly string[]): MariaDbSqlError {
  const e = err as { code?: string; errno?: number; sqlMessage?: string; message?: string };
  return new MariaDbSqlError(what, e.code, e.errno, scrub(e.sqlMessage ?? e.message ?? String(err), secrets));
}

export interface AdminSession {
  /** Runs one statement; `what` names it in errors instead of the statement text. */
  run(what: string, sql: string, values?: unknown[]): Promise<void>;
  rows<T = Record<string, unknown>>(what: string, sql: string, values?: unknown[]): Promise<T[]>;
  /** Runs one data-changing statement and returns how many rows it changed (affectedRows). */
  change(what: string, sql: string, values?: unknown[]): Promise<number>;
  close(): Promise<void>;
}

/**
 * Connects as the admin account over the socket. `secrets` are scrubbed from every error
 * message of this session (the admin password always is).
 */
export async function adminSession(layout: InstanceLayout, admin: MariaDbAccount, secrets: readonly string[] = [], connectTimeoutMs = 5000): Promise<AdminSession> {
  const allSecrets = [admin.password, ...secrets];
  let conn: Connection;
  try {
    conn = await mysql.createConnection({
      ...ONE_SHOT_MYSQL_OPTIONS,
      socketPath: layout.socket,
      user: admin.user,
      password: admin.password,
      connectTimeout: connectTimeoutMs,
      multipleStatements: false,
      supportBigNumbers: true,
      bigNumberStrings: true,
      dateStrings: true,
    });
  } catch (err) {
    throw rebuildError(`connect to ${layout.socket}`, err, allSecrets);
  }
  conn.on('error', () => {}); // a dropped connection surfaces on the next call, not as an uncaught event
  const query = async (what: string, sql: string, values?: unknown[]) => {
    try {
      const [rows] = await conn.query(sql, values);
      return rows;
    } catch (err) {
      throw rebuildError(what, err, allSecrets);
    }
  };
  return {
    run: async (what, sql, values) => {
      await query(what, sql, values);
    },
    rows: async <T>(what: string, sql: string, values?: unknown[]) => (await query(what, sql, values)) as RowDataPacket[] as T[],
    change: async (what, sql, values) => ((await query(what, sql, values)) as ResultSetHeader).affectedRows,
    close: async () => {
      await conn.end().catch(() => conn.destroy());
    },
  };
}

export async function withAdmin<T>(layout: InstanceLayout, admin: MariaDbAccount, secrets: readonly string[], work: (s: AdminSession) => Promise<T>): Promise<T> {
  const session = await adminSession(layout, admin, secrets);
  try {
    return await work(session);
  } finally {
    await session.close();
  }
}

/** A string literal for SQL text that is not sent through placeholders (e.g. piped to the CLI). */
export function sqlString(value: string): string {
  return mysql.escape(value);
}

/** 'user'@'host' with both parts escaped as literals (account names cannot be placeholders in DDL). */
export function account(user: string, host: string): string {
  return `${mysql.escape(user)}@${mysql.escape(host)}`;
}
