// rotate_cluster_passwords with the manager leader SIGKILLed in the middle (npm run
// soak:rotate; not in the default suite: a 3-manager group and three agent processes take
// minutes to build a cluster). The new leader resumes the rotation at its first unfinished
// step and finishes it with the passwords recorded before any engine was touched: the new
// compute password logs in and the old one is refused, rows written through the compute
// node reach the shard (user mappings with the new storage password), and a standby whose
// replication the rotation restarted runs with the new replication password and receives
// new rows.
// ROTATE_KILLS (default 3): how many rotations are each cut by a leader kill; a killed
// member is started again before the next one.

import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MariaDbHaAgentClient } from '@kcm/agent-api';
import { jobStatus } from '../../helpers/emit-client';
import { stepCutByKill, stepEvents } from '../../manager/helpers/logs';
import { waitFor } from '../../manager/helpers/processes';
import { computerPorts, HOSTS, storagePorts } from '../cluster-fixture';
import { clusterParas } from '../cluster-paras';
import { startGroupFixture, type GroupFixture } from '../group-fixture';

const MEMBERS = ['127.0.1.91:58192', '127.0.1.92:58192', '127.0.1.93:58192'];
const AGENT_PORT = 58168;
const KILLS = Number(process.env.ROTATE_KILLS ?? 3);

describe('a manager leader SIGKILLed in the middle of rotate_cluster_passwords', () => {
  let g: GroupFixture;
  let clusterId = '';
  let computer = { user: '', password: '' };
  let storage = { user: '', password: '' };
  /** One storage node per host, each the lowest port of its host's range. */
  const storageNodes = [0, 1, 2].map((i) => ({ host: HOSTS[i], port: storagePorts(i).low }));
  const compute = (password: string) => {
    const c = new pg.Client({ host: HOSTS[2], port: computerPorts(2).low, user: computer.user, password, database: 'postgres', connectionTimeoutMillis: 3000, query_timeout: 5000 });
    c.on('error', () => {});
    return c.connect().then(() => c);
  };

  beforeAll(async () => {
    g = await startGroupFixture({ name: 'rotate-leader', members: MEMBERS, hosts: HOSTS, agentPort: AGENT_PORT, managerConfig: { tickMs: 50, electionTick: 10 }, machines: { computerHosts: [2] } });
    const created = await g.runDone('create_cluster', clusterParas({ nick_name: 'rot' }), 300_000);
    const att = created.attachment as Record<string, string>;
    clusterId = att.cluster_id;
    computer = { user: att.computer_user, password: att.computer_pwd };
    storage = { user: att.storage_user, password: att.storage_pwd };
    const master = await mysql.createConnection({ ...storageNodes[0], ...storage, connectTimeout: 3000 });
    await master.query('CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
    await master.query('CREATE TABLE `postgres_$$_public`.rot (id INT PRIMARY KEY) ENGINE=InnoDB');
    await master.end();
  }, 400_000);

  afterAll(async () => {
    await g?.close();
  }, 60_000);

  it(`each of ${KILLS} rotations cut by a leader kill is finished by the next leader with its recorded passwords`, async () => {
    let nextId = 1;
    for (let k = 0; k < KILLS; k++) {
      const leader = await g.group.waitForLeader(g.live(), 30_000);
      const jobId = await g.submit('rotate_cluster_passwords', { cluster_id: clusterId }, [leader]);
      // SIGKILL the leader as soon as the job runs (its steps take a second or two in all),
      // never once it has ended: a kill after 'done' would test nothing.
      const seen = await waitFor('the rotation under way', async () => {
        const s = await jobStatus(leader, jobId, 2000).catch(() => undefined);
        return s && s.status !== 'started' ? s : undefined;
      }, 30_000, 10);
      expect(seen.status, 'the rotation ended before the leader could be killed').toBe('ongoing');
      const kill = { member: leader, jobId, at: Date.now() };
      await g.group.manager(leader).kill();
      const done = await g.waitForEnd(jobId, 120_000);
      // The kill landed while the job ran: the killed leader was in a step, and the next leader ran that step again.
      const cut = stepCutByKill(stepEvents(MEMBERS.map((m) => ({ member: m, lines: g.group.manager(m).logLines() }))), kill);
      console.log(`rotation ${k + 1}: leader ${leader} SIGKILLed in "${cut ?? 'no step'}"; ${done.status} by the next leader`);
      expect(cut, 'the step the leader kill cut').toBeDefined();
      expect(done.status, done.error_info).toBe('done');
      const att = done.attachment as Record<string, string>;
      expect(att.computer_pwd).not.toBe(computer.password);
      const old = computer.password;
      computer = { user: att.computer_user, password: att.computer_pwd };
      storage = { user: att.storage_user, password: att.storage_pwd };

      await expect(compute(old)).rejects.toThrow(/password authentication failed/);
      const c = await waitFor('a login with the new compute password and an insert through it', async () => {
        const client = await compute(computer.password).catch(() => undefined);
        if (!client) return undefined;
        const ok = await client.query('INSERT INTO public.rot (id) VALUES ($1)', [nextId]).then(() => true, () => false);
        if (!ok) await client.end();
        return ok ? client : undefined;
      }, 20_000, 300);
      await c.end();
      // The rotation restarted every standby's replication with the new replication password
      // (the agent waits for it to run): the row reaches each, and both threads run.
      for (const n of storageNodes) {
        const ha = new MariaDbHaAgentClient(`${n.host}:${AGENT_PORT}`, { statusMs: 3000 });
        try {
          const s = await ha.replicationStatus(n.port);
          if (!s.is_replica) continue;
          expect(s).toMatchObject({ io_running: true, sql_running: true, last_io_error: '' });
          await waitFor(`row ${nextId} on ${n.host}:${n.port}`, async () => {
            const conn = await mysql.createConnection({ host: n.host, port: n.port, ...storage, connectTimeout: 3000 });
            const [rows] = (await conn.query('SELECT id FROM `postgres_$$_public`.rot WHERE id = ?', [nextId])) as unknown as [unknown[]];
            await conn.end();
            return rows.length === 1 ? true : undefined;
          }, 15_000, 200);
        } finally {
          ha.close();
        }
      }
      nextId++;
      await g.group.startManager(leader);
    }
  }, 900_000);
});
