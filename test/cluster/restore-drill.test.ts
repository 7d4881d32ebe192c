// The restore drill, on real engines: a cluster of 2 shards receives rows carrying their
// insert time through a compute node; a full backup (manual_backup_cluster), more writes,
// a switch of one shard's master to a standby, more writes, and cluster_restore into a new
// cluster at a time T between two known writes. On the destination each table's row count
// and checksum equal the source's as of T (rows written before T present, rows written
// after T absent), on its masters and standbys, and its compute node serves the rows and
// the views and functions made on the source's compute node.
// Before that, the same restore from a backup set whose file was altered is refused before
// anything is written, also when the manifest was rewritten to match (the sealed records'
// tags catch it). The storage encrypts (the default): a byte search over its directory finds
// none of the rows, which its objects hold once opened with their keys. The restore that
// succeeds comes after a key rotation, of the set made before it.

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterRecord } from '@kcm/manager';
import { emitRaw, waitForJobEnd } from '../helpers/emit-client';
import { sleep } from '../manager/helpers/processes';
import { HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './machines';
import { openTestAccounts, testSecretBox } from '../helpers/secrets';
import { openKek, unwrapDataKey } from '../../services/manager/src/secrets/backup-keys';
import { openAll } from '../../services/agent/src/capabilities/storage/sealed-stream';

const AGENT_PORT = 58160;
const MEMBER = '127.0.1.72:58172';
const DB = 'postgres_$$_public';
/** Table -> the shard (index) it lives on. */
const TABLES = [['orders', 0], ['items', 1]] as const;

type Endpoint = { host: string; port: number };

describe('restore drill: cluster_restore to a point in time between two known writes (real engines)', () => {
  let f: ClusterFixture;
  let src: ClusterRecord;
  let dst: ClusterRecord;
  let computer: { user: string; password: string };
  let restoreTime = 0;
  let backupKeys: string[] = [];

  const cluster = (id: string) => f.manager.store.state().clusters[id];
  const masterOf = (c: ClusterRecord, i: number): Endpoint => {
    const shard = Object.values(c.shards).sort((a, b) => Number(a.id) - Number(b.id))[i];
    const m = shard.nodes[shard.masterNodeId];
    return { host: m.hostaddr, port: m.port };
  };
  const nodesOf = (c: ClusterRecord, i: number): Endpoint[] => {
    const shard = Object.values(c.shards).sort((a, b) => Number(a.id) - Number(b.id))[i];
    return Object.values(shard.nodes).map((n) => ({ host: n.hostaddr, port: n.port }));
  };
  const compOf = (c: ClusterRecord): Endpoint => {
    const comp = Object.values(c.comps)[0];
    return { host: comp.hostaddr, port: comp.port };
  };
  async function onShard<T>(c: ClusterRecord, at: Endpoint, work: (conn: mysql.Connection) => Promise<T>): Promise<T> {
    const conn = await mysql.createConnection({ host: at.host, port: at.port, ...openTestAccounts(c.accounts).storage, connectTimeout: 5000 });
    try {
      return await work(conn);
    } finally {
      await conn.end();
    }
  }
  async function onComp<T>(at: Endpoint, work: (c: pg.Client) => Promise<T>): Promise<T> {
    const c = new pg.Client({ host: at.host, port: at.port, user: computer.user, password: computer.password, database: 'postgres' });
    c.on('error', () => {});
    await c.connect();
    try {
      return await work(c);
    } finally {
      await c.end();
    }
  }
  /** Row count and an order-independent checksum of a table, optionally of rows inserted before a time (ms). */
  const summary = (c: ClusterRecord, at: Endpoint, table: string, beforeMs?: number) =>
    onShard(c, at, async (conn) => {
      const where = beforeMs === undefined ? '' : ` WHERE at < ${Number(beforeMs)}`;
      const [rows] = await conn.query(`SELECT COUNT(*) AS n, COALESCE(BIT_XOR(CRC32(CONCAT_WS('|', id, at, v))), 0) AS checksum FROM \`${DB}\`.${table}${where}`);
      const r = (rows as { n: number; checksum: string | number }[])[0];
      return { n: Number(r.n), checksum: String(r.checksum) };
    });
  async function insertThroughComp(from: number, to: number): Promise<void> {
    await onComp(compOf(src), async (c) => {
      for (let id = from; id < to; id++) {
        for (const [table] of TABLES) await c.query(`INSERT INTO public.${table} (id, at, v) VALUES ($1, $2, $3)`, [id, Date.now(), `${table}-${id}`]);
      }
    });
  }
  async function runJob(jobType: string, paras: Record<string, unknown>, timeoutMs: number) {
    return f.runJob(jobType, paras, timeoutMs);
  }

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER });
    await registerMachines(f);
    const storage = await runJob('create_backup_storage', { name: 'drill', stype: 'fs', hostaddr: HOSTS[2], port: String(AGENT_PORT), path: path.join(f.tmp, 'backups') }, 30_000);
    expect(storage.status, storage.error_info).toBe('done');
  }, 120_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  it('two clusters of 2 shards are created, and rows carrying their insert time go into the source through its compute node', async () => {
    const [a, b] = await Promise.all([
      runJob('create_cluster', clusterParas({ nick_name: 'source', shards: '2', computer_iplists: [HOSTS[0]] }), 300_000),
      runJob('create_cluster', clusterParas({ nick_name: 'restored', shards: '2', computer_iplists: [HOSTS[1]] }), 300_000),
    ]);
    expect(a.status, a.error_info).toBe('done');
    expect(b.status, b.error_info).toBe('done');
    src = cluster(String(a.attachment!.cluster_id));
    dst = cluster(String(b.attachment!.cluster_id));
    computer = openTestAccounts(src.accounts).computer;
    for (const [table, shard] of TABLES) {
      await onShard(src, masterOf(src, shard), async (c) => {
        await c.query(`CREATE DATABASE IF NOT EXISTS \`${DB}\``);
        await c.query(`CREATE TABLE \`${DB}\`.${table} (id INT PRIMARY KEY, at BIGINT NOT NULL, v VARCHAR(40) NOT NULL) ENGINE=InnoDB`);
      });
    }
    await waitUntil('both tables on the source compute node', () => onComp(compOf(src), async (c) => {
      const { rows } = await c.query(`SELECT count(*)::int AS n FROM information_schema.foreign_tables WHERE foreign_table_schema = 'public'`);
      return rows[0].n === 2 ? true : undefined;
    }), 20_000);
    await insertThroughComp(1, 21);
    // The compute catalog: objects only the compute node holds, which the restore puts back.
    await onComp(compOf(src), async (c) => {
      await c.query('CREATE VIEW public.recent_orders AS SELECT id, v FROM public.orders WHERE id > 10');
      await c.query(`CREATE FUNCTION public.twice(i integer) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT i * 2'`);
    });
  }, 360_000);

  it('a full backup of the source ends done, with every shard in the backup set', async () => {
    const reply = await runJob('manual_backup_cluster', { cluster_id: src.id }, 180_000);
    expect(reply.status, reply.error_info).toBe('done');
    const set = Object.values(f.manager.store.state().backupSets).find((s) => s.clusterId === src.id)!;
    expect(set.shards).toHaveLength(2);
    backupKeys = set.shards.map((s) => s.key);
    // Checksums at backup time (what a restore drill compares): each shard was backed up from
    // a standby held at the set's position, and records its user table as of that point; with
    // nothing written since, the master's CHECKSUM TABLE now is the recorded figure.
    for (const [table, shardIndex] of TABLES) {
      const shard = set.shards.find((s) => s.shardId === Object.values(src.shards).sort((a, b) => Number(a.id) - Number(b.id))[shardIndex].id)!;
      expect(shard.sourceWasMaster).toBe(false);
      expect(shard.checksumsOmitted).toBeUndefined();
      const now = await onShard(src, masterOf(src, shardIndex), async (c) => {
        const [rows] = await c.query(`CHECKSUM TABLE \`${DB}\`.${table}`);
        return String((rows as { Checksum: string | number }[])[0].Checksum);
      });
      expect(shard.tableChecksums).toEqual([{ database: DB, table, rows: 20, checksum: now }]);
    }
  }, 200_000);

  it('writes after the backup, a switch of the first shard\'s master, more writes, a time T, and writes after T', async () => {
    // Rows 21-30 come after the backup and before T, so the restore replays them from the
    // archived binlogs: 21-25 written on the first shard's old master, 26-30 on the standby
    // that took over from it. The archive has to follow the master to bring both back.
    await insertThroughComp(21, 26);
    const shard = Object.values(src.shards).sort((a, b) => Number(a.id) - Number(b.id))[0];
    const oldMaster = masterOf(src, 0);
    const standby = nodesOf(src, 0).find((n) => n.host !== oldMaster.host || n.port !== oldMaster.port)!;
    const switched = await runJob('manual_switch', { cluster_id: src.id, shard_id: shard.id, master_hostaddr: `${oldMaster.host}_${oldMaster.port}`, assign_hostaddr: `${standby.host}_${standby.port}` }, 60_000);
    expect(switched.status, switched.error_info).toBe('done');
    src = cluster(src.id);
    expect(masterOf(src, 0)).toEqual(standby);
    await insertThroughComp(26, 31);
    restoreTime = Math.floor(Date.now() / 1000) + 1;
    await sleep(restoreTime * 1000 + 1100 - Date.now());
    await insertThroughComp(31, 41); // after T: must not come back
  }, 60_000);

  it('a backup set whose file was altered is refused with a clear error before anything is written', async () => {
    const file = path.join(f.tmp, 'backups', backupKeys[0]);
    const original = await readFile(file);
    const altered = Buffer.from(original);
    altered[Math.floor(altered.length / 2)] ^= 0x01;
    await writeFile(file, altered);
    try {
      const reply = await submitRestore();
      expect(reply.status).toBe('failed');
      expect(reply.error_info).toMatch(/step 1 of \d+ \(verify the backup set and the empty destination\) failed: .*backup set refused, its files do not match their checksums \(cluster_\d+\/backup_\d+\/shard_\d+\.mbstream: /);
    } finally {
      await writeFile(file, original);
    }
    // Nothing was written: the destination's masters still hold no table.
    for (const i of [0, 1]) {
      const tables = await onShard(dst, masterOf(dst, i), async (c) => (await c.query(`SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE '%\\_$$\\_%'`))[0] as { n: number }[]);
      expect(Number(tables[0].n)).toBe(0);
    }
  }, 120_000);

  it('a flipped byte in a sealed object whose manifest was rewritten to match is refused by its tags before anything is written', async () => {
    // Someone who can write the storage directory alters a byte and the manifest's sha256:
    // only the sealed records' tags can tell (docs/backup-encryption.md).
    const file = path.join(f.tmp, 'backups', backupKeys[0]);
    const manifestFile = `${file}.manifest.json`;
    const [original, manifest] = await Promise.all([readFile(file), readFile(manifestFile, 'utf8')]);
    expect(JSON.parse(manifest).meta).toMatchObject({ enc: 'kcmseal1-aes-256-gcm', enc_kek_id: expect.stringMatching(/^kek_/) });
    const altered = Buffer.from(original);
    altered[Math.floor(altered.length / 2)] ^= 0x01;
    await writeFile(file, altered);
    await writeFile(manifestFile, JSON.stringify({ ...JSON.parse(manifest), sha256: createHash('sha256').update(altered).digest('hex') }));
    const before = await Promise.all([0, 1].map((i) => onShard(dst, masterOf(dst, i), async (c) => (await c.query('SELECT @@gtid_binlog_pos AS pos'))[0])));
    try {
      const reply = await submitRestore();
      expect(reply.status).toBe('failed');
      expect(reply.error_info).toMatch(/step 1 of \d+ \(verify the backup set and the empty destination\) failed: .*backup set refused.*shard_\d+\.mbstream: its sealed records do not authenticate: record \d+ .*fails authentication/);
    } finally {
      await writeFile(file, original);
      await writeFile(manifestFile, manifest);
    }
    // Nothing was written: the destination's masters hold no table and are where they were.
    for (const i of [0, 1]) {
      const tables = await onShard(dst, masterOf(dst, i), async (c) => (await c.query(`SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE '%\\_$$\\_%'`))[0] as { n: number }[]);
      expect(Number(tables[0].n)).toBe(0);
      expect(await onShard(dst, masterOf(dst, i), async (c) => (await c.query('SELECT @@gtid_binlog_pos AS pos'))[0])).toEqual(before[i]);
    }
  }, 120_000);

  /** Submits the restore once the source's archive reaches T (archiving runs every few seconds). */
  async function submitRestore() {
    const paras = { src_cluster_id: src.id, dst_cluster_id: dst.id, restore_time: String(restoreTime) };
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ack = await emitRaw(MEMBER, 'cluster_restore', paras);
      if (ack.error_code === '0') return waitForJobEnd([MEMBER], ack.job_id, 240_000);
      if (!/beyond the archived binlogs/.test(ack.error_info) || Date.now() > deadline) throw new Error(`cluster_restore refused: ${ack.error_info}`);
      await sleep(500);
    }
  }

  it('rotate_backup_key makes a new key active; the old one stays, and cannot be retired while the backup set needs it', async () => {
    const before = f.manager.store.state().backupStorages.drill.encryption!;
    const rotated = await runJob('rotate_backup_key', { name: 'drill' }, 30_000);
    expect(rotated.status, rotated.error_info).toBe('done');
    const after = f.manager.store.state().backupStorages.drill.encryption!;
    expect(after.activeKekId).not.toBe(before.activeKekId);
    expect(rotated.attachment).toEqual({ name: 'drill', active_kek_id: after.activeKekId, kek_ids: `${before.activeKekId},${after.activeKekId}` });
    const set = Object.values(f.manager.store.state().backupSets).find((s) => s.clusterId === src.id)!;
    expect(set.shards.map((s) => s.sealed?.kekId)).toEqual([before.activeKekId, before.activeKekId]);
    const retire = await emitRaw(MEMBER, 'rotate_backup_key', { name: 'drill', retire_kek_id: before.activeKekId });
    expect(retire.error_info).toMatch(/paras\.retire_kek_id: \d+ kept object\(s\) of backup storage drill need kek_[0-9a-f]{8} to be restored/);
  }, 60_000);

  it('cluster_restore to T (of the set made before the rotation) ends done; each table equals the source as of T on every destination node', async () => {
    const started = Date.now();
    const reply = await submitRestore();
    console.log(`cluster_restore (2 shards x 3 nodes) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(reply.status, reply.error_info).toBe('done');
    expect(reply.attachment).toMatchObject({ src_cluster_id: src.id, dst_cluster_id: dst.id, restore_time: String(restoreTime) });
    const catalog = (reply.attachment as { list_catalog: { comp_id: string; database: string; objects: string[] }[] }).list_catalog;
    expect(catalog.find((c) => c.database === 'postgres')).toMatchObject({ comp_id: Object.values(dst.comps)[0].id, objects: ['FUNCTION public twice(integer)', 'VIEW public recent_orders'] });
    for (const [table, shard] of TABLES) {
      const expected = await summary(src, masterOf(src, shard), table, restoreTime * 1000);
      expect(expected.n).toBe(30); // ids 1-30: before T; 31-40 came after
      expect(await summary(dst, masterOf(dst, shard), table)).toEqual(expected);
      for (const node of nodesOf(dst, shard)) {
        await waitUntil(`${table} as of T on ${node.host}:${node.port}`, async () => {
          const got = await summary(dst, node, table);
          return got.n === expected.n && got.checksum === expected.checksum ? true : undefined;
        }, 15_000);
      }
    }
  }, 300_000);

  it('the destination\'s compute node serves the restored rows', async () => {
    computer = openTestAccounts(dst.accounts).computer;
    for (const [table] of TABLES) {
      const rows = await waitUntil(`${table} through the destination compute node`, () => onComp(compOf(dst), async (c) => {
        const r = (await c.query(`SELECT count(*)::int AS n, max(id)::int AS max FROM public.${table}`)).rows[0];
        return r.n === 30 ? r : undefined;
      }), 20_000);
      expect(rows).toEqual({ n: 30, max: 30 });
    }
    // The compute catalog came back too, owned by the destination's compute account, over the restored rows.
    const restored = await onComp(compOf(dst), async (c) => (await c.query(`SELECT (SELECT count(*)::int FROM public.recent_orders) AS recent, public.twice(21) AS twice, (SELECT viewowner FROM pg_views WHERE viewname = 'recent_orders') AS owner`)).rows[0]);
    expect(restored).toEqual({ recent: 20, twice: 42, owner: computer.user });
  }, 60_000);

  it('a byte search over the whole storage directory finds none of the rows, which the same objects hold once opened with their keys', async () => {
    const root = path.join(f.tmp, 'backups');
    const files = (await readdir(root, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
    const markers = TABLES.flatMap(([table]) => Array.from({ length: 40 }, (_, i) => Buffer.from(`${table}-${i + 1}`)));
    const stored = await Promise.all(files.map((file) => readFile(file)));
    const found = markers.filter((m) => stored.some((bytes) => bytes.includes(m))).map(String);
    expect(files.filter((file) => file.includes('/binlogs/')).length).toBeGreaterThan(0);
    expect(found).toEqual([]);
    // The search can find them: the first shard's backup and its archived binlogs, opened
    // with their data keys (unwrapped by the storage's KEK) and decompressed, hold its rows.
    const state = f.manager.store.state();
    const storage = state.backupStorages.drill;
    const open = (sealed: { kekId: string; wrappedKey: string } | undefined, bytes: Buffer) => {
      const kek = openKek(testSecretBox(), storage.encryption!.keks.find((k) => k.id === sealed!.kekId)!.sealed);
      return openAll(unwrapDataKey(kek, sealed!.kekId, sealed!.wrappedKey), bytes);
    };
    const set = Object.values(state.backupSets).find((s) => s.clusterId === src.id)!;
    const shard = set.shards[0];
    const mbstream = execFileSync('zstd', ['-d', '-c'], { input: open(shard.sealed, await readFile(path.join(root, shard.key))), maxBuffer: 1 << 30 });
    expect(mbstream.includes(Buffer.from('orders-20'))).toBe(true);
    const archive = Object.values(state.binlogArchives).find((a) => a.clusterId === src.id && a.shardId === shard.shardId)!;
    const binlogs = Buffer.concat(await Promise.all(archive.files.map(async (b) => open(b.sealed, await readFile(path.join(root, b.key))))));
    expect(binlogs.includes(Buffer.from('orders-25'))).toBe(true);
  }, 60_000);
});
