// What DumpPgSchema and RestorePgSchema share: the compute instance a request names,
// PostgreSQL's client tools beside its server binary, their connection to the instance (its
// own socket, the initdb superuser, peer authentication: no password anywhere), and a
// private scratch directory for the files the tools read and write.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AgentFailure } from '@kcm/agent-api';
import type { AgentContext } from '../../capability';
import { ADMIN_ROLE, InstanceRegistry, socketDir, validatePort, type PostgresInstance } from '../postgres/layout';

export const CATALOG_TOOL_TIMEOUT_MS = 10 * 60_000;

export async function computeInstance(ctx: AgentContext, port: number): Promise<PostgresInstance> {
  const instance = await new InstanceRegistry(path.join(ctx.stateDir, 'postgres')).find(validatePort(port));
  if (!instance) throw new AgentFailure('not_found', `no compute instance on port ${port} on this host`);
  return instance;
}

/** A client tool of the engine the instance runs (its record's version; capabilities/engines). */
export async function pgTool(ctx: AgentContext, instance: PostgresInstance, name: 'pg_dump' | 'pg_restore'): Promise<string> {
  return path.join((await ctx.engines.postgres(instance.engineVersion)).binDir, name);
}

/** A tool's arguments for a session on `database` of the instance, as its superuser over its socket. */
export const adminConnection = (instance: PostgresInstance, database: string): string[] => [
  '--no-password', `--host=${socketDir(instance)}`, `--port=${instance.port}`, `--username=${ADMIN_ROLE}`, `--dbname=${database}`,
];

/** Runs `work` in a new directory only this process can read, removed afterwards. */
export async function withScratchDir<T>(prefix: string, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  try {
    return await work(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
