// Shard HA must-show 4, on real engines: a 3-manager group and three agents, each its own
// OS process. The shard master's mariadbd is SIGKILLed; as soon as the leader's
// shard_failover job is under way, the leader is SIGKILLed too. The new leader resumes the
// job at its first unfinished step and finishes it: exactly one writable master at the end,
// the one the job promoted, and the compute node writes to it.

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MariaDbHaAgentClient, type MariaDbHaStatusReply } from '@kcm/agent-api';
import { jobStatus } from '../helpers/emit-client';
import { waitFor } from '../manager/helpers/processes';
import { computerPorts, HOSTS, storagePorts } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { startGroupFixture, type GroupFixture } from './group-fixture';

const MEMBERS = ['127.0.1.81:58182', '127.0.1.82:58182', '127.0.1.83:58182'];
const AGENT_PORT = 58158;

interface Node {
  host: number;
  port: number;
}

describe('a manager leader SIGKILLed in the middle of a failover', () => {
  let g: GroupFixture;
  /** Made once the group is up: it sets the test process's client TLS (test/manager/helpers/group.ts). */
  let ha: MariaDbHaAgentClient[] = [];
  let leader: string;
  let computer: { user: string; password: string };
  let storage: { user: string; password: string };
  // One storage node per host, each the lowest port of its host's range.
  const storageNodes: Node[] = [0, 1, 2].map((i) => ({ host: i, port: storagePorts(i).low }));

  const storageQuery = async (n: Node, sql: string) => {
    const c = await mysql.createConnection({ host: HOSTS[n.host], port: n.port, ...storage, connectTimeout: 3000 });
    try {
      return (await c.query(sql))[0] as Record<string, unknown>[];
    } finally {
      await c.end();
    }
  };
  const insertThroughCompute = async (id: number) => {
    const c = new pg.Client({ host: HOSTS[2], port: computerPorts(2).low, ...computer, database: 'postgres', connectionTimeoutMillis: 3000, query_timeout: 5000 });
    c.on('error', () => {});
    await c.connect();
    try {
      await c.query('INSERT INTO public.lk (id) VALUES ($1)', [id]);
    } finally {
      await c.end();
    }
  };
  const statuses = (): Promise<MariaDbHaStatusReply[]> => Promise.all(storageNodes.map((n) => ha[n.host].replicationStatus(n.port)));

  beforeAll(async () => {
    g = await startGroupFixture({ name: 'failover-leader', members: MEMBERS, hosts: HOSTS, agentPort: AGENT_PORT, managerConfig: { tickMs: 50, electionTick: 10 }, machines: { computerHosts: [2] } });
    leader = await g.group.waitForLeader();
    ha = HOSTS.map((h) => new MariaDbHaAgentClient(`${h}:${AGENT_PORT}`, { statusMs: 3000 }));
    const created = await g.runDone('create_cluster', clusterParas({ nick_name: 'ha' }), 300_000);
    const att = created.attachment as { computer_user: string; computer_pwd: string; storage_user: string; storage_pwd: string };
    computer = { user: att.computer_user, password: att.computer_pwd };
    storage = { user: att.storage_user, password: att.storage_pwd };
  }, 400_000);

  afterAll(async () => {
    for (const c of ha) c.close();
    await g?.close();
  }, 60_000);

  it('the new leader finishes the failover; exactly one writable master at the end', async () => {
    const before = await statuses();
    const master = storageNodes[before.findIndex((s) => s.running && !s.read_only)];
    expect(master).toBeDefined();
    await storageQuery(master, 'CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
    await storageQuery(master, 'CREATE TABLE `postgres_$$_public`.lk (id INT PRIMARY KEY) ENGINE=InnoDB');
    await waitFor('lk writable through the compute node', () => insertThroughCompute(1).then(() => true, () => undefined), 30_000, 300);
    const pid = Number((await readFile(path.join(g.dirs(master.host).datadir, String(master.port), 'run', 'mariadbd.pid'), 'utf8')).trim());
    process.kill(pid, 'SIGKILL');

    // The detector's job is the next job id.
    const failoverId = String(g.lastJobId() + 1);
    const atKill = await waitFor('the failover under way', async () => {
      const s = await jobStatus(leader, failoverId, 2000).catch(() => undefined);
      if (!s) return undefined;
      if (s.status === 'done' || s.status === 'failed') throw new Error(`the failover ended before the leader could be killed: ${s.status}`);
      return s.status === 'ongoing' ? s : undefined;
    }, 30_000, 20);
    await g.group.manager(leader).kill();
    const stepAtKill = (atKill.attachment as { progress?: { step_name?: string } } | null)?.progress?.step_name;
    console.log(`leader ${leader} SIGKILLed during step "${stepAtKill}" of shard_failover ${failoverId}`);
    const next = await g.group.waitForLeader(MEMBERS.filter((m) => m !== leader), 30_000);
    const done = await g.waitForEnd(failoverId, 120_000);
    expect(done.status, done.error_info).toBe('done');
    console.log(`finished by ${next}: ${JSON.stringify(done.attachment)}`);
    const result = done.attachment as { new_master: { hostaddr: string; port: number }; old_master: { hostaddr: string; port: number } };
    expect(result.old_master).toMatchObject({ hostaddr: HOSTS[master.host], port: master.port });

    // Exactly one writable master, the one the job promoted, at once; the others replicate
    // from it once the old master's own shard_rejoin job has run.
    const writable = (await statuses()).filter((s) => s.running && !s.read_only).map((s) => s.port);
    expect(writable).toEqual([result.new_master.port]);
    const replicating = (s: Awaited<ReturnType<typeof statuses>>[number]) =>
      s.read_only && s.is_replica && s.io_running && s.sql_running && s.master_host === result.new_master.hostaddr && s.master_port === result.new_master.port;
    const after = await waitFor('every other node replicating from the new master', async () => {
      const all = await statuses();
      return all.filter((x) => x.port !== result.new_master.port).every(replicating) ? all : undefined;
    }, 120_000, 250);
    expect(after.filter((s) => s.running && !s.read_only).map((s) => s.port)).toEqual([result.new_master.port]);
    // The compute node writes to it, and the row acknowledged before the kill is there.
    const promoted = storageNodes.find((n) => n.port === result.new_master.port)!;
    await waitFor('an insert through the compute node', () => insertThroughCompute(2).then(() => true, () => undefined), 30_000, 300);
    const rows = await storageQuery(promoted, 'SELECT id FROM `postgres_$$_public`.lk ORDER BY id');
    expect(rows.map((r) => Number(r.id))).toEqual([1, 2]);
  }, 300_000);
});
