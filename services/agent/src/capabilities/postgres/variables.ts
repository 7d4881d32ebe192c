// Server settings the manager asks for: persisted in kcm-variables.conf (so they survive
// restarts), applied by a reload, read back from pg_settings. A setting PostgreSQL cannot
// parse is refused and the previous file restored. Settings read only at server start
// ("postmaster" context) are not checked by a reload, so `postgres -C` parses them.

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { withAdmin, type AdminClient } from './admin-session';
import { validateVariables, variablesConf, VARIABLES_CONF, writeOwned } from './config';
import type { InstanceRegistry, PostgresInstance } from './layout';
import type { PostgresHost } from './lifecycle';
import type { PostgresVariablesReply } from '@kcm/agent-api';
import { exec } from '../../ops/exec';
import { AgentFailure } from '@kcm/agent-api';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function readSettings(db: AdminClient, names: string[]): Promise<PostgresVariablesReply> {
  const rows = await db.query<{ name: string; value: string; pending_restart: boolean }>(
    'SELECT name, current_setting(name) AS value, pending_restart FROM pg_settings WHERE name = ANY($1) ORDER BY name',
    [names],
  );
  return { variables: rows.rows };
}

/** Reloads and waits until this session has re-read the configuration (pg_conf_load_time moves). */
async function reloadAndWait(db: AdminClient): Promise<void> {
  const before = (await db.query<{ t: string }>('SELECT pg_conf_load_time()::text AS t')).rows[0].t;
  await db.query('SELECT pg_reload_conf()');
  for (let i = 0; i < 100; i++) {
    await sleep(20);
    const now = (await db.query<{ t: string }>('SELECT pg_conf_load_time()::text AS t')).rows[0].t;
    if (now !== before) return;
  }
  throw new AgentFailure('instance_failed', 'the server did not reload its configuration within 2 s');
}

/** Problems PostgreSQL finds in the written file; an empty list means every setting parses. */
async function checkWrittenSettings(host: PostgresHost, instance: PostgresInstance, db: AdminClient, file: string, names: string[]): Promise<string[]> {
  const known = await db.query<{ name: string; context: string }>('SELECT name, context FROM pg_settings WHERE name = ANY($1)', [names]);
  const contexts = new Map(known.rows.map((r) => [r.name, r.context]));
  const problems = names.filter((n) => !contexts.has(n)).map((n) => `${n}: unknown setting`);
  const startOnly = names.filter((n) => contexts.get(n) === 'postmaster');
  // A changed start-only setting always shows "could not be applied" here; it is checked below instead.
  const errors = await db.query<{ name: string | null; error: string }>('SELECT name, error FROM pg_file_settings WHERE error IS NOT NULL AND sourcefile = $1', [file]);
  problems.push(...errors.rows.filter((e) => !startOnly.includes(e.name ?? '')).map((e) => `${e.name ?? '?'}: ${e.error}`));
  for (const name of startOnly) {
    try {
      await exec(path.join((await host.engine(instance.engineVersion)).binDir, 'postgres'), ['-D', instance.datadir, '-C', name], { runAs: host.runAs(), timeoutMs: 30_000 });
    } catch (err) {
      problems.push(`${name}: ${(err as Error).message}`);
    }
  }
  return problems;
}

export async function setVariables(host: PostgresHost, port: number, variables: Record<string, string>): Promise<PostgresVariablesReply> {
  const instance = await host.registry.get(port);
  const merged = { ...instance.variables, ...validateVariables(variables) };
  const file = path.join(instance.datadir, VARIABLES_CONF);
  const previous = await readFile(file, 'utf8');
  await writeOwned(file, variablesConf(merged), host.runAs());
  return withAdmin(instance, 'postgres', async (db) => {
    const problems = await checkWrittenSettings(host, instance, db, file, Object.keys(variables));
    if (problems.length > 0) {
      await writeOwned(file, previous, host.runAs());
      throw new AgentFailure('invalid_argument', `settings refused, nothing changed: ${problems.join('; ')}`);
    }
    await host.registry.save({ ...instance, variables: merged });
    await reloadAndWait(db);
    return readSettings(db, Object.keys(variables));
  });
}

export async function getVariables(registry: InstanceRegistry, port: number, names: string[]): Promise<PostgresVariablesReply> {
  const instance = await registry.get(port);
  return withAdmin(instance, 'postgres', (db) => readSettings(db, names));
}
