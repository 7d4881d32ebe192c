import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnPiped } from '../../src/ops/exec';
import { coalesced, rateLimited } from '../../src/capabilities/mariadb/backup/rate-limit';
import { backupGtid } from '../../src/capabilities/mariadb/backup/rebuild';
import { scrub } from '../../src/capabilities/mariadb/instance/sql';
import { checkAccount, checkSpec } from '../../src/capabilities/mariadb/instance/instance-layout';

async function* chunks(count: number, size: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < count; i++) yield Buffer.alloc(size, i);
}

describe('rate limit of a backup stream (pv_limit)', () => {
  it('2 MB at 4 MB/s takes about half a second and loses no byte', async () => {
    const started = performance.now();
    let total = 0;
    for await (const piece of rateLimited(chunks(32, 64 * 1024), 4 * 2 ** 20)) total += piece.length;
    const ms = performance.now() - started;
    expect(total).toBe(2 * 2 ** 20);
    expect(ms).toBeGreaterThanOrEqual(450);
    expect(ms).toBeLessThan(2000);
  });

  it('0 means unlimited', async () => {
    const started = performance.now();
    for await (const _ of rateLimited(chunks(64, 64 * 1024), 0)) void _;
    expect(performance.now() - started).toBeLessThan(200);
  });
});

describe('coalesced pieces of a backup stream', () => {
  it('joins 64 KiB pipe reads into pieces of at least 1 MiB, in order, the last one smaller, no byte lost', async () => {
    const pieces: Buffer[] = [];
    for await (const piece of coalesced(chunks(40, 64 * 1024), 2 ** 20)) pieces.push(piece);
    expect(pieces.map((p) => p.length)).toEqual([2 ** 20, 2 ** 20, 8 * 64 * 1024]);
    expect(Buffer.concat(pieces)).toEqual(Buffer.concat(Array.from({ length: 40 }, (_, i) => Buffer.alloc(64 * 1024, i))));
  });
});

describe('piped processes', () => {
  it('stream stdin to stdout through a tool, no shell', async () => {
    const cat = spawnPiped('/bin/cat', [], { input: 'pipe', output: 'pipe', timeoutMs: 5000 });
    const out: Buffer[] = [];
    cat.stdout.on('data', (d: Buffer) => out.push(d));
    cat.stdin.end('a; echo not-a-shell');
    await cat.done;
    expect(Buffer.concat(out).toString()).toBe('a; echo not-a-shell');
  });

  it('a process past its timeout is killed and reported', async () => {
    const sleeper = spawnPiped('/bin/sleep', ['5'], { input: 'ignore', output: 'ignore', timeoutMs: 100 });
    await expect(sleeper.done).rejects.toThrow(/timed out after 100 ms/);
  });

  it('a failing tool rejects with its stderr', async () => {
    const ls = spawnPiped('/bin/ls', ['/no/such/dir'], { input: 'ignore', output: 'ignore', timeoutMs: 5000 });
    await expect(ls.done).rejects.toThrow(/No such file/);
  });
});

describe('the GTID position of a copy', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-gtid-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('comes from mariadb_backup_binlog_info', async () => {
    await writeFile(path.join(dir, 'mariadb_backup_binlog_info'), 'mariadb-bin.000002\t1234\t0-1-202,1-5-7\n');
    expect(await backupGtid(dir)).toBe('0-1-202,1-5-7');
  });

  it('falls back to the slave info of a standby source', async () => {
    await writeFile(path.join(dir, 'mariadb_backup_binlog_info'), 'mariadb-bin.000002\t1234\n');
    await writeFile(path.join(dir, 'mariadb_backup_slave_info'), "SET GLOBAL gtid_slave_pos = '0-1-99';\nCHANGE MASTER TO master_use_gtid = slave_pos\n");
    expect(await backupGtid(dir)).toBe('0-1-99');
  });

  it('refuses anything that is not a GTID list', async () => {
    await writeFile(path.join(dir, 'mariadb_backup_binlog_info'), "f\t1\t0-1-2'; DROP TABLE x\n");
    await expect(backupGtid(dir)).rejects.toThrow(/not a GTID list/);
  });
});

describe('request values that reach SQL, paths and config', () => {
  const good = { port: 57001, datadir: '/d', logdir: '/l', wal_log_dir: '/w', server_id: 1, innodb_size_mb: 64, max_connections: 100, dbcfg: 0, fullsync_level: 1 };

  it('paths must be plain absolute paths that cannot break my.cnf', () => {
    expect(checkSpec(good)).toBe(good);
    for (const datadir of ['relative', '/a/../b', '/a\n[client]', '/a#b']) expect(() => checkSpec({ ...good, datadir })).toThrow(/plain absolute path/);
  });

  it('account names are plain identifiers; passwords printable', () => {
    expect(() => checkAccount('admin', { user: "x'@'%", password: 'long-enough' })).toThrow(/admin user/);
    expect(() => checkAccount('admin', { user: 'ok', password: 'short' })).toThrow(/8-200/);
    expect(() => checkAccount('admin', { user: 'ok', password: 'has\nnewline-inside' })).toThrow(/printable/);
  });

  it('secrets are scrubbed from error text', () => {
    expect(scrub("near 'IDENTIFIED BY 's3cret-pw'' at line 1", ['s3cret-pw'])).toBe("near 'IDENTIFIED BY '[secret]'' at line 1");
  });
});
