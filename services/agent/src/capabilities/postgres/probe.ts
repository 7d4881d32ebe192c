// Live status of a compute instance, measured: registry and data directory, the
// postmaster process, and a real query over its socket.

import { access } from 'node:fs/promises';
import path from 'node:path';
import { withAdmin } from './admin-session';
import type { InstanceRegistry } from './layout';
import { postmasterStatus } from './postmaster';
import type { ProbePostgresReply } from '@kcm/agent-api';

export async function probePostgres(registry: InstanceRegistry, port: number): Promise<ProbePostgresReply> {
  const none: ProbePostgresReply = { installed: false, running: false, pid: 0, accepting: false, version: '', problem: '' };
  const instance = await registry.find(port);
  if (!instance) return { ...none, problem: 'not installed by this agent' };
  try {
    await access(path.join(instance.datadir, 'PG_VERSION'));
  } catch {
    return { ...none, problem: `data directory ${instance.datadir} is missing` };
  }
  const status = await postmasterStatus(instance.datadir);
  if (!status) return { ...none, installed: true, problem: 'not running' };
  try {
    const version = await withAdmin(instance, 'postgres', async (db) => (await db.query<{ v: string }>('SELECT version() AS v')).rows[0].v);
    return { installed: true, running: true, pid: status.pid, accepting: true, version, problem: '' };
  } catch (err) {
    return { installed: true, running: true, pid: status.pid, accepting: false, version: '', problem: (err as Error).message };
  }
}
