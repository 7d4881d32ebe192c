// The agent's superuser session on a compute instance: over the instance's own unix
// socket, as the initdb superuser, authenticated by peer (pg_ident maps the agent's OS
// user). No password exists for it, so none can leak.

import pg from 'pg';
import { ADMIN_ROLE, socketDir, type PostgresInstance } from './layout';

export type AdminClient = pg.Client;

export async function withAdmin<T>(instance: PostgresInstance, database: string, work: (client: AdminClient) => Promise<T>): Promise<T> {
  const client = new pg.Client({
    host: socketDir(instance),
    port: instance.port,
    user: ADMIN_ROLE,
    database,
    connectionTimeoutMillis: 10_000,
    application_name: 'kcm-agent',
  });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** "name" with embedded quotes doubled; callers validate identifiers first, this is the second fence. */
export function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** 'text' with quotes doubled; standard_conforming_strings is on (the default since 9.1). */
export function literal(text: string): string {
  if (text.includes('\0')) throw new Error('a literal must not contain NUL');
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * Runs statements inside a savepoint of the transaction under way: their error, after
 * rolling back to the savepoint (the transaction goes on), or undefined when all succeeded.
 */
export async function trySavepoint(db: AdminClient, statements: string | readonly string[]): Promise<Error | undefined> {
  await db.query('SAVEPOINT kcm_try');
  try {
    for (const sql of typeof statements === 'string' ? [statements] : statements) await db.query(sql);
    await db.query('RELEASE SAVEPOINT kcm_try');
    return undefined;
  } catch (err) {
    await db.query('ROLLBACK TO SAVEPOINT kcm_try');
    await db.query('RELEASE SAVEPOINT kcm_try');
    return err as Error;
  }
}
