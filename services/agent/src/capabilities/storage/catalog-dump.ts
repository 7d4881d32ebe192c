// DumpPgSchema: the catalog part of a cluster backup. pg_dump --schema-only of every
// database of a compute instance (templates aside), run on its host over the instance's own socket as the
// initdb superuser (peer authentication, no password anywhere).

import path from 'node:path';
import { AgentFailure, type PgSchemaDumpReply } from '@kcm/agent-api';
import type { AgentContext } from '../../capability';
import { exec } from '../../ops/exec';
import { withAdmin } from '../postgres/admin-session';
import { ADMIN_ROLE, InstanceRegistry, isIdentifier, socketDir, validatePort } from '../postgres/layout';

const DUMP_TIMEOUT_MS = 10 * 60_000;

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
    const { stdout } = await exec(pgDump, ['--schema-only', '--format=plain', '--no-password', `--host=${socketDir(instance)}`, `--port=${instance.port}`, `--username=${ADMIN_ROLE}`, `--dbname=${database}`], {
      timeoutMs: DUMP_TIMEOUT_MS,
    });
    // exec keeps at most 4 MiB of output: a dump that reaches it may be cut, and is refused.
    if (stdout.length >= 4 * 1024 * 1024) throw new AgentFailure('failed_precondition', `the schema dump of database ${database} reaches 4 MiB; too large for a catalog dump`);
    dumps.push({ database, sql: Buffer.from(stdout) });
  }
  return { dumps };
}
