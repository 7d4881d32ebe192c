// manual_switch and set_noswitch on real engines: a one-member manager, three agents on
// 127.0.2.1-3, a cluster of 1 shard x 3 MariaDB nodes and 1 PostgreSQL compute node, under a
// steady insert load through the compute node. The switch moves the master to a chosen
// standby; writes through the compute node go to it; every insert acknowledged before,
// during and after is on the new master; the write stall is reported. Refusals (an unknown
// node, a master_hostaddr that is not the master, a standby too far behind) change nothing.

import path from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StorageNodeRecord } from '@kcm/manager';
import { emit, emitRaw } from '../helpers/emit-client';
import { HOSTS, startClusterFixture, type ClusterFixture, waitUntil } from './cluster-fixture';
import { createHaCluster, idsOn, InsertLoad, registerMachines, TABLE, type HaCluster } from './ha-fixture';
import { longestGap } from './write-gaps';
import { openTestAccounts } from '../helpers/secrets';

const MEMBER = '127.0.1.76:58176';
const AGENT_PORT = 58156;
/** Small, so that a standby held back by a lock is "too far behind" after a few inserts. */
const MAX_BEHIND_TRX = 20;

const ipPort = (n: { hostaddr: string; port: number }) => `${n.hostaddr}_${n.port}`;

describe('manual_switch and set_noswitch on real engines (1 shard x 3 nodes, 1 compute node)', () => {
  let f: ClusterFixture;
  let ha: HaCluster;

  const shard = () => Object.values(ha.cluster().shards)[0];
  const master = () => ha.master();
  const standbys = () => ha.nodes().filter((n) => n.id !== shard().masterNodeId);
  /** The agent's own account, over the instance's socket (it is a localhost account). */
  const adminConn = (n: StorageNodeRecord) =>
    mysql.createConnection({ socketPath: path.join(n.datadir, String(n.port), 'run', 'mariadbd.sock'), ...openTestAccounts(ha.cluster().accounts).admin });
  const detailShard = async () => {
    const reply = await emit(MEMBER, 'get_cluster_detail', { cluster_id: ha.clusterId });
    return (reply.attachment as { list_shard: { noswitch_until: string; list_node: { hostaddr: string; port: string; master: string; status: string }[] }[] }).list_shard[0];
  };

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER, managerConfig: { manualSwitchMaxBehindTrx: MAX_BEHIND_TRX, manualSwitchCatchUpMs: 5000 } });
    await registerMachines(f, [2]);
    ha = await createHaCluster(f, HOSTS[2]);
  }, 300_000);

  afterAll(async () => {
    ha?.close();
    await f?.close();
  }, 120_000);

  it('refuses an unknown node and a master_hostaddr that is not the master, changing nothing', async () => {
    const [a, b] = standbys();
    const jobs = f.manager.store.state().counters.job;
    const unknown = await emitRaw(MEMBER, 'manual_switch', { cluster_id: ha.clusterId, shard_id: shard().id, master_hostaddr: ipPort(master()), assign_hostaddr: '127.0.2.9_55100' });
    expect([unknown.error_code, unknown.error_info]).toEqual(['1005', 'paras.assign_hostaddr: 127.0.2.9_55100 is not a storage node kcm manages']);
    const notMaster = await emitRaw(MEMBER, 'manual_switch', { cluster_id: ha.clusterId, shard_id: shard().id, master_hostaddr: ipPort(a), assign_hostaddr: ipPort(b) });
    expect(notMaster.error_code).toBe('1006');
    expect(notMaster.error_info).toBe(`paras.master_hostaddr: ${ipPort(a)} is not the master of shard ${shard().id}; its master is ${ipPort(master())}`);
    expect(f.manager.store.state().counters.job).toBe(jobs);
  });

  it('refuses a standby further behind than manualSwitchMaxBehindTrx, before any write is held', async () => {
    const [held] = standbys();
    const lock = await adminConn(held);
    await lock.query('FLUSH TABLES WITH READ LOCK'); // its SQL thread can apply nothing now
    try {
      for (let i = 0; i < MAX_BEHIND_TRX + 5; i++) await ha.storageQuery(master(), `INSERT INTO ${TABLE} (id, at) VALUES (${1_000_000 + i}, 0)`);
      const reply = await f.runJob('manual_switch', { cluster_id: ha.clusterId, shard_id: shard().id, master_hostaddr: ipPort(master()), assign_hostaddr: ipPort(held) });
      expect(reply.status).toBe('failed');
      expect(reply.error_code).toBe('1006');
      expect(reply.error_info).toMatch(new RegExp(`${ipPort(held)} cannot take over shard ${shard().id}: it is \\d+ transactions behind the master .* more than manualSwitchMaxBehindTrx ${MAX_BEHIND_TRX}; nothing was changed`));
    } finally {
      await lock.query('UNLOCK TABLES');
      await lock.end();
    }
    // The master still takes writes, and is still the master.
    await ha.storageQuery(master(), `DELETE FROM ${TABLE} WHERE id >= 1000000`);
    expect((await detailShard()).list_node.find((n) => n.master === 'true')).toMatchObject({ hostaddr: master().hostaddr, port: String(master().port) });
  }, 60_000);

  it('switches the master to the chosen standby under load: writes through the compute node reach it, nothing acknowledged is lost, the stall is reported', async () => {
    const oldMaster = master();
    const assign = standbys()[1];
    const load = new InsertLoad(ha);
    load.start();
    await waitUntil('the load running', async () => (load.acked.length >= 50 ? true : undefined), 20_000, 50);
    const started = Date.now();
    const reply = await f.runJob('manual_switch', { cluster_id: ha.clusterId, shard_id: shard().id, master_hostaddr: ipPort(oldMaster), assign_hostaddr: ipPort(assign) }, 60_000);
    const ended = Date.now();
    const ackedAtSwitch = load.acked.length;
    await waitUntil('writes after the switch', async () => (load.acked.length >= ackedAtSwitch + 50 ? true : undefined), 20_000, 50);
    await load.stop();
    expect(reply.status, reply.error_info).toBe('done');
    const result = reply.attachment as { old_master: string; new_master: string; write_stall_ms: string; list_step: { step: string; ms: string }[]; standbys_failed: string; comps_repointed: string };
    const clientOutage = longestGap(load, started, ended);
    console.log(`manual_switch: job ${ended - started} ms, write_stall_ms ${result.write_stall_ms}, longest client outage ${clientOutage} ms (${load.failures} failed inserts), steps ${JSON.stringify(result.list_step)}`);
    expect(result).toMatchObject({ old_master: ipPort(oldMaster), new_master: ipPort(assign), standbys_failed: '', comps_repointed: Object.values(ha.cluster().comps)[0].name });
    expect(Number(result.write_stall_ms)).toBeGreaterThan(0);
    expect(Number(result.write_stall_ms)).toBeLessThan(5000);
    // No write waited out rpl_semi_sync_master_timeout (5 s) on a new master without a standby.
    expect(clientOutage).toBeLessThan(4000);

    // The metadata and the measured view agree: the assigned node is the only writable master.
    expect(master().id).toBe(assign.id);
    const nodes = (await detailShard()).list_node;
    expect(nodes.filter((n) => n.master === 'true')).toEqual([expect.objectContaining({ hostaddr: assign.hostaddr, port: String(assign.port) })]);
    expect(nodes.every((n) => n.status === 'online')).toBe(true);

    // Every acknowledged insert is on the new master, and the old one replicates from it.
    const onNew = await idsOn(ha, assign);
    expect(load.acked.map((a) => a.id).filter((id) => !onNew.has(id))).toEqual([]);
    const last = load.acked[load.acked.length - 1].id;
    await expect(ha.storageQuery(oldMaster, `INSERT INTO ${TABLE} (id, at) VALUES (2000000, 0)`)).rejects.toThrow(/read-only|READ-ONLY|read_only/);
    for (const s of standbys()) await waitUntil(`${ipPort(s)} has the last insert`, async () => ((await idsOn(ha, s)).has(last) ? true : undefined), 10_000);
  }, 120_000);

  it('set_noswitch opens a window get_cluster_detail shows, and type 0 closes it', async () => {
    const before = Math.floor(Date.now() / 1000);
    const opened = await f.runJob('set_noswitch', { type: '1', timeout: '600', cluster_id: ha.clusterId, shard_id: shard().id });
    expect(opened.status, opened.error_info).toBe('done');
    const until = Number((await detailShard()).noswitch_until);
    expect(until).toBeGreaterThanOrEqual(before + 600 - 1);
    expect(until).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 600);
    const closed = await f.runJob('set_noswitch', { type: '0', cluster_id: ha.clusterId, shard_id: shard().id });
    expect(closed.status, closed.error_info).toBe('done');
    expect((await detailShard()).noswitch_until).toBe('');
  });
});
