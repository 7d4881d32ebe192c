// DumpPgSchema: the catalog part of a cluster backup. pg_dump --schema-only of every
// database of a compute instance (templates aside), run on its host over the instance's own socket as the
// initdb superuser (peer authentication, no password anywhere). Custom format, so that a
// restore can pick the objects it puts back (catalog-restore.ts).

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AgentFailure, type PgSchemaDumpReply } from '@kcm/agent-api';
import type { AgentContext } from '../../capability';
import { exec } from '../../ops/exec';
import { withAdmin } from '../postgres/admin-session';
import { ADMIN_ROLE, InstanceRegistry, isIdentifier, socketDir, validatePort } from '../postgres/layout';

const DUMP_TIMEOUT_MS = 10 * 60_000;
/** A reply carries every database's dump whole, under gRPC's default message limit (4 MiB); schema dumps are a few KiB each. */
export const MAX_CATALOG_BYTES = 3.5 * 1024 * 1024;

export async function dumpPgSchema(ctx: AgentContext, port: number): Promise<PgSchemaDumpReply> {
  const registry = new InstanceRegistry(path.join(ctx.stateDir, 'postgres'));
  const instance = await registry.find(validatePort(port));
  if (!instance) throw new AgentFailure('not_found', `no compute instance on port ${port} on this host`);
  const databases = await withAdmin(instance, 'postgres', async (c) => {
    // `postgres` included: cluster database `postgres_$$_<schema>` lives there on a compute node.
    const r = await c.query<{ datname: string }>('SELECT datname FROM pg_database WHERE NOT datistemplate ORDER BY datname');
    return r.rows.map((row) => row.datname);
  });
  const pgDump = path.join(path.dirname(ctx.engines.postgres), 'pg_dump');
  const dumps = [];
  for (const database of databases) {
    // kcm creates only plain identifiers; anything else is not a cluster database and is
    // not passed to a tool's argv.
    if (!isIdentifier(database)) {
      ctx.logger.warn({ port, database }, 'database name is not a plain identifier; left out of the catalog dump');
      continue;
    }
    const dump = await dumpToBuffer(pgDump, ['--schema-only', '--format=custom', '--no-password', `--host=${socketDir(instance)}`, `--port=${instance.port}`, `--username=${ADMIN_ROLE}`, `--dbname=${database}`]);
    dumps.push({ database, dump, format: 'custom' });
    const total = dumps.reduce((sum, d) => sum + d.dump.length, 0);
    if (total >= MAX_CATALOG_BYTES) throw new AgentFailure('failed_precondition', `the schema dumps reach ${total} bytes by database ${database}; too large for a catalog dump (${MAX_CATALOG_BYTES} at most)`);
  }
  return { dumps };
}

/** pg_dump's binary output, through a private file (exec keeps output as text, at most 4 MiB). */
async function dumpToBuffer(pgDump: string, args: string[]): Promise<Buffer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'kcm-catalog-dump-'));
  try {
    const file = path.join(dir, 'catalog.pgdump');
    await exec(pgDump, [...args, `--file=${file}`], { timeoutMs: DUMP_TIMEOUT_MS });
    return await readFile(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
