// manual_backup_cluster on real engines: a one-member manager, three agents on 127.0.2.1-3,
// a cluster of 2 shards x 3 MariaDB nodes and 1 PostgreSQL compute node, backup storage a
// directory on host 1 served by its agent. The backup lands in storage with a checksum and
// a GTID per shard while writes go on; an altered stored file is refused by the verify a
// restore runs first.

import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StorageAgentClient } from '@kcm/agent-api';
import { KcmError, type ManualBackupClusterResult } from '@kcm/protocol';
import { openBackupStorage, requireIntact, type ClusterRecord } from '@kcm/manager';
import { backupGtid } from '@kcm/agent';
import { emit } from '../helpers/emit-client';
import { AGENT_PORT, HOSTS, MEMBER, startClusterFixture, type ClusterFixture, waitUntil } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './machines';
import { openTestAccounts } from '../helpers/secrets';

/** A stored zstd set's bytes decompressed (returned) and extracted with mbstream into `dir`. */
async function decompressAndExtract(stored: Buffer, dir: string): Promise<Buffer> {
  const mbstream = await new Promise<Buffer>((resolve, reject) => {
    const child = execFile('zstd', ['-d', '-q', '-c'], { encoding: 'buffer', maxBuffer: 1 << 30 }, (err, out) => (err ? reject(err) : resolve(out)));
    child.stdin!.end(stored);
  });
  await new Promise<void>((resolve, reject) => {
    const child = execFile('mbstream', ['-x', '-C', dir], (err) => (err ? reject(err) : resolve()));
    child.stdin!.end(mbstream);
  });
  return mbstream;
}

/**
 * Every file under a backup storage's directory, in each form a reader could get it in: as
 * stored, zstd-decompressed (shard streams), and a pg_dump archive rendered as SQL (catalog).
 */
async function storedObjects(root: string): Promise<{ key: string; forms: [string, Buffer][] }[]> {
  const files = (await readdir(root, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
  const objects: { key: string; forms: [string, Buffer][] }[] = [];
  for (const file of files) {
    const stored = await readFile(file);
    const forms: [string, Buffer][] = [['as stored', stored]];
    if (stored.subarray(0, 4).equals(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]))) {
      forms.push(['zstd-decompressed', await promisify(execFile)('zstd', ['-d', '-q', '-c', file], { encoding: 'buffer', maxBuffer: 1 << 30 }).then((r) => r.stdout)]);
    }
    if (stored.subarray(0, 5).toString('latin1') === 'PGDMP') forms.push(['rendered by pg_restore', execFileSync('/usr/bin/pg_restore', ['--file=-', file])]);
    objects.push({ key: path.relative(root, file), forms });
  }
  return objects;
}

const CREATE_PARAS = clusterParas({ nick_name: 'backed-up', shards: '2' });

describe('manual_backup_cluster on real engines (2 shards x 3 nodes, 1 compute node)', () => {
  let f: ClusterFixture;
  let cluster: ClusterRecord;
  let root: string;
  let backup: ManualBackupClusterResult;

  const storageAccount = () => openTestAccounts(cluster.accounts).storage;
  const master = (i: number) => {
    const s = Object.values(cluster.shards)[i];
    const m = s.nodes[s.masterNodeId];
    return { host: m.hostaddr, port: m.port };
  };
  const mysqlAt = (at: { host: string; port: number }) => mysql.createConnection({ host: at.host, port: at.port, user: storageAccount().user, password: storageAccount().password, connectTimeout: 5000 });

  beforeAll(async () => {
    f = await startClusterFixture();
    root = path.join(f.tmp, 'backups');
    await registerMachines(f);
    const created = await f.runJob('create_cluster', CREATE_PARAS, 300_000);
    expect(created.status, created.error_info).toBe('done');
    cluster = Object.values(f.manager.store.state().clusters)[0];
    for (const [i, table] of [[0, 'orders'], [1, 'items']] as const) {
      const c = await mysqlAt(master(i));
      await c.query('CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
      await c.query(`CREATE TABLE \`postgres_$$_public\`.${table} (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(200) NOT NULL) ENGINE=InnoDB`);
      for (let n = 0; n < 20; n++) await c.query(`INSERT INTO \`postgres_$$_public\`.${table} (note) VALUES (REPEAT('x', 200))`);
      await c.end();
    }
    const comp = Object.values(cluster.comps)[0];
    const { computer } = openTestAccounts(cluster.accounts);
    await waitUntil('the foreign tables on the compute node', async () => {
      const c = new pg.Client({ host: comp.hostaddr, port: comp.port, user: computer.user, password: computer.password, database: 'postgres' });
      c.on('error', () => {});
      await c.connect();
      try {
        const { rows } = await c.query("SELECT count(*)::int AS n FROM information_schema.foreign_tables WHERE foreign_table_schema = 'public'");
        return rows[0].n === 2 ? true : undefined;
      } finally {
        await c.end();
      }
    }, 20_000);
  }, 400_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  it('is refused until a backup storage is registered; create_backup_storage registers one on a host agent and get_backup_storage lists it', async () => {
    const refused = await emit(MEMBER, 'manual_backup_cluster', { cluster_id: cluster.id }).catch((e: { reply: { error_info: string } }) => e.reply);
    expect(refused.error_info).toMatch(/no backup storage is registered/);
    // In clear (encryption off): these tests read the stored objects' own format; the sealed
    // format is what restore-drill.test.ts checks (docs/backup-encryption.md).
    const reply = await f.runJob('create_backup_storage', { name: 'local', stype: 'fs', hostaddr: HOSTS[0], port: String(AGENT_PORT), path: root, encryption: 'off' });
    expect(reply.status, reply.error_info).toBe('done');
    expect(Number((reply.attachment as { free_bytes: string }).free_bytes)).toBeGreaterThan(0);
    const listed = await emit(MEMBER, 'get_backup_storage');
    expect(listed.attachment).toMatchObject({ list_backup_storage: [{ hostaddr: HOSTS[0], name: 'local', port: String(AGENT_PORT), stype: 'fs' }] });
  });

  it('backs up both shards from standbys into storage with a checksum and a GTID each, while writes go on unblocked', async () => {
    let writing = true;
    const stalls: number[] = [];
    let written = 0;
    const writer = (async () => {
      const c = await mysqlAt(master(0));
      while (writing) {
        const started = performance.now();
        await c.query("INSERT INTO `postgres_$$_public`.orders (note) VALUES ('during backup')");
        stalls.push(performance.now() - started);
        written++;
      }
      await c.end();
    })();
    const started = Date.now();
    const reply = await f.runJob('manual_backup_cluster', { cluster_id: cluster.id }, 300_000);
    writing = false;
    await writer;
    expect(reply.status, reply.error_info).toBe('done');
    backup = reply.attachment as ManualBackupClusterResult;
    const p99 = stalls.sort((a, b) => a - b)[Math.floor(stalls.length * 0.99)] ?? 0;
    console.log(`backup of 2 shards took ${((Date.now() - started) / 1000).toFixed(1)} s, ${backup.bytes} bytes; ${written} inserts meanwhile, p99 ${p99.toFixed(1)} ms`);
    expect(written).toBeGreaterThan(10);

    expect(backup.list_shard).toHaveLength(2);
    const client = new StorageAgentClient(`${HOSTS[0]}:${AGENT_PORT}`);
    try {
      for (const [i, shard] of backup.list_shard.entries()) {
        expect(shard.source_master).toBe('false');
        expect(shard.gtid_pos).toMatch(/^\d+-\d+-\d+(,\d+-\d+-\d+)*$/);
        const key = shard.location.replace(/^local:/, '');
        // The file on the storage host is what the result names, byte for byte.
        const bytes = await readFile(path.join(root, key));
        expect(bytes.length).toBe(Number(shard.bytes));
        expect(createHash('sha256').update(bytes).digest('hex')).toBe(shard.sha256);
        expect(await client.verify(root, key)).toMatchObject({ ok: true });
        // The GTID is one the shard's master has passed.
        const c = await mysqlAt(master(i));
        const [[row]] = (await c.query('SELECT @@gtid_binlog_pos AS pos')) as unknown as [[{ pos: string }]];
        await c.end();
        const seqOf = (pos: string) => Number(/(?:^|,)0-\d+-(\d+)/.exec(pos)?.[1] ?? -1);
        expect(seqOf(shard.gtid_pos)).toBeGreaterThan(0);
        expect(seqOf(shard.gtid_pos)).toBeLessThanOrEqual(seqOf(row.pos));
      }
    } finally {
      client.close();
    }
    // The catalog: the compute node's schema dump (pg_dump's custom format, which pg_restore reads) names the foreign tables.
    const catalog = backup.list_catalog.find((c) => c.database === 'postgres');
    expect(catalog?.location).toMatch(/\/catalog\/postgres\.pgdump$/);
    const sql = execFileSync('/usr/bin/pg_restore', ['--file=-', path.join(root, catalog!.location.replace(/^local:/, ''))], { encoding: 'utf8' });
    expect(sql).toMatch(/CREATE FOREIGN TABLE public\.orders/);
    expect(sql).toMatch(/CREATE FOREIGN TABLE public\.items/);

    // get_cluster_detail lists the set.
    const detail = await emit(MEMBER, 'get_cluster_detail', { cluster_name: cluster.name });
    expect((detail.attachment as { list_backup: ManualBackupClusterResult[] }).list_backup.map((b) => b.backup_id)).toEqual([backup.backup_id]);
  }, 300_000);

  it('no stored object of the backup set holds a cluster password in clear: the catalog dump keeps user mappings without their options (issue 35, item 4)', async () => {
    const accounts = openTestAccounts(cluster.accounts);
    const passwords = new Map(Object.entries(accounts).map(([role, account]) => [role, account.password]));
    const objects = await storedObjects(root);
    const setPrefix = backup.list_shard[0].location.replace(/^local:/, '').split('/').slice(0, 2).join('/');
    expect(objects.filter((o) => o.key.startsWith(`${setPrefix}/`)).map((o) => o.key).sort()).toEqual(
      expect.arrayContaining([...backup.list_shard, ...backup.list_catalog].map((o) => o.location.replace(/^local:/, ''))),
    );
    const found: string[] = [];
    for (const object of objects) {
      for (const [form, bytes] of object.forms) {
        for (const [role, password] of passwords) if (bytes.includes(Buffer.from(password, 'utf8'))) found.push(`${object.key} (${form}) holds the ${role} password`);
      }
    }
    expect(found).toEqual([]);
    // The restore needs no credential from the dump: the user mappings are there, bare.
    const catalog = backup.list_catalog.find((c) => c.database === 'postgres')!;
    const sql = execFileSync('/usr/bin/pg_restore', ['--file=-', path.join(root, catalog.location.replace(/^local:/, ''))], { encoding: 'utf8' });
    expect(sql).toMatch(/CREATE USER MAPPING FOR \S+ SERVER \S+;/);
    expect(sql).not.toMatch(/USER MAPPING[^;]*OPTIONS/);
  }, 120_000);

  it('a stored shard backup is an mbstream compressed at its source with zstd: it decompresses, extracts and carries the GTID the result names', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-extract-'));
    try {
      const shard = f.manager.store.state().backupSets[backup.backup_id].shards[1];
      expect(shard.compression).toBe('zstd');
      expect(shard.rawBytes).toBeGreaterThan(shard.bytes);
      const file = path.join(root, backup.list_shard[1].location.replace(/^local:/, ''));
      const mbstream = await decompressAndExtract(await readFile(file), dir);
      expect(mbstream.length).toBe(shard.rawBytes);
      // The position files mariabackup wrote into the stream: binlog position, and a standby's slave position.
      const read = (name: string) => readFile(path.join(dir, name), 'utf8').catch(() => '');
      const info = (await read('xtrabackup_binlog_info')) + (await read('xtrabackup_slave_info')) + (await read('mariadb_backup_binlog_info')) + (await read('mariadb_backup_slave_info'));
      expect(info).toContain(backup.list_shard[1].gtid_pos);
      // The source (a standby) piped its stream into zstd, so the recorded position came from
      // the info file of --extra-lsndir, not from the stream: it is exactly the one a restore
      // or rebuild reads from the extracted files, and the standby's replicated position.
      expect(backup.list_shard[1].source_master).toBe('false');
      expect(await backupGtid(dir)).toBe(backup.list_shard[1].gtid_pos);
      const slaveInfo = (await read('mariadb_backup_slave_info')) || (await read('xtrabackup_slave_info'));
      expect(/gtid_slave_pos\s*=\s*'([^']*)'/.exec(slaveInfo)?.[1]).toBe(backup.list_shard[1].gtid_pos);
      await promisify(execFile)('mariabackup', ['--prepare', `--target-dir=${dir}`], { maxBuffer: 1 << 24 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('a standby on the storage host is copied by the storage agent itself, one on another host over its data plane: both sets are whole and carry their position', async () => {
    const standbys = Object.values(cluster.shards).flatMap((s) => Object.values(s.nodes).filter((n) => n.id !== s.masterNodeId));
    const local = standbys.find((n) => n.hostaddr === HOSTS[0]);
    const remote = standbys.find((n) => n.hostaddr !== HOSTS[0]);
    expect(local && remote, 'a standby on the storage host and one elsewhere').toBeTruthy();
    const client = new StorageAgentClient(`${HOSTS[0]}:${AGENT_PORT}`);
    try {
      for (const [name, node] of [['local', local!], ['plane', remote!]] as const) {
        const key = `path-check/standby-${node.hostaddr}-${node.port}.mbstream`;
        const reply = await client.pullBackup({
          op_id: `path-check-${name}`, root, key, pv_limit_mb: 0, meta: {}, compression: 'zstd',
          source: { agent_address: `${node.hostaddr}:${AGENT_PORT}`, hostaddr: node.hostaddr, port: node.port, is_master: false },
        });
        expect(reply.compression).toBe('zstd');
        const stored = await readFile(path.join(root, key));
        expect(stored.length).toBe(reply.object.bytes);
        expect(createHash('sha256').update(stored).digest('hex')).toBe(reply.object.sha256);
        const logged = f.logLines.map((l) => JSON.parse(l) as { msg?: string; key?: string; path?: string }).find((l) => l.msg === 'backup stored' && l.key === key);
        expect(logged?.path, `${name}: the storage agent's log names how the bytes came`).toBe(name);
        const dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-path-check-'));
        try {
          const mbstream = await decompressAndExtract(stored, dir);
          expect(mbstream.length).toBe(reply.raw_bytes);
          expect(await backupGtid(dir)).toBe(reply.gtid_pos);
          await promisify(execFile)('mariabackup', ['--prepare', `--target-dir=${dir}`], { maxBuffer: 1 << 24 });
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      }
    } finally {
      client.close();
    }
  }, 180_000);

  it('a backup set whose file was altered is refused by the verify a restore runs first, naming the file', async () => {
    const record = f.manager.store.state().backupStorages.local;
    const storage = openBackupStorage(record);
    const keys = backup.list_shard.map((s) => s.location.replace(/^local:/, ''));
    try {
      await requireIntact(storage, keys);
      const file = path.join(root, keys[0]);
      const bytes = await readFile(file);
      bytes[Math.floor(bytes.length / 2)] ^= 0x01;
      await writeFile(file, bytes);
      const err = await requireIntact(storage, keys).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KcmError);
      expect((err as KcmError).errorName).toBe('DATA_CHECK_FAILED');
      expect((err as Error).message).toContain(`${keys[0]}: sha256 is`);
    } finally {
      storage.close();
    }
  });
});
