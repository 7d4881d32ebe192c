// End to end on real engines: a cluster made through a `kcm local` group (3 managers on
// 127.0.1.211-213, 3 agents on 127.0.2.211-213) survives `kcm local down` + `kcm local up`:
// every instance comes back (the agents' supervisors, and the leader's reconciler for an
// instance its agent was not told to keep), writes through a compute node work again, a
// crashed manager is restarted by `local up` alone, and `local down --purge` leaves no
// instance cgroup behind.

import { execFile } from 'node:child_process';
import { access, chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectCpuHierarchy } from '../../services/agent/src/capabilities/cgroup/detect';
import { emit, waitForJobEnd } from '../manager/helpers/emit-client';
import { useDefaultToken } from '../helpers/tokens';
import { waitUntil } from '../cluster/cluster-fixture';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const CLI = path.join(REPO, 'services/cli/src/main.ts');
const BLOCK = ['--managers', '3', '--hosts', '3', '--first', '211'];
const MEMBERS = ['127.0.1.211:58000', '127.0.1.212:58000', '127.0.1.213:58000'];
const HOSTS = ['127.0.2.211', '127.0.2.212', '127.0.2.213'];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function kcm(args: string[], timeoutMs = 90_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', CLI, ...args], { cwd: REPO, timeout: timeoutMs }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** Any member that answers (a follower serves queries and forwards jobs). */
async function ask(jobType: string, paras: Record<string, unknown> = {}) {
  let last: unknown;
  for (const member of MEMBERS) {
    try {
      return await emit(member, jobType, paras);
    } catch (err) {
      last = err;
    }
  }
  throw last;
}

async function runJob(jobType: string, paras: Record<string, unknown>, timeoutMs: number) {
  const ack = await ask(jobType, paras);
  return waitForJobEnd(MEMBERS, ack.job_id, timeoutMs);
}

interface Detail {
  list_shard: { list_node: { hostaddr: string; port: string; status: string; master: string }[] }[];
  list_comp: { hostaddr: string; port: string; status: string }[];
}

describe('a cluster through kcm local down and up (real engines)', () => {
  let dir: string;
  let created: { cluster_id: string; cluster_name: string; computer_user: string; computer_pwd: string; storage_user: string; storage_pwd: string };
  let comp: { host: string; port: number };

  const detail = async () => (await ask('get_cluster_detail', { cluster_name: created.cluster_name })).attachment as unknown as Detail;
  const summary = async () => ((await ask('get_cluster_summary')).attachment as { list_cluster: Record<string, string>[] }).list_cluster[0];
  const pgClient = async () => {
    const c = new pg.Client({ host: comp.host, port: comp.port, user: created.computer_user, password: created.computer_pwd, database: 'postgres' });
    c.on('error', () => {});
    await c.connect();
    return c;
  };
  const insertThroughComp = async (id: number) => {
    const c = await pgClient();
    try {
      await c.query('INSERT INTO public.events (id, note) VALUES ($1, $2)', [id, `row ${id}`]);
      return (await c.query<{ n: number }>('SELECT count(*)::int AS n FROM public.events')).rows[0].n;
    } finally {
      await c.end();
    }
  };

  beforeAll(async () => {
    const tmp = await mkdtemp(path.join(tmpdir(), 'kcm-local-restart-'));
    await chmod(tmp, 0o755); // mariadbd and postgres run as their own OS users and must reach their directories
    dir = path.join(tmp, 'deployment');
    const up = await kcm(['local', 'up', ...BLOCK, '--dir', dir, '--json', '--timeout', '60']);
    expect(up.code, up.stderr).toBe(0);
    useDefaultToken((JSON.parse(up.stdout) as { token: string }).token); // the group knows only the admin token up made
    // `up` registered every host as both a storage and a computer machine.
    const machines = (await ask('get_machine_summary', {})).attachment as unknown as { list_machine: { hostaddr: string; machine_types: string[] }[] };
    expect(machines.list_machine.map((m) => m.machine_types)).toEqual([['computer', 'storage'], ['computer', 'storage'], ['computer', 'storage']]);
  }, 120_000);

  afterAll(async () => {
    await kcm(['local', 'down', '--dir', dir, '--grace', '5', '--purge']);
    await rm(path.dirname(dir), { recursive: true, force: true });
  }, 90_000);

  it('creates a cluster of one shard (3 nodes) and one compute node, and writes through the compute node', async () => {
    const reply = await runJob(
      'create_cluster',
      {
        nick_name: 'restart', ha_mode: 'rbr', shards: '1', nodes: '3', comps: '1', max_storage_size: '1', max_connections: '100',
        cpu_cores: '1', cpu_limit_node: 'quota', innodb_size: '64', rocksdb_block_cache_size_M: '0', dbcfg: '1', fullsync_level: '1',
        storage_iplists: HOSTS, computer_iplists: [], install_proxysql: '0',
      },
      180_000,
    );
    expect(reply.status, reply.error_info).toBe('done');
    created = reply.attachment as unknown as typeof created;
    const d = await detail();
    comp = { host: d.list_comp[0].hostaddr, port: Number(d.list_comp[0].port) };
    const master = d.list_shard[0].list_node.find((n) => n.master === 'true')!;
    const conn = await mysql.createConnection({ host: master.hostaddr, port: Number(master.port), user: created.storage_user, password: created.storage_pwd });
    await conn.query('CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
    await conn.query('CREATE TABLE `postgres_$$_public`.events (id INT PRIMARY KEY, note VARCHAR(40))');
    await conn.end();
    // Catalog sync makes the shard table a foreign table on the compute node within seconds.
    expect(await waitUntil('the first insert through the compute node', async () => insertThroughComp(1), 20_000)).toBe(1);
    expect(await summary()).toMatchObject({ status: 'online', nodes_online: '3/3', comps_online: '1/1' });
  }, 240_000);

  it('after local down and local up every instance is back and writes through the compute node succeed', async () => {
    const down = await kcm(['local', 'down', '--dir', dir, '--json']);
    expect(down.code, down.stderr).toBe(0);
    const stopped = JSON.parse(down.stdout).stopped as { label: string; result: string }[];
    expect(stopped.filter((s) => /^(mariadbd|postgres) /.test(s.label) && s.result !== 'not-running')).toHaveLength(4);

    // Only the leader's reconciler can bring this one back: its agent no longer has a desired state for it.
    const compAgent = HOSTS.indexOf(comp.host) + 1;
    await rm(path.join(dir, `agent-${compAgent}`, 'state', 'desired', `postgres-${comp.port}.json`));

    const started = Date.now();
    const up = await kcm(['local', 'up', ...BLOCK, '--dir', dir, '--json', '--timeout', '60']);
    expect(up.code, up.stderr).toBe(0);
    await waitUntil('every instance measured online', async () => {
      const d = await detail();
      const statuses = [...d.list_shard.flatMap((s) => s.list_node), ...d.list_comp].map((n) => n.status);
      return statuses.length === 4 && statuses.every((s) => s === 'online') ? true : undefined;
    }, 60_000);
    console.log(`every instance online ${Date.now() - started} ms after local up began`);
    expect(await summary()).toMatchObject({ status: 'online', nodes_online: '3/3', comps_online: '1/1' });
    expect(await waitUntil('an insert through the compute node after the restart', async () => insertThroughComp(2), 20_000)).toBe(2);

    const agentLogs = await Promise.all([1, 2, 3].map((i) => readFile(path.join(dir, `agent-${i}`, 'agent.log'), 'utf8')));
    // The storage nodes came back through their agents' supervisors (a reconciler Start racing one is a no-op).
    expect(agentLogs.join('').match(/instance restarted by the supervisor/g)?.length).toBeGreaterThanOrEqual(1);
    const managerLogs = await Promise.all([1, 2, 3].map((i) => readFile(path.join(dir, `manager-${i}`, 'manager.log'), 'utf8')));
    expect(managerLogs.join('')).toContain('compute node started by the reconciler');
  }, 180_000);

  it('local up restarts a crashed manager while the agents and instances keep running', async () => {
    const record = JSON.parse(await readFile(path.join(dir, 'local.json'), 'utf8')) as { managers: { pid: number }[]; agents: { pid: number }[] };
    process.kill(record.managers[1].pid, 'SIGKILL');
    const up = await kcm(['local', 'up', ...BLOCK, '--dir', dir, '--json', '--timeout', '60']);
    expect(up.code, up.stderr).toBe(0);
    const shown = JSON.parse(up.stdout) as { restarted: string[]; agents: { pid: number }[] };
    expect(shown.restarted).toEqual(['manager 127.0.1.212:58000']);
    expect(shown.agents.map((a) => a.pid)).toEqual(record.agents.map((a) => a.pid));
    expect(await insertThroughComp(3)).toBe(3);
  }, 90_000);

  it('local down --purge removes the instances cgroups with the deployment', async () => {
    const h = await detectCpuHierarchy();
    const ours = async () => (await readdir(path.join(h!.root, 'kcm')).catch(() => [] as string[])).filter((n) => HOSTS.some((host) => n.includes(`-${host}-`)));
    expect(h).toBeDefined();
    expect((await ours()).length).toBeGreaterThan(0); // cpu_cores put every instance in a cgroup
    const down = await kcm(['local', 'down', '--dir', dir, '--purge', '--json']);
    expect(down.code, down.stderr).toBe(0);
    expect(JSON.parse(down.stdout)).toMatchObject({ purged: true, cgroupProblems: [] });
    expect(await ours()).toEqual([]);
    await expect(access(dir)).rejects.toThrow(/ENOENT/);
  }, 90_000);
});
