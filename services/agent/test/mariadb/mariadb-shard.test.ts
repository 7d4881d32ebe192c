// Real engines, through the gRPC agent API only: three agents on 127.0.2.1-3 build a shard
// (one semi-sync master, two GTID standbys), lose a standby and rebuild it from the other
// standby's mariabackup stream, seed a fourth standby, and remove an instance.

import { access, readFile, stat } from 'node:fs/promises';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processAlive } from '../../src/ops/exec';
import type { MariaDbBackupSource, MariaDbInstanceReply, MariaDbProbeReply, MariaDbRebuildRequest } from '@kcm/agent-api';
import { AGENT_PORT, allSecretValues, HOSTS, secrets, startShardFixture, type ShardFixture } from './shard-fixture';
import { useTestTls } from '../../../../test/helpers/pki';

interface Node {
  host: string;
  port: number;
  serverId: number;
  /** Index of the agent (and host) that serves it. */
  agent: number;
}

const [MASTER, STANDBY_A, STANDBY_B, SEEDED]: Node[] = [
  { host: HOSTS[0], port: 57101, serverId: 1, agent: 0 },
  { host: HOSTS[1], port: 57102, serverId: 2, agent: 1 },
  { host: HOSTS[2], port: 57103, serverId: 3, agent: 2 },
  { host: HOSTS[2], port: 57104, serverId: 4, agent: 2 },
];
const DB = 'app_$$_public';
const PV_LIMIT_MB = 4;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function storageConn(node: { host: string; port: number }) {
  return mysql.createConnection({ host: node.host, port: node.port, ...secrets.storage, connectTimeout: 5000 });
}

async function rowCount(node: { host: string; port: number }): Promise<number> {
  const conn = await storageConn(node);
  try {
    const [rows] = await conn.query(`SELECT COUNT(*) AS n FROM \`${DB}\`.orders`);
    return Number((rows as { n: number }[])[0].n);
  } finally {
    await conn.end();
  }
}

async function waitForRows(node: { host: string; port: number }, expected: number): Promise<number> {
  const deadline = Date.now() + 15_000;
  let seen = -1;
  while (Date.now() < deadline) {
    seen = await rowCount(node).catch(() => -1);
    if (seen === expected) return seen;
    await sleep(200);
  }
  return seen;
}

async function waitFor(condition: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await sleep(50);
  }
}

async function insertOrders(from: number, to: number): Promise<void> {
  const conn = await storageConn(MASTER);
  try {
    for (let i = from; i < to; i++) await conn.query(`INSERT INTO \`${DB}\`.orders (id, item) VALUES (?, ?)`, [i, `item-${i}`]);
  } finally {
    await conn.end();
  }
}

/** Polls the node's probe until `ok` holds; fails with the last probe after `timeoutMs`. */
async function waitForProbe(node: Node, ok: (p: MariaDbProbeReply) => boolean, timeoutMs: number): Promise<MariaDbProbeReply> {
  const deadline = Date.now() + Math.max(timeoutMs, 0);
  let last: MariaDbProbeReply | undefined;
  while (Date.now() < deadline) {
    last = await f.clients[node.agent].probe(node.port).catch(() => undefined);
    if (last && ok(last)) return last;
    await sleep(100);
  }
  throw new Error(`${node.host}:${node.port} not as expected within ${timeoutMs} ms; last probe: ${JSON.stringify(last)}`);
}

function source(node: Node, isMaster: boolean): MariaDbBackupSource {
  return { agent_address: `${node.host}:${AGENT_PORT}`, hostaddr: node.host, port: node.port, is_master: isMaster };
}

let f: ShardFixture;

describe('MariaDB storage instances through the agent API (real mariadbd)', () => {
  const installed = new Map<number, MariaDbInstanceReply>();

  beforeAll(async () => {
    // Mutual TLS, as deployed: the rebuild's copy then crosses the source agent's data plane,
    // so its pv_limit check below holds the plane's throttle to account.
    useTestTls([...HOSTS]);
    f = await startShardFixture();
  });

  afterAll(async () => {
    await f?.close();
  });

  const rebuildRequest = (opId: string, target: Node, sources: MariaDbBackupSource[], extra: Partial<MariaDbRebuildRequest>): MariaDbRebuildRequest => ({
    op_id: opId,
    spec: f.spec(target.port, target.serverId),
    admin: secrets.admin,
    sources,
    allow_replica_delay_s: 30,
    allow_pull_from_master: false,
    pv_limit_mb: PV_LIMIT_MB,
    need_backup: false,
    master_host: MASTER.host,
    master_port: MASTER.port,
    replication: secrets.replication,
    ...extra,
  });

  it('installs three instances, one per host address, in parallel', async () => {
    const replies = await Promise.all(
      [MASTER, STANDBY_A, STANDBY_B].map((n) => f.clients[n.agent].install(f.installRequest(`install-${n.port}`, n.port, n.serverId))),
    );
    for (const [i, n] of [MASTER, STANDBY_A, STANDBY_B].entries()) {
      expect(replies[i]).toMatchObject({ port: n.port, state: 'online' });
      expect(processAlive(replies[i].pid)).toBe(true);
      installed.set(n.port, replies[i]);
      const probe = await f.clients[n.agent].probe(n.port);
      expect(probe.state).toBe('online');
    }
  }, 150_000);

  it('makes a semi-sync master and two GTID standbys with both replication threads running', async () => {
    const master = await f.clients[MASTER.agent].configureReplication({
      op_id: 'repl-master', port: MASTER.port, role: 'master', master_host: '', master_port: 0, replication: secrets.replication, fullsync_level: 1,
    });
    expect(master).toEqual({ role: 'master', semi_sync_master: true, semi_sync_slave: false, read_only: false });
    for (const n of [STANDBY_A, STANDBY_B]) {
      const standby = await f.clients[n.agent].configureReplication({
        op_id: `repl-${n.port}`, port: n.port, role: 'standby', master_host: MASTER.host, master_port: MASTER.port, replication: secrets.replication, fullsync_level: 1,
      });
      expect(standby).toEqual({ role: 'standby', semi_sync_master: false, semi_sync_slave: true, read_only: true });
      const probe = await f.clients[n.agent].probe(n.port);
      expect(probe).toMatchObject({ state: 'online', is_replica: true, io_running: true, sql_running: true, last_error: '', master_host: MASTER.host, master_port: MASTER.port, semi_sync_master: false });
    }
    const masterProbe = await f.clients[MASTER.agent].probe(MASTER.port);
    expect(masterProbe).toMatchObject({ is_replica: false, semi_sync_master: true, read_only: false });
    expect(masterProbe.semi_sync_master_clients).toBe(2);
  }, 60_000);

  it('rows written on the master through the storage account are read on both standbys', async () => {
    const conn = await storageConn(MASTER);
    await conn.query(`CREATE DATABASE \`${DB}\``);
    await conn.query(`CREATE TABLE \`${DB}\`.orders (id INT PRIMARY KEY, item VARCHAR(40)) ENGINE=InnoDB`);
    // The storage account reaches only the cluster's databases.
    await expect(conn.query('SELECT COUNT(*) FROM mysql.user')).rejects.toThrow(/denied/);
    await conn.end();
    const started = performance.now();
    await insertOrders(0, 200);
    const commitMs = (performance.now() - started) / 200;
    expect(commitMs).toBeLessThan(1000); // semi-sync acks arrive: no 10 s timeout per commit
    expect(await waitForRows(STANDBY_A, 200)).toBe(200);
    expect(await waitForRows(STANDBY_B, 200)).toBe(200);
    const standbyConn = await storageConn(STANDBY_A);
    await expect(standbyConn.query(`INSERT INTO \`${DB}\`.orders VALUES (9999, 'x')`)).rejects.toThrow(/read-only/);
    await standbyConn.end();
  }, 60_000);

  it('reads instance variables that reflect the generated my.cnf', async () => {
    const { variables } = await f.clients[MASTER.agent].variables(MASTER.port, ['server_id', 'innodb_buffer_pool_size', 'binlog_format', 'gtid_strict_mode', 'tmpdir']);
    const byName = Object.fromEntries(variables.map((v) => [v.name, v.value]));
    expect(byName).toMatchObject({ server_id: '1', innodb_buffer_pool_size: String(64 * 2 ** 20), binlog_format: 'ROW', gtid_strict_mode: 'ON' });
    expect(byName.tmpdir).toBe(`${f.tmp}/data/${MASTER.port}/tmp`);
  });

  it('instances outlive an agent restart; a stopped standby started again resumes replicating', async () => {
    const before = await f.clients[MASTER.agent].probe(MASTER.port);
    await f.restartAgent(MASTER.agent);
    expect(await f.clients[MASTER.agent].probe(MASTER.port)).toMatchObject({ state: 'online', pid: before.pid, semi_sync_master: true });
    await f.restartAgent(STANDBY_A.agent);
    expect(await f.clients[STANDBY_A.agent].stop('stop-57102', STANDBY_A.port)).toMatchObject({ state: 'stopped' });
    await insertOrders(200, 210); // semi-sync falls back to the other standby's ack
    const started = await f.clients[STANDBY_A.agent].start('start-57102', STANDBY_A.port);
    expect(started.state).toBe('online');
    expect(await waitForRows(STANDBY_A, 210)).toBe(210);
    expect(await f.clients[STANDBY_A.agent].probe(STANDBY_A.port)).toMatchObject({ io_running: true, sql_running: true, read_only: true, semi_sync_master: false });
  }, 60_000);

  it('a standby mariadbd killed with SIGKILL is restarted by its agent and replicating again within 10 s', async () => {
    const before = await f.clients[STANDBY_B.agent].probe(STANDBY_B.port);
    expect(before).toMatchObject({ state: 'online', supervisor_restarts: 0, desired_state: 'running' });
    process.kill(before.pid, 'SIGKILL');
    const killed = Date.now();
    while (processAlive(before.pid)) await sleep(20);
    // Right after the kill nothing answers on it (a restart may already be under way).
    expect((await f.clients[STANDBY_B.agent].probe(STANDBY_B.port)).state).toBe('offline');
    const back = await waitForProbe(STANDBY_B, (p) => p.state === 'online' && p.io_running && p.sql_running && p.supervisor_restarts === 1, 10_000);
    console.log(`killed standby replicating again ${Date.now() - killed} ms after SIGKILL`);
    expect(back).toMatchObject({ supervisor_restarts: 1, last_error: '', read_only: true });
    expect(back.pid).not.toBe(before.pid);
    await insertOrders(210, 215);
    expect(await waitForRows(STANDBY_B, 215)).toBe(215);
    expect(f.logLines.join('')).toContain('instance restarted by the supervisor');
  }, 30_000);

  it('rebuilds the killed standby from the healthy standby, keeping its old data, and it replicates again', async () => {
    const reply = await f.clients[STANDBY_B.agent].rebuildStandby(
      rebuildRequest('rebuild-57103', STANDBY_B, [source(MASTER, true), source(STANDBY_A, false)], { need_backup: true }),
    );
    expect(reply).toMatchObject({ source_hostaddr: STANDBY_A.host, source_port: STANDBY_A.port });
    expect(reply.gtid_pos).toMatch(/^0-1-\d+$/);
    expect((await stat(`${reply.kept_old_data}/data/ibdata1`)).isFile()).toBe(true);
    // pv_limit holds: the copy took at least bytes / limit (10% slack for timer rounding).
    const mbPerS = reply.bytes / 2 ** 20 / (reply.transfer_ms / 1000);
    console.log(`rebuild copy: ${(reply.bytes / 2 ** 20).toFixed(1)} MB in ${reply.transfer_ms} ms = ${mbPerS.toFixed(2)} MB/s (limit ${PV_LIMIT_MB})`);
    expect(mbPerS).toBeLessThanOrEqual(PV_LIMIT_MB * 1.1);
    expect(f.logLines.join('')).toContain('compressed backup streamed over the data plane');
    // The copy crossed the plane compressed, and the limit held on the uncompressed bytes (above).
    const received = f.logLines.map((l) => JSON.parse(l) as { msg?: string; port?: number; bytes?: number; wire_bytes?: number; compression?: string }).find((l) => l.msg === 'copy received' && l.port === STANDBY_B.port);
    expect(received).toMatchObject({ compression: 'zstd', bytes: reply.bytes });
    expect(received!.wire_bytes).toBeLessThan(reply.bytes);
    expect(await rowCount(STANDBY_B)).toBe(215);
    const probe = await f.clients[STANDBY_B.agent].probe(STANDBY_B.port);
    expect(probe).toMatchObject({ state: 'online', io_running: true, sql_running: true, last_error: '', read_only: true, semi_sync_master: false });
    await insertOrders(215, 250);
    expect(await waitForRows(STANDBY_B, 250)).toBe(250);
  }, 90_000);

  it('refuses to copy from the master unless allow_pull_from_master', async () => {
    await expect(
      f.clients[SEEDED.agent].seedStandby(rebuildRequest('seed-refused', SEEDED, [source(MASTER, true)], { allow_pull_from_master: false })),
    ).rejects.toThrow(/no suitable backup source.*allow_pull_from_master is off/);
  });

  it('seeds a new fourth standby from the master backup stream: it has the rows and replicates', async () => {
    const reply = await f.clients[SEEDED.agent].seedStandby(
      rebuildRequest('seed-57104', SEEDED, [source(MASTER, true)], { allow_pull_from_master: true, pv_limit_mb: 0 }),
    );
    expect(reply).toMatchObject({ source_port: MASTER.port, kept_old_data: '' });
    expect(await rowCount(SEEDED)).toBe(250);
    await insertOrders(250, 260);
    expect(await waitForRows(SEEDED, 260)).toBe(260);
    const probe = await f.clients[SEEDED.agent].probe(SEEDED.port);
    expect(probe).toMatchObject({ state: 'online', io_running: true, sql_running: true, master_port: MASTER.port });
  }, 90_000);

  it('an install repeated with the same op_id returns the first result without a second effect', async () => {
    const first = installed.get(MASTER.port)!;
    const errorLog = `${f.tmp}/log/${MASTER.port}/error.log`;
    const startsBefore = (await readFile(errorLog, 'utf8')).split('ready for connections').length;
    const again = await f.clients[MASTER.agent].install(f.installRequest(`install-${MASTER.port}`, MASTER.port, MASTER.serverId));
    expect(again).toEqual(first);
    expect(processAlive(first.pid)).toBe(true);
    expect((await readFile(errorLog, 'utf8')).split('ready for connections').length).toBe(startsBefore);
    expect(await rowCount(MASTER)).toBe(260);
  });

  it('a master mariadbd killed with SIGKILL is back within 10 s, and both standbys replicate from it again', async () => {
    const before = await f.clients[MASTER.agent].probe(MASTER.port);
    process.kill(before.pid, 'SIGKILL');
    const killed = Date.now();
    await waitForProbe(MASTER, (p) => p.state === 'online' && p.pid !== before.pid && !p.read_only && p.semi_sync_master, 10_000);
    for (const n of [STANDBY_A, STANDBY_B]) await waitForProbe(n, (p) => p.io_running && p.sql_running, 10_000 - (Date.now() - killed));
    console.log(`killed master back and both standbys replicating ${Date.now() - killed} ms after SIGKILL`);
    await insertOrders(260, 270);
    expect(await waitForRows(STANDBY_A, 270)).toBe(270);
    expect(await waitForRows(STANDBY_B, 270)).toBe(270);
  }, 30_000);

  it('stops and removes an instance: no process, no directories', async () => {
    const { pid } = await f.clients[SEEDED.agent].probe(SEEDED.port);
    expect(await f.clients[SEEDED.agent].stop('stop-57104', SEEDED.port)).toMatchObject({ state: 'stopped', pid: 0 });
    expect(processAlive(pid)).toBe(false);
    expect((await f.clients[SEEDED.agent].probe(SEEDED.port)).state).toBe('offline');
    expect(await f.clients[SEEDED.agent].remove('remove-57104', SEEDED.port)).toMatchObject({ state: 'removed' });
    for (const dir of [`${f.tmp}/data/${SEEDED.port}`, `${f.tmp}/log/${SEEDED.port}`, `${f.tmp}/wal/${SEEDED.port}`]) {
      await expect(access(dir)).rejects.toThrow(/ENOENT/);
    }
    expect((await f.clients[SEEDED.agent].probe(SEEDED.port)).state).toBe('unknown');
  });

  it('with no standby left, a commit waits until a standby is back and has it: semi-sync never falls back to asynchronous', async () => {
    for (const n of [STANDBY_A, STANDBY_B]) await f.clients[n.agent].stop(`stop-all-${n.port}`, n.port);
    const writer = await storageConn(MASTER);
    const watcher = await storageConn(MASTER);
    try {
      let settled = false;
      const insert = writer.query(`INSERT INTO \`${DB}\`.orders (id, item) VALUES (300, 'no standby')`).finally(() => (settled = true));
      // Evidence that it waits for an acknowledgement, not a timer: its session's state on the master.
      await waitFor(async () => {
        const [rows] = await watcher.query(`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE STATE LIKE '%semi-sync ACK%'`);
        return Number((rows as { n: number }[])[0].n) === 1;
      });
      const [status] = await watcher.query(`SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_status'`);
      expect((status as { Value: string }[])[0].Value).toBe('ON');
      const [seen] = await watcher.query(`SELECT COUNT(*) AS n FROM \`${DB}\`.orders WHERE id = 300`);
      expect(Number((seen as { n: number }[])[0].n)).toBe(0); // AFTER_SYNC: not visible before a standby has it
      expect(settled).toBe(false);
      await f.clients[STANDBY_A.agent].start(`start-all-${STANDBY_A.port}`, STANDBY_A.port);
      await insert;
      expect(await waitForRows(STANDBY_A, 271)).toBe(271);
    } finally {
      await writer.end();
      await watcher.end();
    }
    await f.clients[STANDBY_B.agent].start(`start-all-${STANDBY_B.port}`, STANDBY_B.port);
    expect(await waitForRows(STANDBY_B, 271)).toBe(271);
  }, 60_000);

  it('no password appeared in any spawned command line or log line', async () => {
    const lines = [...f.seenCommandLines];
    // The sampler did see the tools run, so its silence about secrets means something.
    for (const tool of ['mariadbd', 'mariadb-install-db', 'mariabackup', 'mbstream']) expect(lines.some((l) => l.includes(tool))).toBe(true);
    for (const secret of allSecretValues) {
      for (const line of lines) expect(line).not.toContain(secret);
      for (const line of f.logLines) expect(line).not.toContain(secret);
    }
    expect(f.logLines.length).toBeGreaterThan(10);
    for (const n of [MASTER, STANDBY_A, STANDBY_B]) {
      const serverLog = await readFile(`${f.tmp}/log/${n.port}/error.log`, 'utf8');
      for (const secret of allSecretValues) expect(serverLog).not.toContain(secret);
    }
  });
});
