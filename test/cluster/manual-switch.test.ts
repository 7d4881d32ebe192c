// manual_switch and set_noswitch on real engines: a one-member manager, three agents on
// 127.0.2.1-3, a cluster of 1 shard x 3 MariaDB nodes and 1 PostgreSQL compute node, under a
// steady insert load through the compute node. The switch moves the master to a chosen
// standby; writes through the compute node go to it; every insert acknowledged before,
// during and after is on the new master; the write stall is reported. Refusals (an unknown
// node, a master_hostaddr that is not the master, a standby too far behind) change nothing.

import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterRecord, StorageNodeRecord } from '../../services/manager/src/meta/state';
import { emit, emitRaw } from '../manager/helpers/emit-client';
import { sleep } from '../manager/helpers/processes';
import { computerPorts, HOSTS, startClusterFixture, storagePorts, type ClusterFixture, waitUntil } from './cluster-fixture';

const MEMBER = '127.0.1.76:58176';
const AGENT_PORT = 58156;
/** Small, so that a standby held back by a lock is "too far behind" after a few inserts. */
const MAX_BEHIND_TRX = 20;

const CREATE_PARAS = {
  nick_name: 'switch', ha_mode: 'rbr', shards: '1', nodes: '3', comps: '1', max_storage_size: '1', max_connections: '100',
  cpu_cores: '1', cpu_limit_node: 'share', innodb_size: '64', rocksdb_block_cache_size_M: '0', dbcfg: '1', fullsync_level: '1',
  storage_iplists: [...HOSTS], computer_iplists: [HOSTS[0]], install_proxysql: '0',
};

const ipPort = (n: { hostaddr: string; port: number }) => `${n.hostaddr}_${n.port}`;

/** Inserts through the compute node, one row at a time, and remembers which were acknowledged and when writes failed. */
class InsertLoad {
  readonly acked: number[] = [];
  /** [start, end] of each run of failed inserts, ms. */
  readonly outages: { from: number; to: number; error: string }[] = [];
  private next = 1;
  private running = true;
  private done: Promise<void>;

  constructor(private readonly connect: () => Promise<pg.Client>) {
    this.done = this.loop();
  }

  private async loop(): Promise<void> {
    let client: pg.Client | undefined;
    let failingSince: number | undefined;
    let lastError = '';
    while (this.running) {
      const id = this.next;
      try {
        client ??= await this.connect();
        await client.query('INSERT INTO public.load (id, at) VALUES ($1, $2)', [id, Date.now()]);
        this.acked.push(id);
        this.next++;
        if (failingSince !== undefined) this.outages.push({ from: failingSince, to: Date.now(), error: lastError });
        failingSince = undefined;
      } catch (err) {
        failingSince ??= Date.now();
        lastError = (err as Error).message;
        // An insert that failed may still have reached the shard: never reuse its id.
        this.next++;
        await client?.end().catch(() => {});
        client = undefined;
      }
      await sleep(5);
    }
    await client?.end().catch(() => {});
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }
}

describe('manual_switch and set_noswitch on real engines (1 shard x 3 nodes, 1 compute node)', () => {
  let f: ClusterFixture;
  let cluster: ClusterRecord;
  let computer: { user: string; password: string };

  const shard = () => Object.values(f.manager.store.state().clusters[cluster.id].shards)[0];
  const master = () => shard().nodes[shard().masterNodeId];
  const standbys = () => Object.values(shard().nodes).filter((n) => n.id !== shard().masterNodeId);
  const comp = () => Object.values(cluster.comps)[0];
  const pgClient = async () => {
    const c = new pg.Client({ host: comp().hostaddr, port: comp().port, user: computer.user, password: computer.password, database: 'postgres', connectionTimeoutMillis: 3000 });
    c.on('error', () => {});
    await c.connect();
    return c;
  };
  const storageConn = (n: StorageNodeRecord) =>
    mysql.createConnection({ host: n.hostaddr, port: n.port, user: cluster.accounts.storage.user, password: cluster.accounts.storage.password, connectTimeout: 5000 });
  /** The agent's own account, over the instance's socket (it is a localhost account). */
  const adminConn = (n: StorageNodeRecord) =>
    mysql.createConnection({ socketPath: path.join(n.datadir, String(n.port), 'run', 'mariadbd.sock'), user: cluster.accounts.admin.user, password: cluster.accounts.admin.password });
  const loadIdsOn = async (n: StorageNodeRecord): Promise<Set<number>> => {
    const c = await storageConn(n);
    try {
      const [rows] = await c.query('SELECT id FROM `postgres_$$_public`.load');
      return new Set((rows as { id: number }[]).map((r) => Number(r.id)));
    } finally {
      await c.end();
    }
  };
  const detailShard = async () => {
    const reply = await emit(MEMBER, 'get_cluster_detail', { cluster_id: cluster.id });
    return (reply.attachment as { list_shard: { noswitch_until: string; list_node: { hostaddr: string; port: string; master: string; status: string }[] }[] }).list_shard[0];
  };

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER, managerConfig: { manualSwitchMaxBehindTrx: MAX_BEHIND_TRX, manualSwitchCatchUpMs: 5000 } });
    for (const [i, host] of HOSTS.entries()) {
      for (const [type, range] of [['storage', storagePorts(i)], ['computer', computerPorts(i)]] as const) {
        const reply = await f.runJob('create_machine', {
          hostaddr: host, machine_type: type, port_range: `${range.low}-${range.high}`, rack_id: 'r1', ...f.dirs(i), total_mem: '4096', total_cpu_cores: '2',
        });
        expect(reply.status, reply.error_info).toBe('done');
      }
    }
    const created = await f.runJob('create_cluster', CREATE_PARAS, 180_000);
    expect(created.status, created.error_info).toBe('done');
    const result = created.attachment as { cluster_id: string; computer_user: string; computer_pwd: string };
    cluster = f.manager.store.state().clusters[result.cluster_id];
    computer = { user: result.computer_user, password: result.computer_pwd };
    const c = await storageConn(master());
    await c.query('CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
    await c.query('CREATE TABLE `postgres_$$_public`.load (id INT PRIMARY KEY, at BIGINT NOT NULL) ENGINE=InnoDB');
    await c.end();
    await waitUntil('the load table on the compute node', async () => {
      const p = await pgClient();
      try {
        return (await p.query(`SELECT 1 FROM information_schema.foreign_tables WHERE foreign_table_name = 'load'`)).rowCount === 1 ? true : undefined;
      } finally {
        await p.end();
      }
    }, 20_000);
  }, 300_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  it('refuses an unknown node and a master_hostaddr that is not the master, changing nothing', async () => {
    const [a, b] = standbys();
    const jobs = f.manager.store.state().counters.job;
    const unknown = await emitRaw(MEMBER, 'manual_switch', { cluster_id: cluster.id, shard_id: shard().id, master_hostaddr: ipPort(master()), assign_hostaddr: '127.0.2.9_55100' });
    expect([unknown.error_code, unknown.error_info]).toEqual(['1005', 'paras.assign_hostaddr: 127.0.2.9_55100 is not a storage node kcm manages']);
    const notMaster = await emitRaw(MEMBER, 'manual_switch', { cluster_id: cluster.id, shard_id: shard().id, master_hostaddr: ipPort(a), assign_hostaddr: ipPort(b) });
    expect(notMaster.error_code).toBe('1006');
    expect(notMaster.error_info).toBe(`paras.master_hostaddr: ${ipPort(a)} is not the master of shard ${shard().id}; its master is ${ipPort(master())}`);
    expect(f.manager.store.state().counters.job).toBe(jobs);
  });

  it('refuses a standby further behind than manualSwitchMaxBehindTrx, before any write is held', async () => {
    const [held] = standbys();
    const lock = await adminConn(held);
    await lock.query('FLUSH TABLES WITH READ LOCK'); // its SQL thread can apply nothing now
    try {
      const c = await storageConn(master());
      for (let i = 0; i < MAX_BEHIND_TRX + 5; i++) await c.query('INSERT INTO `postgres_$$_public`.load (id, at) VALUES (?, 0)', [1_000_000 + i]);
      await c.end();
      const reply = await f.runJob('manual_switch', { cluster_id: cluster.id, shard_id: shard().id, master_hostaddr: ipPort(master()), assign_hostaddr: ipPort(held) });
      expect(reply.status).toBe('failed');
      expect(reply.error_code).toBe('1006');
      expect(reply.error_info).toMatch(new RegExp(`${ipPort(held)} cannot take over shard ${shard().id}: it is \\d+ transactions behind the master .* more than manualSwitchMaxBehindTrx ${MAX_BEHIND_TRX}; nothing was changed`));
    } finally {
      await lock.query('UNLOCK TABLES');
      await lock.end();
    }
    // The master still takes writes, and is still the master.
    const c = await storageConn(master());
    await c.query('DELETE FROM `postgres_$$_public`.load WHERE id >= 1000000');
    await c.end();
    expect((await detailShard()).list_node.find((n) => n.master === 'true')).toMatchObject({ hostaddr: master().hostaddr, port: String(master().port) });
  }, 60_000);

  it('switches the master to the chosen standby under load: writes through the compute node reach it, nothing acknowledged is lost, the stall is reported', async () => {
    const oldMaster = master();
    const assign = standbys()[1];
    const load = new InsertLoad(pgClient);
    await waitUntil('the load running', async () => (load.acked.length >= 50 ? true : undefined), 20_000, 50);
    const started = Date.now();
    const reply = await f.runJob('manual_switch', { cluster_id: cluster.id, shard_id: shard().id, master_hostaddr: ipPort(oldMaster), assign_hostaddr: ipPort(assign) }, 60_000);
    const jobMs = Date.now() - started;
    const ackedAtSwitch = load.acked.length;
    await waitUntil('writes after the switch', async () => (load.acked.length >= ackedAtSwitch + 50 ? true : undefined), 20_000, 50);
    await load.stop();
    expect(reply.status, reply.error_info).toBe('done');
    const result = reply.attachment as { old_master: string; new_master: string; write_stall_ms: string; list_step: { step: string; ms: string }[]; standbys_failed: string; comps_repointed: string };
    const clientOutage = Math.max(0, ...load.outages.map((o) => o.to - o.from));
    console.log(`manual_switch: job ${jobMs} ms, write_stall_ms ${result.write_stall_ms}, longest client outage ${clientOutage} ms (${load.outages.length} outage(s)), steps ${JSON.stringify(result.list_step)}`);
    expect(result).toMatchObject({ old_master: ipPort(oldMaster), new_master: ipPort(assign), standbys_failed: '', comps_repointed: comp().name });
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
    const onNew = await loadIdsOn(assign);
    expect(load.acked.filter((id) => !onNew.has(id))).toEqual([]);
    const last = Math.max(...load.acked);
    const old = await storageConn(oldMaster);
    await expect(old.query('INSERT INTO `postgres_$$_public`.load (id, at) VALUES (?, 0)', [2_000_000])).rejects.toThrow(/read-only|READ-ONLY|read_only/);
    await old.end();
    await waitUntil('the old master has the last insert', async () => ((await loadIdsOn(oldMaster)).has(last) ? true : undefined), 10_000);
    for (const s of standbys()) await waitUntil(`${ipPort(s)} has the last insert`, async () => ((await loadIdsOn(s)).has(last) ? true : undefined), 10_000);
  }, 120_000);

  it('set_noswitch opens a window get_cluster_detail shows, and type 0 closes it', async () => {
    const before = Math.floor(Date.now() / 1000);
    const opened = await f.runJob('set_noswitch', { type: '1', timeout: '600', cluster_id: cluster.id, shard_id: shard().id });
    expect(opened.status, opened.error_info).toBe('done');
    const until = Number((await detailShard()).noswitch_until);
    expect(until).toBeGreaterThanOrEqual(before + 600 - 1);
    expect(until).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 600);
    const closed = await f.runJob('set_noswitch', { type: '0', cluster_id: cluster.id, shard_id: shard().id });
    expect(closed.status, closed.error_info).toBe('done');
    expect((await detailShard()).noswitch_until).toBe('');
  });
});
