// Real mariadbd, mariabackup and mariadb-binlog, through the agent API only: the engine
// path of cluster_restore on one shard. A source instance's full backup and its closed
// binlogs go to an `fs` backup storage (agent to agent); a second instance, with another
// cluster's accounts, gets the backup back and the binlogs replayed up to a time T between
// two known writes: rows written before T are there, rows written after are not.

import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MariaDbRestoreAgentClient, StorageAgentClient, type MariaDbStoredObject } from '@kcm/agent-api';
import { AGENT_PORT, HOSTS, startShardFixture, type ShardFixture } from './shard-fixture';

const SRC = { host: HOSTS[0], port: 57131, agent: 0 };
const DST = { host: HOSTS[1], port: 57132, agent: 1 };
const DB = 'app_$$_public';
// Named as kcm names a cluster's accounts (jobs/credentials.ts): a restore drops the source's.
const srcAccounts = {
  admin: { user: 'kcm_admin_0000cafe', password: 'src-admin-Pw-1' },
  replication: { user: 'kcm_repl_0000cafe', password: 'src-repl-Pw-2' },
  storage: { user: 'storage_0000cafe', password: 'src-storage-Pw-3' },
};
const dstAccounts = {
  admin: { user: 'kcm_admin_0000beef', password: 'dst-admin-Pw-1' },
  replication: { user: 'kcm_repl_0000beef', password: 'dst-repl-Pw-2' },
  storage: { user: 'storage_0000beef', password: 'dst-storage-Pw-3' },
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let f: ShardFixture;
let storageRoot: string;
let storage: StorageAgentClient;
let restoreSrc: MariaDbRestoreAgentClient;
let restoreDst: MariaDbRestoreAgentClient;

async function sql<T>(node: { host: string; port: number }, account: { user: string; password: string }, work: (c: mysql.Connection) => Promise<T>): Promise<T> {
  const conn = await mysql.createConnection({ host: node.host, port: node.port, ...account, connectTimeout: 5000 });
  try {
    return await work(conn);
  } finally {
    await conn.end();
  }
}

async function insert(ids: number[]): Promise<void> {
  await sql(SRC, srcAccounts.storage, async (c) => {
    for (const id of ids) await c.query(`INSERT INTO \`${DB}\`.t VALUES (?, UNIX_TIMESTAMP())`, [id]);
  });
}

const ids = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
const stored = (key: string): MariaDbStoredObject => ({ storage_agent_address: `${HOSTS[2]}:${AGENT_PORT}`, root: storageRoot, key });

describe('point-in-time restore of one shard through the agents (real engines)', () => {
  let backupGtid = '';
  let restoreTime = 0;
  const archived: MariaDbStoredObject[] = [];

  beforeAll(async () => {
    f = await startShardFixture();
    storageRoot = path.join(await mkdtemp(path.join(os.tmpdir(), 'kcm-pitr-store-')), 'store');
    storage = new StorageAgentClient(`${HOSTS[2]}:${AGENT_PORT}`);
    await storage.open(storageRoot);
    restoreSrc = new MariaDbRestoreAgentClient(f.agents[SRC.agent].address);
    restoreDst = new MariaDbRestoreAgentClient(f.agents[DST.agent].address);
    await f.clients[SRC.agent].install({ op_id: 'install-src', spec: f.spec(SRC.port, 1), ...srcAccounts, storage_db_patterns: [] });
    await f.clients[DST.agent].install({ op_id: 'install-dst', spec: f.spec(DST.port, 11), ...dstAccounts, storage_db_patterns: [] });
    await sql(SRC, srcAccounts.storage, async (c) => {
      await c.query(`CREATE DATABASE \`${DB}\``);
      await c.query(`CREATE TABLE \`${DB}\`.t (id INT PRIMARY KEY, at BIGINT)`);
    });
  }, 180_000);

  afterAll(async () => {
    restoreSrc?.close();
    restoreDst?.close();
    storage?.close();
    await f?.close();
    if (storageRoot) await rm(path.dirname(storageRoot), { recursive: true, force: true });
  });

  it('backs up, keeps writing around a time T, and archives every closed binlog to storage', async () => {
    await insert(ids(0, 20));
    const backup = await storage.pullBackup({
      op_id: 'pitr-backup', root: storageRoot, key: 'cluster_1/backup_1/shard_1.mbstream',
      source: { agent_address: f.agents[SRC.agent].address, hostaddr: SRC.host, port: SRC.port, is_master: true }, pv_limit_mb: 0, meta: {},
    });
    backupGtid = backup.gtid_pos;
    expect(backupGtid).toMatch(/^0-1-\d+$/);
    // After the backup, before T: replayed, from two files (each replay starts at the instance's own position).
    await insert(ids(20, 25));
    await restoreSrc.listBinlogs(SRC.port, true);
    await insert(ids(25, 30));
    await restoreSrc.listBinlogs(SRC.port, true);
    await sleep(1100);
    restoreTime = Math.floor(Date.now() / 1000);
    await sleep(1100);
    await restoreSrc.listBinlogs(SRC.port, true); // the next file begins after T
    await insert(ids(30, 40)); // after T: must not come back
    const listing = await restoreSrc.listBinlogs(SRC.port, true);
    for (const file of listing.files.filter((b) => b.closed)) {
      const target = stored(`cluster_1/binlogs/shard_1/${listing.server_id}/${file.name}`);
      const reply = await restoreSrc.archiveBinlog({ op_id: `archive-${file.name}`, port: SRC.port, name: file.name, target });
      expect(reply.bytes).toBe(file.size);
      expect((await storage.verify(storageRoot, target.key)).ok).toBe(true);
      archived.push(target);
    }
    expect(archived.length).toBeGreaterThanOrEqual(3);
  }, 120_000);

  it('restores the backup onto another cluster\'s instance: its rows, its position, that cluster\'s accounts', async () => {
    const reply = await restoreDst.restoreFullBackup({
      op_id: 'pitr-restore', spec: f.spec(DST.port, 11), ...dstAccounts, objects: [stored('cluster_1/backup_1/shard_1.mbstream')],
    });
    expect(reply.gtid_pos).toBe(backupGtid);
    expect(await sql(DST, dstAccounts.storage, async (c) => ((await c.query(`SELECT COUNT(*) AS n FROM \`${DB}\`.t`))[0] as { n: number }[])[0].n)).toBe(20);
    // The source cluster's accounts came with the copy and are gone.
    await expect(sql(DST, srcAccounts.storage, async () => undefined)).rejects.toThrow(/Access denied/);
  }, 120_000);

  it('replays the archived binlogs up to T: rows before T are present, rows after T are absent', async () => {
    const reply = await restoreDst.replayBinlogs({ op_id: 'pitr-replay', port: DST.port, binlogs: archived, start_gtid: backupGtid, stop_time: restoreTime });
    // The file begun after T is not replayed; every one before it is.
    expect(reply.files).toBeGreaterThanOrEqual(2);
    expect(reply.files).toBeLessThan(archived.length);
    const rows = await sql(DST, dstAccounts.storage, async (c) => (await c.query(`SELECT id FROM \`${DB}\`.t ORDER BY id`))[0] as { id: number }[]);
    expect(rows.map((r) => r.id)).toEqual(ids(0, 30));
    // The replayed transactions kept their GTIDs: the restored instance continues the source's history.
    expect(reply.gtid_pos).toBe(`0-1-${Number(backupGtid.split('-')[2]) + 10}`);
  }, 120_000);

  it('a backup whose stored file was altered is refused while reading it back, and the instance keeps its data', async () => {
    const { writeFile, readFile } = await import('node:fs/promises');
    const file = path.join(storageRoot, 'cluster_1/backup_1/shard_1.mbstream');
    const bytes = await readFile(file);
    bytes[Math.floor(bytes.length / 2)] ^= 0xff;
    await writeFile(file, bytes);
    expect((await storage.verify(storageRoot, 'cluster_1/backup_1/shard_1.mbstream')).ok).toBe(false);
    await expect(
      restoreDst.restoreFullBackup({ op_id: 'pitr-restore-altered', spec: f.spec(DST.port, 11), ...dstAccounts, objects: [stored('cluster_1/backup_1/shard_1.mbstream')] }),
    ).rejects.toThrow();
    expect(await sql(DST, dstAccounts.storage, async (c) => ((await c.query(`SELECT COUNT(*) AS n FROM \`${DB}\`.t`))[0] as { n: number }[])[0].n)).toBe(30);
  }, 120_000);

  it('DropClusterDatabases (what a failed restore does) leaves no cluster database on the instance', async () => {
    const reply = await restoreDst.dropClusterDatabases('pitr-undo', DST.port);
    expect(reply.dropped).toEqual([DB]);
    const left = await sql(DST, dstAccounts.storage, async (c) => (await c.query(`SHOW DATABASES LIKE '%\\_$$\\_%'`))[0] as unknown[]);
    expect(left).toEqual([]);
  }, 60_000);
});
