// rotate_cluster_passwords on real engines: a one-member manager, three agents on
// 127.0.2.1-3, a cluster of 1 shard x 3 MariaDB nodes (the least a shard may have) and 1
// PostgreSQL compute node. After the rotation: the old compute password is refused and the
// new one logs in; rows written through the compute node reach the shard (the mysql_fdw
// user mapping holds the new storage password); the old storage password is refused on
// the master; a standby whose replication is restarted reconnects with the new
// replication password and receives new rows; the agents still reach their instances
// with the new admin password; no password, old or new, is in a log line or, by
// `strings`, in any file of the manager's data directory. Refusals change nothing.

import { execFile } from 'node:child_process';
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OpenAccounts, StorageNodeRecord } from '@kcm/manager';
import { PasswordAgentClient } from '@kcm/agent-api';
import { startCommandLineSampler } from '../../services/agent/test/mariadb/shard-fixture';
import { emitRaw } from '../helpers/emit-client';
import { openTestAccounts } from '../helpers/secrets';
import { authHeader } from '../helpers/tokens';
import { HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { createHaCluster, registerMachines, TABLE, type HaCluster } from './ha-fixture';

const run = promisify(execFile);
const MEMBER = '127.0.1.86:58186';
const AGENT_PORT = 58166;

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir)) {
    const p = path.join(dir, entry);
    const st = await lstat(p);
    if (st.isDirectory()) out.push(...(await filesUnder(p)));
    else if (st.isFile()) out.push(p);
  }
  return out;
}

describe('rotate_cluster_passwords on real engines (1 shard x 3 nodes, 1 compute node)', () => {
  let f: ClusterFixture;
  let ha: HaCluster;
  let old: OpenAccounts;
  let now: OpenAccounts;
  let jobId = '';
  let attachment: Record<string, string> = {};
  /** Command lines of MariaDB tools seen while the rotation ran (the admin password goes to the client on stdin). */
  const commandLines = new Set<string>();

  const standby = () => ha.nodes().find((n) => n.id !== Object.values(ha.cluster().shards)[0].masterNodeId)!;
  const computeLogin = async (password: string) => {
    const c = new pg.Client({ ...ha.comp(), user: old.computer.user, password, database: 'postgres', connectionTimeoutMillis: 3000, query_timeout: 5000 });
    c.on('error', () => {});
    await c.connect();
    return c;
  };
  const storageLogin = (n: StorageNodeRecord, password: string) => mysql.createConnection({ host: n.hostaddr, port: n.port, user: old.storage.user, password, connectTimeout: 3000 });
  /** The agent's own account over the instance's socket: what the agent itself logs in with. */
  const adminLogin = (n: StorageNodeRecord, password: string) =>
    mysql.createConnection({ socketPath: path.join(n.datadir, String(n.port), 'run', 'mariadbd.sock'), user: old.admin.user, password });

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER });
    await registerMachines(f, [2]);
    ha = await createHaCluster(f, HOSTS[2]);
    old = openTestAccounts(ha.cluster().accounts);
    const c = await computeLogin(old.computer.password);
    await c.query('INSERT INTO public.ha_orders (id, at) VALUES (1, 1)');
    await c.end();
  }, 300_000);

  afterAll(async () => {
    ha?.close();
    await f?.close();
  }, 120_000);

  it('refuses an unknown cluster and an unknown account, naming the field, with no job made', async () => {
    const jobs = f.manager.store.state().counters.job;
    const unknown = await emitRaw(MEMBER, 'rotate_cluster_passwords', { cluster_id: '99' });
    expect([unknown.error_code, unknown.error_info]).toEqual(['1005', 'paras.cluster_id: cluster 99 does not exist']);
    const badAccount = await emitRaw(MEMBER, 'rotate_cluster_passwords', { cluster_id: ha.clusterId, accounts: ['root'] });
    expect(badAccount.error_code).toBe('1004');
    expect(badAccount.error_info).toContain('paras.accounts[0]');
    const operator = await emitRaw(MEMBER, 'rotate_cluster_passwords', { cluster_id: ha.clusterId }, { authorization: authHeader('operator').authorization });
    expect(operator.error_code).toBe('3001');
    expect(f.manager.store.state().counters.job).toBe(jobs);
    expect(openTestAccounts(ha.cluster().accounts)).toEqual(old);
  });

  it('gives every account a new password on every node; get_status shows the client ones to an admin only', async () => {
    const started = Date.now();
    const sampler = startCommandLineSampler(commandLines);
    const ack = await emitRaw(MEMBER, 'rotate_cluster_passwords', { cluster_id: ha.clusterId });
    expect(ack.error_code, ack.error_info).toBe('0');
    jobId = ack.job_id;
    const reply = await waitUntil('the rotation to end', async () => {
      const s = await emitRaw(MEMBER, 'get_status', {}, { jobId });
      return s.status === 'done' || s.status === 'failed' ? s : undefined;
    }, 60_000, 250);
    sampler.stop();
    console.log(`rotate_cluster_passwords (3 storage nodes, 1 compute node) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(reply.status, reply.error_info).toBe('done');
    attachment = reply.attachment as Record<string, string>;
    now = openTestAccounts(ha.cluster().accounts);
    expect(ha.cluster().passwordRotation).toBeUndefined();
    for (const role of ['admin', 'replication', 'storage', 'computer'] as const) expect(now[role].password).not.toBe(old[role].password);
    expect(attachment).toMatchObject({ rotated: 'admin,replication,storage,computer', computer_user: old.computer.user, computer_pwd: now.computer.password, storage_pwd: now.storage.password });
    const viewer = await emitRaw(MEMBER, 'get_status', {}, { jobId, authorization: authHeader('viewer').authorization });
    expect(viewer.attachment).toMatchObject({ computer_pwd: '<hidden>', storage_pwd: '<hidden>' });
  }, 70_000);

  it('the compute node refuses the old password and takes the new one; rows written through it reach the shard and read back', async () => {
    await expect(computeLogin(old.computer.password)).rejects.toThrow(/password authentication failed/);
    const c = await computeLogin(attachment.computer_pwd);
    try {
      await c.query('INSERT INTO public.ha_orders (id, at) VALUES (2, 2)');
      const { rows } = await c.query('SELECT id FROM public.ha_orders ORDER BY id');
      expect(rows.map((r) => Number(r.id))).toEqual([1, 2]);
    } finally {
      await c.end();
    }
    await expect(storageLogin(ha.master(), old.storage.password)).rejects.toThrow(/Access denied/);
    const s = await storageLogin(ha.master(), attachment.storage_pwd);
    const [rows] = (await s.query(`SELECT id FROM ${TABLE} ORDER BY id`)) as unknown as [{ id: number }[]];
    await s.end();
    expect(rows.map((r) => Number(r.id))).toEqual([1, 2]);
  });

  it('a standby whose replication restarts reconnects with the new replication password and receives new rows', async () => {
    const node = standby();
    await expect(adminLogin(node, old.admin.password)).rejects.toThrow(/Access denied/);
    const admin = await adminLogin(node, now.admin.password);
    try {
      await admin.query('STOP SLAVE');
      await admin.query('START SLAVE');
      const c = await computeLogin(attachment.computer_pwd);
      await c.query('INSERT INTO public.ha_orders (id, at) VALUES (3, 3)');
      await c.end();
      await waitUntil('row 3 on the standby', async () => {
        const [rows] = (await admin.query(`SELECT id FROM ${TABLE} WHERE id = 3`)) as unknown as [unknown[]];
        return rows.length === 1 ? true : undefined;
      }, 15_000);
      const [[status]] = (await admin.query('SHOW SLAVE STATUS')) as unknown as [Record<string, string>[]];
      expect(status).toMatchObject({ Slave_IO_Running: 'Yes', Slave_SQL_Running: 'Yes', Master_User: old.replication.user, Using_Gtid: 'Slave_Pos', Last_IO_Error: '' });
    } finally {
      await admin.end();
    }
    // The agent reaches its instance with the new admin password it saved.
    const status = await ha.status(node);
    expect(status).toMatchObject({ answering: true, io_running: true, sql_running: true });
  });

  it('the agent\'s refusals and failures of the password commands name no password', async () => {
    const secret = 'never-shown-Pw-4f1c2a9e';
    const node = ha.master();
    const agent = new PasswordAgentClient(`${node.hostaddr}:${AGENT_PORT}`);
    const comp = ha.comp();
    const compAgent = new PasswordAgentClient(`${comp.host}:${AGENT_PORT}`);
    try {
      const noSuchUser = await agent.setMariaDbPasswords('test:rotate:no-such-user', node.port, [{ role: 'storage', user: 'nobody_here', password: secret }]).catch((e: Error) => e);
      expect(noSuchUser).toBeInstanceOf(Error);
      expect((noSuchUser as Error).message).toMatch(/set the storage password/);
      const notAdmin = await agent.setMariaDbPasswords('test:rotate:not-admin', node.port, [{ role: 'admin', user: 'nobody_here', password: secret }]).catch((e: Error) => e);
      expect((notAdmin as Error).message).toMatch(/is not this instance's admin account/);
      const notCompute = await compAgent.setComputePassword('test:rotate:not-compute', comp.port, { user: 'postgres', password: secret }).catch((e: Error) => e);
      expect((notCompute as Error).message).toMatch(/is not the compute account/);
      // The master is no replica: its replication settings are left as they are.
      expect(await agent.setReplicationPassword('test:rotate:master', node.port, { user: old.replication.user, password: secret })).toMatchObject({ is_replica: false });
      for (const e of [noSuchUser, notAdmin, notCompute]) expect((e as Error).message).not.toContain(secret);
      for (const line of f.logLines) expect(line).not.toContain(secret);
    } finally {
      agent.close();
      compAgent.close();
    }
  });

  it('no old or new password is in a log line, a command line, a binlog or a server log, or in any file of the manager\'s data directory', async () => {
    const secrets = [...Object.values(old), ...Object.values(now)].map((a) => a.password);
    expect(new Set(secrets).size).toBe(8);
    for (const line of f.logLines) for (const s of secrets) expect(line.includes(s)).toBe(false);
    // The sampler ran (it saw the servers); the admin password's client lives a few ms and may slip past it.
    expect([...commandLines].some((l) => l.includes('mariadbd'))).toBe(true);
    for (const line of commandLines) for (const s of secrets) expect(line.includes(s)).toBe(false);
    // Accounts are changed with sql_log_bin = 0: no statement carrying a password reaches a binlog (or a server log).
    for (const n of ha.nodes()) {
      for (const dir of [path.join(n.walLogDir, String(n.port)), path.join(n.logdir, String(n.port))]) {
        for (const file of await filesUnder(dir)) {
          const { stdout } = await run('strings', ['-a', '-n', '6', file], { maxBuffer: 256 * 1024 * 1024 });
          for (const s of secrets) expect(stdout.includes(s), `${file} holds a password`).toBe(false);
        }
      }
    }
    const files = await filesUnder(path.join(f.tmp, 'manager'));
    expect(files.length).toBeGreaterThan(2);
    for (const file of files) {
      const { stdout } = await run('strings', ['-a', '-n', '6', file], { maxBuffer: 256 * 1024 * 1024 });
      for (const s of secrets) expect(stdout.includes(s), `${file} holds a password`).toBe(false);
    }
  });
});
