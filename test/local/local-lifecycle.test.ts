// End to end, one deployment for the whole life of `kcm local`: `up` as a child process
// starts a real 3-manager group and 3 agents (127.0.1.201-203, 127.0.2.201-203, clear of
// other tests), registers every host and a backup storage, makes an admin token and mTLS
// certificates; the create_cluster it prints works verbatim; the cluster then survives
// `down` + `up` (every instance comes back, through the agents' supervisors and the
// leader's reconciler), `up` alone restarts a crashed manager, `down` leaves no pid alive,
// and `down --purge` leaves no instance cgroup behind. One deployment and one cluster serve
// every case: a second `local up` and create_cluster would double the file's time.

import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { access, chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import pg from 'pg';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentService } from '@kcm/agent-api';
import { LOCAL_CREATE_CLUSTER_PARAS } from '../../services/cli/src/local/machines';
import { detectCpuHierarchy } from '@kcm/agent';
import type { ReplyEnvelope } from '@kcm/protocol';
import { createEmitClient } from '../../services/cli/src/http-client';
import { useDefaultToken } from '../helpers/tokens';
import { waitUntil } from '../cluster/cluster-fixture';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const CLI = path.join(REPO, 'services/cli/src/main.ts');
const BLOCK = ['--managers', '3', '--hosts', '3', '--first', '201'];
const MEMBERS = ['127.0.1.201:58000', '127.0.1.202:58000', '127.0.1.203:58000'];
const HOSTS = ['127.0.2.201', '127.0.2.202', '127.0.2.203'];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function kcm(args: string[], timeoutMs = 90_000, env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', CLI, ...args], { cwd: REPO, timeout: timeoutMs, env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** A process exists and is not a zombie (the instance stand-in is our child until Node reaps it). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/**
 * The managers serve HTTPS with the deployment's CA (<dir>/tls/ca.pem), as a real deployment
 * does: requests go through kcm's own client, trusting that CA only. urls: one, or several
 * comma-separated (any member that answers; followers serve queries and forward jobs).
 */
async function emitTo(dir: string, urls: string, token: string, jobType: string, paras: Record<string, unknown> = {}): Promise<ReplyEnvelope> {
  const client = createEmitClient({ url: urls, token, ca: readFileSync(path.join(dir, 'tls/ca.pem')), timeoutMs: 30_000 });
  const { reply } = await client.emit({ version: '1.0', job_id: '', job_type: jobType, timestamp: String(Math.floor(Date.now() / 1000)), user_name: 'e2e', paras });
  return reply;
}

interface Detail {
  list_shard: { list_node: { hostaddr: string; port: string; status: string; master: string }[] }[];
  list_comp: { hostaddr: string; port: string; status: string }[];
}

describe('kcm local: up, status, a cluster through down and up, down --purge', () => {
  let dir: string;
  let up: Run;
  let endpoints: { token: string; tokenFile: string; managers: Array<{ member: string; url: string; pid: number }>; agents: Array<{ hostaddr: string; port: number; pid: number }> };
  let created: { cluster_id: string; cluster_name: string; computer_user: string; computer_pwd: string; storage_user: string; storage_pwd: string };
  let comp: { host: string; port: number };

  const ask = (jobType: string, paras: Record<string, unknown> = {}) => emitTo(dir, MEMBERS.map((m) => `https://${m}`).join(','), endpoints.token, jobType, paras);
  const metaMode = async (url: string, token: string) => (await emitTo(dir, url, token, 'get_meta_mode')) as unknown as { error_code: string; attachment: { mode: string; members: string[] } };
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
    const parent = await mkdtemp(path.join(tmpdir(), 'kcm-local-e2e-'));
    await chmod(parent, 0o711); // mariadbd and postgres (their own OS users) reach instances under the deployment
    dir = path.join(parent, 'deployment');
    up = await kcm(['local', 'up', ...BLOCK, '--dir', dir, '--json', '--timeout', '45']);
    if (up.code === 0) {
      endpoints = JSON.parse(up.stdout);
      useDefaultToken(endpoints.token); // the group knows only the admin token up made
    }
  }, 70_000);

  afterAll(async () => {
    // Whatever happened above, nothing this test started may outlive it.
    await kcm(['local', 'down', '--dir', dir, '--grace', '3', '--purge']);
    await rm(path.dirname(dir), { recursive: true, force: true });
  }, 90_000);

  it('starts three managers and three agents and prints their endpoints as JSON once a leader is elected', () => {
    expect(up.stderr).not.toContain('kcm: ');
    expect(up.code).toBe(0);
    expect(endpoints.managers.map((m) => m.url)).toEqual(['https://127.0.1.201:58000', 'https://127.0.1.202:58000', 'https://127.0.1.203:58000']);
    expect(endpoints.agents.map((a) => `${a.hostaddr}:${a.port}`)).toEqual(['127.0.2.201:58100', '127.0.2.202:58100', '127.0.2.203:58100']);
    for (const p of [...endpoints.managers, ...endpoints.agents]) expect(alive(p.pid)).toBe(true);
  });

  it('has every member answer get_meta_mode for a group of the three', async () => {
    for (const manager of endpoints.managers) {
      const reply = await metaMode(manager.url, endpoints.token);
      expect(reply.error_code).toBe('0');
      expect(reply.attachment.mode).toBe('mgr');
      expect([...reply.attachment.members].sort()).toEqual(endpoints.managers.map((m) => m.member));
    }
  });

  it('registers every agent\'s host as both a storage and a computer machine', async () => {
    const reply = (await emitTo(dir, endpoints.managers[0].url, endpoints.token, 'get_machine_summary')) as unknown as { error_code: string; attachment: { list_machine: { hostaddr: string; machine_types: string[] }[] } };
    expect(reply.error_code).toBe('0');
    expect(reply.attachment.list_machine.map((m) => [m.hostaddr, m.machine_types])).toEqual(endpoints.agents.map((a) => [a.hostaddr, ['computer', 'storage']]));
  });

  it('registers one backup storage, a directory of the deployment on the first agent, so a backup works right away', async () => {
    const reply = (await emitTo(dir, endpoints.managers[0].url, endpoints.token, 'get_backup_storage')) as unknown as { error_code: string; attachment: { list_backup_storage: unknown[] } };
    expect(reply.error_code).toBe('0');
    expect(reply.attachment.list_backup_storage).toEqual([{ hostaddr: '127.0.2.201', name: 'local', port: '58100', stype: 'fs', path: path.join(dir, 'backups'), backup_sets: '0', logical_backup_sets: '0' }]);
  });

  it('makes an admin token, gives it as `token` in --json, keeps it 0600 in the deployment, and the managers only its SHA-256', async () => {
    expect(endpoints.token).toMatch(/^kcm_[A-Za-z0-9_-]{43}$/);
    expect(endpoints.tokenFile).toBe(path.join(dir, 'admin.token'));
    expect((await stat(endpoints.tokenFile)).mode & 0o777).toBe(0o600);
    expect((await readFile(endpoints.tokenFile, 'utf8')).trim()).toBe(endpoints.token);
    const config = await readFile(path.join(dir, 'manager-1/config.json'), 'utf8');
    expect(config).not.toContain(endpoints.token);
    expect(JSON.parse(config).tokens).toEqual([{ name: 'local-admin', role: 'admin', sha256: createHash('sha256').update(endpoints.token).digest('hex') }]);
  });

  it('refuses curl without a token with 401 and the envelope', async () => {
    const body = JSON.stringify({ version: '1.0', job_type: 'get_meta_mode', timestamp: String(Math.floor(Date.now() / 1000)), user_name: 'e2e', paras: {} });
    const curl = await new Promise<string>((resolve, reject) =>
      execFile('curl', ['-s', '--cacert', path.join(dir, 'tls/ca.pem'), '-w', '\n%{http_code}', '-X', 'POST', `${endpoints.managers[0].url}/HttpService/Emit`, '-d', body], (err, stdout) => (err ? reject(err) : resolve(stdout))),
    );
    const [reply, status] = curl.split('\n');
    expect(status).toBe('401');
    expect(JSON.parse(reply)).toMatchObject({ version: '1.0', error_code: '3000', status: 'failed', attachment: null });
  });

  it('runs `kcm get cluster_summary` with no token given: kcm finds the deployment\'s token itself', async () => {
    // KCM_LOCAL_DIR points kcm at this test's deployment; `make run`'s is .kcm/local, kcm's default.
    const get = await kcm(['get', 'cluster_summary', '--url', endpoints.managers[1].url, '--json'], 30_000, { KCM_LOCAL_DIR: dir });
    expect(get.stderr).toBe('');
    expect(get.code).toBe(0);
    expect(JSON.parse(get.stdout)).toMatchObject({ error_code: '0', status: 'done' });
  });

  it('runs the group with mutual TLS: a CA and every process its own certificate under <dir>/tls, keys 0600, and agents refuse plaintext callers', async () => {
    const config = JSON.parse(await readFile(path.join(dir, 'manager-2/config.json'), 'utf8'));
    expect(config.tls).toEqual({ ca: path.join(dir, 'tls/ca.pem'), cert: path.join(dir, 'tls/certs/manager-2.pem'), key: path.join(dir, 'tls/certs/manager-2.key') });
    for (const key of ['tls/ca.key', 'tls/certs/manager-1.key', 'tls/certs/agent-3.key']) expect((await stat(path.join(dir, key))).mode & 0o777).toBe(0o600);
    for (const log of ['manager-1/manager.log', 'agent-1/agent.log']) expect(await readFile(path.join(dir, log), 'utf8')).not.toContain('INSECURE');
    // A plaintext gRPC caller gets no answer from an agent (the health monitor's calls, over TLS, do).
    const plain = new AgentService('127.0.2.201:58100', grpc.credentials.createInsecure());
    const err = await new Promise<grpc.ServiceError | null>((resolve) => plain.Health({}, { deadline: Date.now() + 3000 }, (e: grpc.ServiceError | null) => resolve(e)));
    plain.close();
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
  });

  it('writes each manager a config naming the whole group and starts each agent on its host address', async () => {
    const config = JSON.parse(await readFile(path.join(dir, 'manager-2/config.json'), 'utf8'));
    expect(config).toMatchObject({ member: '127.0.1.202:58000', initialMembers: ['127.0.1.201:58000', '127.0.1.202:58000', '127.0.1.203:58000'], agentPort: 58100 });
    expect(await readFile(path.join(dir, 'agent-3/agent.log'), 'utf8')).toContain('127.0.2.203:58100');
  });

  it('does not start a second deployment when up runs again', async () => {
    const again = await kcm(['local', 'up', ...BLOCK, '--dir', dir, '--json']);
    expect(again.code).toBe(0);
    const shown = JSON.parse(again.stdout);
    expect(shown.alreadyRunning).toBe(true);
    expect(shown.managers.map((m: { pid: number }) => m.pid)).toEqual(endpoints.managers.map((m) => m.pid));
  });

  it('reports every process running and the group answering in status', async () => {
    const status = await kcm(['local', 'status', '--dir', dir, '--json']);
    expect(status.code).toBe(0);
    const state = JSON.parse(status.stdout);
    expect(state.running).toBe('all');
    expect(state.leaderKnown).toBe(true);
    expect(state.managers.every((m: { running: boolean; metaMode: { state: string } }) => m.running && m.metaMode.state === 'ok')).toBe(true);
    expect(state.agents.every((a: { running: boolean }) => a.running)).toBe(true);
  });

  it('takes the create_cluster `up` prints, as it is; the compute node takes a login with the returned account and writes reach the shard', async () => {
    const run = await kcm(['emit', 'create_cluster', '--paras', JSON.stringify(LOCAL_CREATE_CLUSTER_PARAS), '--wait', '--json', '--timeout', '90', '--url', endpoints.managers[1].url], 100_000, { KCM_LOCAL_DIR: dir });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const result = JSON.parse(run.stdout) as { status: string; attachment: typeof created & { list_comp: { hostaddr: string; port: string }[] } };
    expect(result.status).toBe('done');
    created = result.attachment;
    comp = { host: result.attachment.list_comp[0].hostaddr, port: Number(result.attachment.list_comp[0].port) };
    const client = await pgClient();
    try {
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
    const master = (await detail()).list_shard[0].list_node.find((n) => n.master === 'true')!;
    const conn = await mysql.createConnection({ host: master.hostaddr, port: Number(master.port), user: created.storage_user, password: created.storage_pwd });
    await conn.query('CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
    await conn.query('CREATE TABLE `postgres_$$_public`.events (id INT PRIMARY KEY, note VARCHAR(40))');
    await conn.end();
    // Catalog sync makes the shard table a foreign table on the compute node within seconds.
    expect(await waitUntil('the first insert through the compute node', async () => insertThroughComp(1), 20_000)).toBe(1);
    expect(await summary()).toMatchObject({ status: 'online', nodes_online: '3/3', comps_online: '1/1' });
  }, 180_000);

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
    // The reconciler asked its agent to start the compute node; that it came back is measured
    // above. Its "started by the reconciler" line needs the Start call to answer within its
    // deadline: one full run here had the instance back online and only the request logged.
    expect(managerLogs.join('')).toContain('compute node of a live cluster is not running; asking its agent to start it');
  }, 180_000);

  it('local up restarts a crashed manager while the agents and instances keep running', async () => {
    const record = JSON.parse(await readFile(path.join(dir, 'local.json'), 'utf8')) as { managers: { pid: number }[]; agents: { pid: number }[] };
    process.kill(record.managers[1].pid, 'SIGKILL');
    const up = await kcm(['local', 'up', ...BLOCK, '--dir', dir, '--json', '--timeout', '60']);
    expect(up.code, up.stderr).toBe(0);
    const shown = JSON.parse(up.stdout) as { restarted: string[]; agents: { pid: number }[] };
    expect(shown.restarted).toEqual(['manager 127.0.1.202:58000']);
    expect(shown.agents.map((a) => a.pid)).toEqual(record.agents.map((a) => a.pid));
    expect(await insertThroughComp(3)).toBe(3);
  }, 90_000);

  it('stops every recorded process with down, an instance found by its pid file included', async () => {
    // Stand-in for a mariadbd an agent started: its pid file in <instance>/run, its argv naming <instance>.
    const instanceRoot = path.join(dir, 'agent-1/instances/storage_datadir/57999');
    await mkdir(path.join(instanceRoot, 'run'), { recursive: true });
    await writeFile(path.join(instanceRoot, 'my.cnf'), '');
    const instance = spawn('tail', ['-f', path.join(instanceRoot, 'my.cnf')], { detached: true, stdio: 'ignore' });
    instance.unref();
    await writeFile(path.join(instanceRoot, 'run/mariadbd.pid'), `${instance.pid}\n`);

    const record = JSON.parse(await readFile(path.join(dir, 'local.json'), 'utf8')) as { managers: { pid: number }[]; agents: { pid: number }[] };
    const pids = [...record.managers, ...record.agents].map((p) => p.pid);
    const down = await kcm(['local', 'down', '--dir', dir, '--json']);
    expect(down.code).toBe(0);
    const stopped = JSON.parse(down.stdout).stopped as Array<{ pid: number; label: string; result: string }>;
    expect(stopped.map((s) => s.pid)).toEqual(expect.arrayContaining([...pids, instance.pid!]));
    // The cluster's own instances (3 mariadbd, 1 postgres) are stopped too.
    expect(stopped.filter((s) => /^(mariadbd|postgres) /.test(s.label) && s.result !== 'not-running').length).toBeGreaterThanOrEqual(4);
    // down reports a process gone once its command line is; the kernel may need a moment
    // more to finish tearing it down.
    const all = stopped.map((s) => s.pid);
    const deadline = Date.now() + 3000;
    while (all.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    for (const pid of all) expect(alive(pid)).toBe(false);

    const after = await kcm(['local', 'status', '--dir', dir, '--json']);
    expect(after.code).toBe(1);
    expect(JSON.parse(after.stdout).running).toBe('none');
  }, 60_000);

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
