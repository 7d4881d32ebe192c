// cluster_restore survives its manager leader being SIGKILLed mid-restore: a 3-manager
// group and three agents, each its own OS process, on real engines. The leader is killed
// while the restore is writing the destination (restoring the full backup, or rebuilding
// the standbys); the next leader resumes the job at its first unfinished step. It must end
// done with the destination as of T, or failed with nothing half-restored left serving.

import path from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emitRaw, jobStatus } from '../helpers/emit-client';
import { sleep, waitFor } from '../manager/helpers/processes';
import { HOSTS } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { startGroupFixture, type GroupFixture } from './group-fixture';

const MEMBERS = ['127.0.1.77:58179', '127.0.1.78:58179', '127.0.1.79:58179'];
const AGENT_PORT = 58157;
const DB = 'postgres_$$_public';
const WRITING_STEPS = new Set(['restore each shard master from the full backup', 'rebuild the standbys from the restored masters']);

interface Created {
  cluster_id: string;
  storage_user: string;
  storage_pwd: string;
  list_shard: { list_node: { hostaddr: string; port: string; master: string }[] }[];
}

// Its backup is stored uncompressed (backupCompression 'none'), as every set taken before
// compression was: such a set must still restore. restore-drill.test.ts restores a zstd one.
describe('cluster_restore when the manager leader is SIGKILLed during it', () => {
  let g: GroupFixture;
  let leader: string;
  let src: Created;
  let dst: Created;

  const master = (c: Created) => {
    const m = c.list_shard[0].list_node.find((n) => n.master === 'true')!;
    return { host: m.hostaddr, port: Number(m.port) };
  };
  async function onMaster<T>(c: Created, work: (conn: mysql.Connection) => Promise<T>): Promise<T> {
    const conn = await mysql.createConnection({ ...master(c), user: c.storage_user, password: c.storage_pwd, connectTimeout: 5000 });
    try {
      return await work(conn);
    } finally {
      await conn.end();
    }
  }
  const insert = (from: number, to: number) =>
    onMaster(src, async (c) => {
      for (let id = from; id < to; id++) await c.query(`INSERT INTO \`${DB}\`.orders VALUES (?, ?)`, [id, Date.now()]);
    });

  beforeAll(async () => {
    g = await startGroupFixture({ name: 'restore-leader', members: MEMBERS, hosts: HOSTS, agentPort: AGENT_PORT, managerConfig: { tickMs: 50, electionTick: 10, backupCompression: 'none' } });
    leader = await g.group.waitForLeader();
    await g.runDone('create_backup_storage', { name: 'kill', stype: 'fs', hostaddr: HOSTS[2], port: String(AGENT_PORT), path: path.join(g.group.dir, 'backups') });
    const [a, b] = await Promise.all([
      g.runDone('create_cluster', clusterParas({ nick_name: 'src', computer_iplists: [HOSTS[0]] }), 300_000),
      g.runDone('create_cluster', clusterParas({ nick_name: 'dst', computer_iplists: [HOSTS[1]] }), 300_000),
    ]);
    src = a.attachment as unknown as Created;
    dst = b.attachment as unknown as Created;
  }, 420_000);

  afterAll(async () => {
    await g?.close();
  }, 60_000);

  it('the job ends done with the rows as of T, or failed with no cluster database left on the destination', async () => {
    await onMaster(src, async (c) => {
      await c.query(`CREATE DATABASE \`${DB}\``);
      await c.query(`CREATE TABLE \`${DB}\`.orders (id INT PRIMARY KEY, at BIGINT NOT NULL)`);
    });
    await insert(1, 51);
    await g.runDone('manual_backup_cluster', { cluster_id: src.cluster_id }, 180_000);
    await insert(51, 61);
    const restoreTime = Math.floor(Date.now() / 1000) + 1;
    await sleep(restoreTime * 1000 + 1100 - Date.now());
    await insert(61, 71);

    let ack;
    for (const deadline = Date.now() + 30_000; ; await sleep(500)) {
      ack = await emitRaw(leader, 'cluster_restore', { src_cluster_id: src.cluster_id, dst_cluster_id: dst.cluster_id, restore_time: String(restoreTime) });
      if (ack.error_code === '0') break;
      if (!/beyond the archived binlogs/.test(ack.error_info) || Date.now() > deadline) throw new Error(`cluster_restore refused: ${ack.error_info}`);
    }
    await waitFor('the restore to write the destination', async () => {
      const status = await jobStatus(leader, ack.job_id);
      if (status.status === 'failed' || status.status === 'done') throw new Error(`cluster_restore ended before the kill: ${status.status} ${status.error_info}`);
      return WRITING_STEPS.has(String((status.attachment as { progress?: { step_name?: string } } | null)?.progress?.step_name));
    }, 120_000, 100);
    await sleep(500);
    await g.group.manager(leader).kill();
    leader = await g.group.waitForLeader(MEMBERS.filter((m) => m !== leader), 30_000);

    const reply = await g.waitForEnd(ack.job_id, 300_000);
    console.log(`cluster_restore after the leader kill: ${reply.status} ${reply.error_info}`);
    if (reply.status === 'done') {
      const rows = await onMaster(dst, async (c) => (await c.query(`SELECT COUNT(*) AS n, MAX(id) AS max FROM \`${DB}\`.orders`))[0] as { n: number; max: number }[]);
      expect(rows[0]).toEqual({ n: 60, max: 60 });
    } else {
      expect(reply.status).toBe('failed');
      const dbs = await onMaster(dst, async (c) => (await c.query(`SHOW DATABASES LIKE '%\\_$$\\_%'`))[0] as unknown[]);
      expect(dbs).toEqual([]);
    }
  }, 600_000);
});
