// DumpPgSchema: the catalog part of a cluster backup. pg_dump --schema-only of every
// database of a compute instance (templates aside), run on its host over the instance's own
// socket as the initdb superuser (peer authentication, no password anywhere). Custom format,
// so that a restore can pick the objects it puts back (catalog-restore.ts).

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

export async function dumpPgSchema(ctx: AgentContext, port: number): Promise<PgSchemaDumpReply> {
  const instance = await computeInstance(ctx, port);
  const databases = await withAdmin(instance, 'postgres', async (c) => {
    // `postgres` included: cluster database `postgres_$$_<schema>` lives there on a compute node.
    const r = await c.query<{ datname: string }>('SELECT datname FROM pg_database WHERE NOT datistemplate ORDER BY datname');
    return r.rows.map((row) => row.datname);
  });
  const pgDump = pgTool(ctx, 'pg_dump');
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
      await exec(pgDump, ['--schema-only', '--format=custom', ...adminConnection(instance, database), `--file=${file}`], { timeoutMs: CATALOG_TOOL_TIMEOUT_MS });
      return readFile(file);
    });
    dumps.push({ database, dump, format: 'custom' });
    total += dump.length;
    if (total >= MAX_CATALOG_BYTES) throw new AgentFailure('failed_precondition', `the schema dumps reach ${total} bytes by database ${database}; too large for a catalog dump (${MAX_CATALOG_BYTES} at most)`);
  }
  return { dumps };
}
