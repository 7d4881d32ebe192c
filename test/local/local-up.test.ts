// End to end: `kcm local up` as a child process starts a real 3-manager group and 3 agents
// (on 127.0.1.201-203 and 127.0.2.201-203, clear of other tests), `status` sees them, and
// `down` leaves none of their pids alive, a database-instance stand-in included.

import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentService } from '@kcm/agent-api';
import { LOCAL_CREATE_CLUSTER_PARAS } from '../../services/cli/src/local/machines';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const CLI = path.join(REPO, 'services/cli/src/main.ts');
const BLOCK = ['--first', '201'];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function kcm(args: string[], timeoutMs = 60_000, env: Record<string, string> = {}): Promise<Run> {
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

async function metaMode(url: string, token: string): Promise<{ error_code: string; attachment: { mode: string; members: string[] } }> {
  const res = await fetch(`${url}/HttpService/Emit`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ version: '1.0', job_type: 'get_meta_mode', timestamp: String(Math.floor(Date.now() / 1000)), user_name: 'e2e', paras: {} }),
  });
  return (await res.json()) as never;
}

describe('kcm local up | status | down', () => {
  let dir: string;
  let up: Run;
  let endpoints: { token: string; tokenFile: string; managers: Array<{ member: string; url: string; pid: number }>; agents: Array<{ hostaddr: string; port: number; pid: number }> };

  beforeAll(async () => {
    const parent = await mkdtemp(path.join(tmpdir(), 'kcm-local-e2e-'));
    await chmod(parent, 0o711); // mariadbd and postgres (their own OS users) reach instances under the deployment
    dir = path.join(parent, 'deployment');
    up = await kcm(['local', 'up', '--managers', '3', '--hosts', '3', '--dir', dir, '--json', '--timeout', '45', ...BLOCK]);
    if (up.code === 0) endpoints = JSON.parse(up.stdout);
  }, 70_000);

  afterAll(async () => {
    // Whatever happened above, nothing this test started may outlive it.
    await kcm(['local', 'down', '--dir', dir, '--grace', '3']);
    await rm(path.dirname(dir), { recursive: true, force: true });
  }, 30_000);

  it('starts three managers and three agents and prints their endpoints as JSON once a leader is elected', () => {
    expect(up.stderr).not.toContain('kcm: ');
    expect(up.code).toBe(0);
    expect(endpoints.managers.map((m) => m.url)).toEqual(['http://127.0.1.201:58000', 'http://127.0.1.202:58000', 'http://127.0.1.203:58000']);
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
    const res = await fetch(`${endpoints.managers[0].url}/HttpService/Emit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${endpoints.token}` },
      body: JSON.stringify({ version: '1.0', job_type: 'get_machine_summary', timestamp: String(Math.floor(Date.now() / 1000)), user_name: 'e2e', paras: {} }),
    });
    const reply = (await res.json()) as { error_code: string; attachment: { list_machine: { hostaddr: string; machine_types: string[] }[] } };
    expect(reply.error_code).toBe('0');
    expect(reply.attachment.list_machine.map((m) => [m.hostaddr, m.machine_types])).toEqual(endpoints.agents.map((a) => [a.hostaddr, ['computer', 'storage']]));
  });

  it('takes the create_cluster `up` prints, as it is, and the compute node takes a login with the returned account', async () => {
    const created = await kcm(['emit', 'create_cluster', '--paras', JSON.stringify(LOCAL_CREATE_CLUSTER_PARAS), '--wait', '--json', '--timeout', '90', '--url', endpoints.managers[1].url], 100_000, { KCM_LOCAL_DIR: dir });
    expect(created.code, created.stdout + created.stderr).toBe(0);
    const result = JSON.parse(created.stdout) as { status: string; attachment: { cluster_id: string; computer_user: string; computer_pwd: string; list_comp: { hostaddr: string; port: string }[] } };
    expect(result.status).toBe('done');
    const comp = result.attachment.list_comp[0];
    const client = new pg.Client({ host: comp.hostaddr, port: Number(comp.port), user: result.attachment.computer_user, password: result.attachment.computer_pwd, database: 'postgres' });
    await client.connect();
    try {
      expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await client.end();
    }
    const deleted = await kcm(['emit', 'delete_cluster', '--paras', JSON.stringify({ cluster_id: result.attachment.cluster_id }), '--wait', '--json', '--timeout', '60', '--url', endpoints.managers[0].url], 70_000, { KCM_LOCAL_DIR: dir });
    expect(deleted.code, deleted.stderr).toBe(0);
  }, 180_000);

  it('registers one backup storage, a directory of the deployment on the first agent, so a backup works right away', async () => {
    const res = await fetch(`${endpoints.managers[0].url}/HttpService/Emit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${endpoints.token}` },
      body: JSON.stringify({ version: '1.0', job_type: 'get_backup_storage', timestamp: String(Math.floor(Date.now() / 1000)), user_name: 'e2e', paras: {} }),
    });
    const reply = (await res.json()) as { error_code: string; attachment: { list_backup_storage: unknown[] } };
    expect(reply.error_code).toBe('0');
    expect(reply.attachment.list_backup_storage).toEqual([{ hostaddr: '127.0.2.201', name: 'local', port: '58100', stype: 'fs', path: path.join(dir, 'backups'), backup_sets: '0' }]);
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
      execFile('curl', ['-s', '-w', '\n%{http_code}', '-X', 'POST', `${endpoints.managers[0].url}/HttpService/Emit`, '-d', body], (err, stdout) => (err ? reject(err) : resolve(stdout))),
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
    const again = await kcm(['local', 'up', '--managers', '3', '--hosts', '3', '--dir', dir, '--json', ...BLOCK]);
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

  it('stops every recorded process with down, an instance found by its pid file included', async () => {
    // Stand-in for a mariadbd an agent started: its pid file in <instance>/run, its argv naming <instance>.
    const instanceRoot = path.join(dir, 'agent-1/instances/storage_datadir/57001');
    await mkdir(path.join(instanceRoot, 'run'), { recursive: true });
    await writeFile(path.join(instanceRoot, 'my.cnf'), '');
    const instance = spawn('tail', ['-f', path.join(instanceRoot, 'my.cnf')], { detached: true, stdio: 'ignore' });
    instance.unref();
    await writeFile(path.join(instanceRoot, 'run/mariadbd.pid'), `${instance.pid}\n`);

    const down = await kcm(['local', 'down', '--dir', dir, '--json']);
    expect(down.code).toBe(0);
    const stopped = JSON.parse(down.stdout).stopped as Array<{ pid: number; result: string }>;
    const pids = [...endpoints.managers, ...endpoints.agents].map((p) => p.pid);
    expect(stopped.map((s) => s.pid).sort()).toEqual([...pids, instance.pid!].sort());
    // down reports a process gone once its command line is; the kernel may need a moment
    // more to finish tearing it down.
    const deadline = Date.now() + 3000;
    while ([...pids, instance.pid!].some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    for (const pid of [...pids, instance.pid!]) expect(alive(pid)).toBe(false);

    const after = await kcm(['local', 'status', '--dir', dir, '--json']);
    expect(after.code).toBe(1);
    expect(JSON.parse(after.stdout).running).toBe('none');
  });
});
