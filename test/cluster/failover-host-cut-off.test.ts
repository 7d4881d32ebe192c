// Shard HA under a network partition of the master's host, and under SIGSTOP and SIGTERM of
// the master, on real engines, with clients that never time out (issue 35, defect 1).
//
// The partition: iptables drops every packet to and from the master's address, except what
// the host sends itself. The master is unreachable from the manager, its standbys and the
// compute node. Before the fix, inserts in flight at the cut were committed by the old
// master once its semi-sync wait fell back to asynchronous (5 s), acknowledged to their
// clients when the partition healed (TCP delivered the answer late), and discarded when the
// old master rejoined: acknowledged writes lost. Now semi-sync never falls back, the old
// master's own agent fences it when its lease runs out (it reaches neither the managers nor
// its standbys), the failover waits for that lease before promoting, and the failover
// closes the compute node's connections to the old master. The bar: 0 acknowledged writes
// lost, and no write accepted by the old master after the promotion.

import * as net from 'node:net';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gtidsBeyond } from '@kcm/agent-api';
import { emit } from '../helpers/emit-client';
import { openTestAccounts } from '../helpers/secrets';
import { HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { createHaCluster, haJobs, idsOn, InsertLoad, mariadbdPid, registerMachines, TABLE, type HaCluster } from './ha-fixture';
import { NetFaults } from './net-faults';
import type { JobRecord, StorageNodeRecord } from '@kcm/manager';

const processAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('shard failover when the master host is partitioned, stopped or terminated, with clients that never time out (real engines)', () => {
  let f: ClusterFixture;
  let ha: HaCluster;
  const faults = new NetFaults();
  let nextId = 1;

  beforeAll(async () => {
    f = await startClusterFixture();
    await registerMachines(f, [2]);
    ha = await createHaCluster(f, HOSTS[2]);
  }, 300_000);

  afterAll(async () => {
    await faults.removeAll();
    ha?.close();
    await f?.close();
  }, 120_000);

  /**
   * A direct session on `node`, from the node's own address (a client on that host: the
   * partition lets it through). Its own socket: mysql2 ignores its localAddress option.
   */
  function directSession(node: StorageNodeRecord): Promise<mysql.Connection> {
    const stream = () => net.connect({ host: node.hostaddr, port: node.port, localAddress: node.hostaddr });
    return mysql.createConnection({ stream, ...openTestAccounts(ha.cluster().accounts).storage, connectTimeout: 3000 });
  }

  /** Two patient insert loads through the compute node, each id range its own. */
  function patientLoads(): InsertLoad[] {
    const loads = [new InsertLoad(ha, nextId, { patient: true }), new InsertLoad(ha, nextId + 1_000_000, { patient: true })];
    nextId += 2_000_000;
    for (const l of loads) l.start();
    return loads;
  }

  async function failoverAfter(jobsBefore: number): Promise<JobRecord> {
    return waitUntil('shard_failover finished', async () => haJobs(f, 'shard_failover').slice(jobsBefore).find((j) => j.status === 'done' || j.status === 'failed'), 90_000, 50);
  }

  /** The rejoin of `node` after the failover `failover` finished. */
  async function rejoinOf(node: StorageNodeRecord, failover: JobRecord): Promise<JobRecord> {
    return waitUntil(
      'shard_rejoin done',
      async () => haJobs(f, 'shard_rejoin').find((j) => j.paras.node_id === node.id && Number(j.id) > Number(failover.id) && j.status === 'done'),
      120_000,
      100,
    );
  }

  /** Every acknowledged insert of `loads` is on the master and on every node; exactly one node is writable. */
  async function nothingAcknowledgedLost(loads: InsertLoad[]): Promise<void> {
    const acked = loads.flatMap((l) => l.acked.map((a) => a.id));
    expect(acked.length).toBeGreaterThan(0);
    const master = ha.master();
    const onMaster = await idsOn(ha, master);
    expect(acked.filter((id) => !onMaster.has(id)), 'acknowledged inserts missing on the new master').toEqual([]);
    const last = Math.max(...acked);
    for (const n of ha.nodes()) {
      const have = await waitUntil(`${n.hostaddr}:${n.port} has the last acknowledged insert`, async () => {
        const ids = await idsOn(ha, n);
        return ids.has(last) ? ids : undefined;
      }, 30_000);
      expect(acked.filter((id) => !have.has(id)), `acknowledged inserts missing on ${n.hostaddr}:${n.port}`).toEqual([]);
    }
    const statuses = await Promise.all(ha.nodes().map((n) => ha.status(n)));
    expect(statuses.filter((s) => !s.read_only).map((s) => s.port)).toEqual([master.port]);
    const masterPos = statuses[ha.nodes().findIndex((n) => n.id === master.id)].gtid_binlog_pos;
    for (const s of statuses) expect(gtidsBeyond(s.gtid_binlog_pos, masterPos)).toEqual([]);
  }

  it('partition: the old master is fenced by its own agent before the promotion, and nothing acknowledged is lost', async () => {
    const oldMaster = ha.master();
    expect(oldMaster.hostaddr).not.toBe(ha.comp().host);
    const oldPid = await mariadbdPid(oldMaster);
    const loads = patientLoads();
    const direct = await directSession(oldMaster);
    direct.on('error', () => {});
    const jobsBefore = haJobs(f, 'shard_failover').length;
    let directOutcome: 'acknowledged' | 'failed' | 'pending' = 'pending';
    let cutAt = 0;
    try {
      await waitUntil('inserts flowing', async () => (loads.every((l) => l.acked.length >= 20) ? true : undefined), 20_000, 50);
      await faults.isolate(oldMaster.hostaddr);
      cutAt = Date.now();
      // A client on the master's own host writes during the cut: it must never be acknowledged.
      void direct.query(`INSERT INTO ${TABLE} (id, at) VALUES (?, ?)`, [999_999_001, Date.now()]).then(
        () => (directOutcome = 'acknowledged'),
        () => (directOutcome = 'failed'),
      );
      const job = await failoverAfter(jobsBefore);
      expect(job.status, job.result?.errorInfo).toBe('done');
      const result = job.result!.attachment as Record<string, any>;
      console.log(`partition -> failover done in ${Date.now() - cutAt} ms: ${JSON.stringify(result)}`);
      expect(result.reason).toMatch(/unreachable from the manager .* every standby lost it/);
      expect(result.old_master).toMatchObject({ node_id: oldMaster.id, fenced: 'recorded in metadata (agent unreachable); its lease ran out' });
      expect(ha.master().id).not.toBe(oldMaster.id);
      // The fault landed where the test's name says: the old master's own agent killed it
      // while the host was cut off (nothing else could reach it), before the promotion.
      expect(processAlive(oldPid), 'the old master mariadbd still runs after the promotion').toBe(false);
      // And it accepts nothing now: a new session from its own host finds no server.
      await expect(directSession(oldMaster)).rejects.toThrow(/ECONNREFUSED/);
      await waitUntil('the write made on the old master during the cut has failed', async () => (directOutcome !== 'pending' ? true : undefined), 30_000, 50);
      expect(directOutcome).toBe('failed');
      // Writes through the compute node go on, on the new master, while the cut lasts.
      const resumedAt = await waitUntil('a write through the compute node after the promotion', async () => loads[0].firstAckAfter(job.finishedAt ?? Date.now()), 30_000, 50);
      console.log(`partition -> first write through the compute node after it: ${resumedAt - cutAt} ms`);
    } finally {
      await faults.removeAll();
    }
    const healedAt = Date.now();
    // Healed: every session blocked at the cut has its answer (the failover closed the
    // compute node's connections to the old master; nothing waits for ever).
    await Promise.all(loads.map((l) => l.stop()));
    direct.destroy();
    const lateAcks = loads.flatMap((l) => l.acked.filter((a) => a.at >= healedAt));
    console.log(`partition: ${loads.map((l) => `${l.acked.length} acknowledged, ${l.failed.length} failed`).join('; ')}; ${lateAcks.length} acknowledged after the heal`);

    const failover = haJobs(f, 'shard_failover').slice(jobsBefore)[0];
    const rejoin = await rejoinOf(oldMaster, failover);
    console.log(`rejoin after the partition: ${JSON.stringify(rejoin.result?.attachment)}`);
    expect(ha.nodes().filter((n) => n.fenced)).toEqual([]);
    await nothingAcknowledgedLost(loads);
    // get_cluster_detail shows the new master (measured) and no node fenced.
    const detail = await emit(f.member, 'get_cluster_detail', { cluster_id: ha.clusterId });
    const listed = (detail.attachment as { list_shard: { list_node: { node_id: string; master: string; fenced: string }[] }[] }).list_shard[0].list_node;
    expect(listed.find((n) => n.node_id === ha.master().id)).toMatchObject({ master: 'true', fenced: '' });
  }, 300_000);

  for (const signal of ['SIGSTOP', 'SIGTERM'] as const) {
    it(`${signal} of the master: failed over, nothing acknowledged is lost`, async () => {
      const oldMaster = ha.master();
      const loads = patientLoads();
      const jobsBefore = haJobs(f, 'shard_failover').length;
      const pid = await mariadbdPid(oldMaster);
      await waitUntil('inserts flowing', async () => (loads.every((l) => l.acked.length >= 20) ? true : undefined), 20_000, 50);
      process.kill(pid, signal);
      const signalledAt = Date.now();
      const job = await failoverAfter(jobsBefore);
      expect(job.status, job.result?.errorInfo).toBe('done');
      const resumedAt = await waitUntil('a write through the compute node after the failover', async () => loads[0].firstAckAfter(job.finishedAt ?? Date.now()), 30_000, 50);
      console.log(`${signal} -> first write through the compute node after the failover: ${resumedAt - signalledAt} ms; failover: ${JSON.stringify(job.result?.attachment)}`);
      expect(ha.master().id).not.toBe(oldMaster.id);
      await Promise.all(loads.map((l) => l.stop()));
      console.log(`${signal}: ${loads.map((l) => `${l.acked.length} acknowledged, ${l.failed.length} failed`).join('; ')}`);
      await rejoinOf(oldMaster, job);
      await nothingAcknowledgedLost(loads);
    }, 300_000);
  }
});
