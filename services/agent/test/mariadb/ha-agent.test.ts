// Real engines, through the MariaDbHaAgent API only: a semi-sync master and two standbys;
// the master's mariadbd is SIGKILLed, fenced (kept read-only and stopped, never restarted
// by its agent), the most advanced standby promoted, the other re-pointed with
// MASTER_USE_GTID=slave_pos, and the fenced old master re-pointed as a standby of the new
// one. The steps a failover and a manual_switch are made of.

import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gtidCovers, gtidsBeyond, MariaDbHaAgentClient, type MariaDbHaStatusReply, type MariaDbHaWatchBeat } from '@kcm/agent-api';
import { processAlive } from '../../src/ops/exec';
import { HOSTS, secrets, startShardFixture, type ShardFixture } from './shard-fixture';

interface Node {
  host: string;
  port: number;
  serverId: number;
  agent: number;
}

const [OLD_MASTER, STANDBY_A, STANDBY_B]: Node[] = [
  { host: HOSTS[0], port: 57111, serverId: 11, agent: 0 },
  { host: HOSTS[1], port: 57112, serverId: 12, agent: 1 },
  { host: HOSTS[2], port: 57113, serverId: 13, agent: 2 },
];
const DB = 'ha_$$_public';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let f: ShardFixture;
let ha: MariaDbHaAgentClient[];

async function insert(node: Node, from: number, to: number): Promise<void> {
  const conn = await mysql.createConnection({ host: node.host, port: node.port, ...secrets.storage, connectTimeout: 5000 });
  try {
    for (let i = from; i < to; i++) await conn.query(`INSERT INTO \`${DB}\`.t (id) VALUES (?)`, [i]);
  } finally {
    await conn.end();
  }
}

async function count(node: Node): Promise<number> {
  const conn = await mysql.createConnection({ host: node.host, port: node.port, ...secrets.storage, connectTimeout: 5000 });
  try {
    const [rows] = await conn.query(`SELECT COUNT(*) AS n FROM \`${DB}\`.t`);
    return Number((rows as { n: number }[])[0].n);
  } finally {
    await conn.end();
  }
}

const status = (n: Node, checkMasterMs = 0): Promise<MariaDbHaStatusReply> => ha[n.agent].replicationStatus(n.port, checkMasterMs);

describe('MariaDbHaAgent: fence, promote, re-point (real mariadbd)', () => {
  beforeAll(async () => {
    f = await startShardFixture();
    ha = f.agents.map((a) => new MariaDbHaAgentClient(a.address));
    await Promise.all([OLD_MASTER, STANDBY_A, STANDBY_B].map((n) => f.clients[n.agent].install(f.installRequest(`ha-install-${n.port}`, n.port, n.serverId))));
    await f.clients[OLD_MASTER.agent].configureReplication({ op_id: 'ha-m', port: OLD_MASTER.port, role: 'master', master_host: '', master_port: 0, replication: secrets.replication, fullsync_level: 1 });
    for (const n of [STANDBY_A, STANDBY_B]) {
      await f.clients[n.agent].configureReplication({ op_id: `ha-s-${n.port}`, port: n.port, role: 'standby', master_host: OLD_MASTER.host, master_port: OLD_MASTER.port, replication: secrets.replication, fullsync_level: 1 });
    }
    const conn = await mysql.createConnection({ host: OLD_MASTER.host, port: OLD_MASTER.port, ...secrets.storage });
    await conn.query(`CREATE DATABASE \`${DB}\``);
    await conn.query(`CREATE TABLE \`${DB}\`.t (id INT PRIMARY KEY) ENGINE=InnoDB`);
    await conn.end();
    await insert(OLD_MASTER, 0, 50);
  }, 180_000);

  afterAll(async () => {
    for (const c of ha ?? []) c.close();
    await f?.close();
  });

  it('reports a standby applied, acknowledging semi-sync, and its master reachable from its host', async () => {
    const master = await status(OLD_MASTER);
    expect(master).toMatchObject({ installed: true, running: true, answering: true, read_only: false, is_replica: false, semi_sync_master_enabled: true, fenced: false });
    const reached = await ha[STANDBY_A.agent].waitForGtid(STANDBY_A.port, master.gtid_binlog_pos, 10_000);
    expect(reached.reached).toBe(true);
    const standby = await status(STANDBY_A, 1000);
    expect(standby).toMatchObject({ is_replica: true, io_running: true, sql_running: true, relay_applied: true, semi_sync_slave_active: true, master_reachable: true, read_only: true });
    expect(gtidCovers(standby.gtid_slave_pos, master.gtid_binlog_pos)).toBe(true);
    expect((await ha[0].replicationStatus(57199)).installed).toBe(false);
  });

  it('WatchStatus beats the measurements ReplicationStatus answers, for every port asked, until the caller stops', async () => {
    const beats: MariaDbHaWatchBeat[] = [];
    const stop = new AbortController();
    await ha[OLD_MASTER.agent].watchStatus([OLD_MASTER.port, 57199], 200, (b) => {
      beats.push(b);
      if (beats.length === 3) stop.abort();
    }, stop.signal);
    expect(beats).toHaveLength(3);
    for (const b of beats) {
      expect(b.statuses.map((x) => x.port)).toEqual([OLD_MASTER.port, 57199]);
      expect(b.statuses[0]).toMatchObject({ installed: true, running: true, answering: true, read_only: false, is_replica: false, desired_state: 'running' });
      expect(b.statuses[1].installed).toBe(false);
    }
  });

  it('TableChecksums holds a standby still at one position while its master commits on; ResumeApply catches it up', async () => {
    const a = ha[STANDBY_A.agent];
    const master0 = await status(OLD_MASTER);
    expect((await a.waitForGtid(STANDBY_A.port, master0.gtid_binlog_pos, 10_000)).reached).toBe(true);
    const held = await a.tableChecksums(STANDBY_A.port, true);
    // Only user tables (no mysql.*, no kcm_sys.*), with the figures of the held position.
    expect(held).toMatchObject({ held: true, gtid_pos: master0.gtid_binlog_pos, tables: [{ database: DB, table: 't', rows: 50 }] });
    expect(held.tables[0].checksum).toMatch(/^\d+$/);
    expect(await status(STANDBY_A)).toMatchObject({ sql_running: false, io_running: true, semi_sync_slave_active: true });
    // The master commits on (a new table); the held standby receives it but applies nothing.
    const conn = await mysql.createConnection({ host: OLD_MASTER.host, port: OLD_MASTER.port, ...secrets.storage, connectTimeout: 5000 });
    try {
      await conn.query(`CREATE TABLE \`${DB}\`.during_hold (id INT PRIMARY KEY) ENGINE=InnoDB`);
      await conn.query(`INSERT INTO \`${DB}\`.during_hold VALUES (1), (2)`);
    } finally {
      await conn.end();
    }
    const master1 = await status(OLD_MASTER);
    while (!gtidCovers((await status(STANDBY_A)).gtid_io_pos, master1.gtid_binlog_pos)) await sleep(50);
    const still = await a.tableChecksums(STANDBY_A.port, false);
    expect(still.tables).toEqual(held.tables);
    expect(still.held).toBe(false);
    expect((await a.resumeApply(STANDBY_A.port)).sql_running).toBe(true);
    expect((await a.waitForGtid(STANDBY_A.port, master1.gtid_binlog_pos, 10_000)).reached).toBe(true);
    const after = await a.tableChecksums(STANDBY_A.port, false);
    expect(after.tables.map((t) => [t.table, t.rows])).toEqual([['during_hold', 2], ['t', 50]]);
    expect(after.tables[1].checksum).toBe(held.tables[0].checksum);
    // Idempotent; and a master has no applying to hold.
    expect((await a.resumeApply(STANDBY_A.port)).sql_running).toBe(true);
    await expect(ha[OLD_MASTER.agent].tableChecksums(OLD_MASTER.port, true)).rejects.toThrow(/no standby/);
  });

  it('a SIGKILLed master is seen gone; fenced, it stays stopped and is never restarted by its agent', async () => {
    const before = await status(OLD_MASTER);
    const watching = new AbortController();
    let seenGoneOnBeat = false;
    const watch = ha[OLD_MASTER.agent].watchStatus([OLD_MASTER.port], 100, (b) => {
      if (!b.statuses[0].running) seenGoneOnBeat = true;
    }, watching.signal);
    process.kill(before.pid, 'SIGKILL');
    while (processAlive(before.pid)) await sleep(20);
    expect(await status(OLD_MASTER)).toMatchObject({ running: false, answering: false });
    // The beats say so too (the shard failure detector reads them).
    for (let waited = 0; !seenGoneOnBeat && waited < 3000; waited += 50) await sleep(50);
    watching.abort();
    await watch;
    expect(seenGoneOnBeat).toBe(true);
    const fenced = await ha[OLD_MASTER.agent].fence('fence-1', OLD_MASTER.port, true);
    expect(fenced.stopped).toBe(true);
    expect(await ha[OLD_MASTER.agent].fence('fence-2', OLD_MASTER.port, true)).toMatchObject({ was_running: false, stopped: true });
    await sleep(2500); // the supervisor checks every second
    expect(await status(OLD_MASTER)).toMatchObject({ running: false, fenced: true, desired_state: 'stopped' });
    // Standbys see the master gone from their own hosts.
    expect((await status(STANDBY_B, 1000)).master_reachable).toBe(false);
  }, 30_000);

  it('promotes a standby (idempotently), re-points the other with slave_pos, and the new master takes writes both see', async () => {
    const promoted = await ha[STANDBY_A.agent].promote({ op_id: 'promote-a', port: STANDBY_A.port, fullsync_level: 1, wait_relay_ms: 5000 });
    expect(promoted).toMatchObject({ read_only: false, semi_sync_master: true, already_master: false, relay_applied: true });
    expect(await ha[STANDBY_A.agent].promote({ op_id: 'promote-a-again', port: STANDBY_A.port, fullsync_level: 1, wait_relay_ms: 0 })).toMatchObject({ already_master: true });
    const repointed = await ha[STANDBY_B.agent].repointStandby({ op_id: 'repoint-b', port: STANDBY_B.port, master_host: STANDBY_A.host, master_port: STANDBY_A.port, replication: secrets.replication, fullsync_level: 1 });
    expect(repointed).toMatchObject({ io_running: true, sql_running: true });
    await insert(STANDBY_A, 50, 60);
    const newMaster = await status(STANDBY_A);
    expect(newMaster).toMatchObject({ is_replica: false, read_only: false });
    expect((await ha[STANDBY_B.agent].waitForGtid(STANDBY_B.port, newMaster.gtid_binlog_pos, 10_000)).reached).toBe(true);
    expect(await count(STANDBY_B)).toBe(60);
  }, 60_000);

  it('the fenced old master, with nothing errant, is started read-only and re-pointed as a standby that replicates', async () => {
    const promotedAt = (await status(STANDBY_B)).gtid_slave_pos;
    const repointed = await ha[OLD_MASTER.agent].repointStandby({ op_id: 'rejoin-old', port: OLD_MASTER.port, master_host: STANDBY_A.host, master_port: STANDBY_A.port, replication: secrets.replication, fullsync_level: 1 });
    expect(repointed).toMatchObject({ io_running: true, sql_running: true });
    const old = await status(OLD_MASTER);
    expect(old).toMatchObject({ running: true, read_only: true, is_replica: true, fenced: false, desired_state: 'running' });
    expect(gtidsBeyond(old.gtid_binlog_pos, promotedAt)).toEqual([]);
    await insert(STANDBY_A, 60, 70);
    const master = await status(STANDBY_A);
    expect((await ha[OLD_MASTER.agent].waitForGtid(OLD_MASTER.port, master.gtid_binlog_pos, 10_000)).reached).toBe(true);
    expect(await count(OLD_MASTER)).toBe(70);
  }, 60_000);

  it('refuses a malformed GTID and waits no longer than asked', async () => {
    await expect(ha[STANDBY_B.agent].waitForGtid(STANDBY_B.port, "0-1-1'; DROP", 100)).rejects.toThrow(/not a GTID position/);
    const far = await ha[STANDBY_B.agent].waitForGtid(STANDBY_B.port, '0-12-999999', 300);
    expect(far.reached).toBe(false);
  });
});
