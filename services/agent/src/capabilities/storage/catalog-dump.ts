// DumpPgSchema: the catalog part of a cluster backup. pg_dump --schema-only of every
// database of a compute instance (templates aside), run on its host over the instance's own
// socket as the initdb superuser (peer authentication, no password anywhere). Custom format,
// so that a restore can pick the objects it puts back (catalog-restore.ts).
//
// No credential goes into a backup set. Each foreign server's user mapping holds the shard
// storage account's password in its options, and a superuser's pg_dump writes them out
// (`CREATE USER MAPPING ... OPTIONS (password '...')`): every backup set held the password in
// clear (issue 35, item 4). pg_dump has no switch to leave user mappings out, so it dumps as
// the predefined role pg_read_all_data (--role: SET ROLE after connecting): it reads every
// object's definition, but PostgreSQL shows a user mapping's options only to the mapped user,
// the server's owner or a superuser, so the mappings come out bare (`CREATE USER MAPPING FOR
// u SERVER s;`). The restore never used them: the catalog sync makes mappings from the
// replicated state. Subscriptions (whose conninfo may hold a password) are left out too, and
// a dump that still shows a mapping's options is refused, never stored.

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { AgentFailure, type PgSchemaDump, type PgSchemaDumpReply } from '@kcm/agent-api';
import type { AgentContext } from '../../capability';
import { exec } from '../../ops/exec';
import { withAdmin } from '../postgres/admin-session';
import { isIdentifier } from '../postgres/layout';
import { adminConnection, CATALOG_TOOL_TIMEOUT_MS, computeInstance, pgTool, withScratchDir } from './catalog-tools';

/** A reply carries every database's dump whole, under gRPC's default message limit (4 MiB); schema dumps are a few KiB each. */
export const MAX_CATALOG_BYTES = 3.5 * 1024 * 1024;

/** pg_dump options that keep credentials out of a schema dump (see the top of this file). */
const CREDENTIAL_FREE = ['--role=pg_read_all_data', '--no-subscriptions'];

/** A user mapping written with options (`CREATE USER MAPPING FOR u SERVER s OPTIONS (...)`), in pg_restore's SQL. */
const MAPPING_WITH_OPTIONS = /CREATE USER MAPPING FOR [^;]*\bOPTIONS\s*\(/;

/** Throws when the dump in `file`, rendered as SQL, still carries a user mapping's options: they hold the shard account's password. */
async function refuseCredentials(pgRestore: string, file: string, dir: string, database: string): Promise<void> {
  const sqlFile = path.join(dir, 'catalog.sql');
  await exec(pgRestore, [`--file=${sqlFile}`, file], { timeoutMs: CATALOG_TOOL_TIMEOUT_MS });
  if (MAPPING_WITH_OPTIONS.test(await readFile(sqlFile, 'utf8'))) {
    throw new AgentFailure('failed_precondition', `the schema dump of database ${database} still holds a user mapping's options (a password); it is not stored`);
  }
}

export async function dumpPgSchema(ctx: AgentContext, port: number): Promise<PgSchemaDumpReply> {
  const instance = await computeInstance(ctx, port);
  const databases = await withAdmin(instance, 'postgres', async (c) => {
    // `postgres` included: cluster database `postgres_$$_<schema>` lives there on a compute node.
    const r = await c.query<{ datname: string }>('SELECT datname FROM pg_database WHERE NOT datistemplate ORDER BY datname');
    return r.rows.map((row) => row.datname);
  });
  const pgDump = await pgTool(ctx, instance, 'pg_dump');
  const pgRestore = await pgTool(ctx, instance, 'pg_restore');
  const dumps: PgSchemaDump[] = [];
  let total = 0;
  for (const database of databases) {
    // kcm creates only plain identifiers; anything else is not a cluster database and is
    // not passed to a tool's argv.
    if (!isIdentifier(database)) {
      ctx.logger.warn({ port, database }, 'database name is not a plain identifier; left out of the catalog dump');
      continue;
    }
    // Through a private file: exec keeps a tool's output as text, at most 4 MiB.
    const dump = await withScratchDir('kcm-catalog-dump-', async (dir) => {
      const file = path.join(dir, 'catalog.pgdump');
      await exec(pgDump, ['--schema-only', '--format=custom', ...CREDENTIAL_FREE, ...adminConnection(instance, database), `--file=${file}`], { timeoutMs: CATALOG_TOOL_TIMEOUT_MS });
      await refuseCredentials(pgRestore, file, dir, database);
      return readFile(file);
    });
    dumps.push({ database, dump, format: 'custom' });
    total += dump.length;
    if (total >= MAX_CATALOG_BYTES) throw new AgentFailure('failed_precondition', `the schema dumps reach ${total} bytes by database ${database}; too large for a catalog dump (${MAX_CATALOG_BYTES} at most)`);
  }
  return { dumps };
}
