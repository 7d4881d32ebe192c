// The `fs` backup storage over gRPC, on an in-process agent (no database engine needed):
// objects with a checksum each, atomic writes, a check that sees any altered byte.

import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { AgentCallError, catalogErrorOf, StorageAgentClient } from '@kcm/agent-api';
import { startAgent, type RunningAgent } from '../../src/index';
import { gtidOfBackup, MbstreamSniffer } from '../../src/capabilities/storage/mbstream-sniffer';
import { sealAll } from '../../src/capabilities/storage/sealed-stream';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function collect(stream: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of stream) parts.push(p);
  return Buffer.concat(parts);
}

describe('backup storage agent (stype fs)', () => {
  let agent: RunningAgent;
  let client: StorageAgentClient;
  let tmp: string;
  let root: string;

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-storage-'));
    root = path.join(tmp, 'store');
    agent = await startAgent({ hostaddr: '127.0.0.1', port: 0, logger: silentLogger(), stateDir: path.join(tmp, 'agent-state') });
    client = new StorageAgentClient(agent.address);
  });

  afterAll(async () => {
    client.close();
    await agent.stop();
    await rm(tmp, { recursive: true, force: true });
  });

  it('opens a root it creates and reports its free space', async () => {
    const opened = await client.open(root);
    expect(opened.root).toBe(root);
    expect(opened.free_bytes).toBeGreaterThan(0);
  });

  it('stores a stream with its size and sha256, and serves the same bytes back', async () => {
    const data = Buffer.alloc(3 * 1024 * 1024 + 17, 7);
    data.write('a backup', 0);
    const info = await client.put(root, 'cluster-1/set-1/catalog.sql', data, { kind: 'catalog' });
    expect(info).toMatchObject({ key: 'cluster-1/set-1/catalog.sql', bytes: data.length, sha256: sha(data), meta: { kind: 'catalog' } });
    expect((await collect(client.get(root, 'cluster-1/set-1/catalog.sql'))).equals(data)).toBe(true);
    expect(await client.verify(root, 'cluster-1/set-1/catalog.sql')).toMatchObject({ ok: true, problem: '' });
  });

  it('a stored file altered by one byte is refused by verify and by get', async () => {
    await client.put(root, 'cluster-1/set-2/shard_1.mbstream', Buffer.from('0123456789'.repeat(1000)));
    const file = path.join(root, 'cluster-1/set-2/shard_1.mbstream');
    const bytes = await readFile(file);
    bytes[5000] ^= 1;
    await writeFile(file, bytes);
    const verdict = await client.verify(root, 'cluster-1/set-2/shard_1.mbstream');
    expect(verdict.ok).toBe(false);
    expect(verdict.problem).toMatch(/sha256 is [0-9a-f]{64}, manifest says [0-9a-f]{64}/);
    const err = await collect(client.get(root, 'cluster-1/set-2/shard_1.mbstream')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentCallError);
    expect(String((err as Error).message)).toMatch(/corrupt/);
    expect(catalogErrorOf(err)).toBe('DATA_CHECK_FAILED');
  });

  it('a truncated file is refused by verify naming the size', async () => {
    await client.put(root, 'cluster-1/set-3/a', Buffer.alloc(100, 1));
    await writeFile(path.join(root, 'cluster-1/set-3/a'), Buffer.alloc(50, 1));
    expect((await client.verify(root, 'cluster-1/set-3/a')).problem).toMatch(/size is 50 bytes, manifest says 100/);
  });

  it('lists objects by prefix and ignores a write that never committed', async () => {
    // What a crash mid-write leaves: a partial file and no manifest.
    await writeFile(path.join(root, 'cluster-1/set-1/shard_9.mbstream.partial-deadbeef'), 'half');
    const keys = (await client.list(root, 'cluster-1/set-1/')).map((o) => o.key);
    expect(keys).toEqual(['cluster-1/set-1/catalog.sql']);
    expect((await client.list(root, 'cluster-1/')).map((o) => o.key)).toEqual(['cluster-1/set-1/catalog.sql', 'cluster-1/set-2/shard_1.mbstream', 'cluster-1/set-3/a']);
    expect(await client.list(root, 'cluster-2/')).toEqual([]);
  });

  it('writing a key again removes what a crashed earlier write of it left, and nothing else', async () => {
    await client.put(root, 'cluster-1/set-5/a', Buffer.from('first'));
    await writeFile(path.join(root, 'cluster-1/set-5/b.partial-0badc0de'), 'crashed write of b');
    await writeFile(path.join(root, 'cluster-1/set-5/b.other.partial-0badc0de'), 'crashed write of another key');
    await client.put(root, 'cluster-1/set-5/b', Buffer.from('second'));
    expect((await readdir(path.join(root, 'cluster-1/set-5'))).sort()).toEqual(['a', 'a.manifest.json', 'b', 'b.manifest.json', 'b.other.partial-0badc0de']);
  });

  it('a failed put leaves neither a new object nor a temporary file', async () => {
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield Buffer.from('some bytes');
      throw new Error('the producer died');
    }
    await expect(client.put(root, 'cluster-1/set-4/x', failing())).rejects.toThrow(/producer died/);
    await new Promise((r) => setTimeout(r, 200));
    expect(await client.list(root, 'cluster-1/set-4/')).toEqual([]);
    expect(await readdir(path.join(root, 'cluster-1/set-4')).catch(() => [])).toEqual([]);
  });

  it('deletes by prefix, and refuses an empty prefix', async () => {
    expect(await client.delete('del-1', root, 'cluster-1/set-3/')).toBe(1);
    expect(await client.list(root, 'cluster-1/set-3/')).toEqual([]);
    await expect(client.delete('del-2', root, '')).rejects.toThrow(/non-empty prefix/);
  });

  it('a physical backup whose source fails stores nothing and leaves no temporary file', async () => {
    const source = { agent_address: agent.address, hostaddr: '127.0.0.1', port: 57999, is_master: false };
    const pulled = client.pullBackup({ op_id: 'pull-1', root, key: 'cluster-9/set-1/shard_1.mbstream', source, pv_limit_mb: 0, meta: {} });
    await expect(pulled).rejects.toThrow(/backup of 127\.0\.0\.1:57999 into cluster-9\/set-1\/shard_1\.mbstream failed: .*57999/);
    expect(await client.list(root, 'cluster-9/')).toEqual([]);
    expect(await readdir(path.join(root, 'cluster-9/set-1'))).toEqual([]);
    // The same failure from a source on another host (pulled from its agent, not taken locally) reads the same.
    const elsewhere = { ...source, hostaddr: '127.0.0.2' };
    const pulledElsewhere = client.pullBackup({ op_id: 'pull-2', root, key: 'cluster-9/set-1/shard_1.mbstream', source: elsewhere, pv_limit_mb: 0, meta: {} });
    await expect(pulledElsewhere).rejects.toThrow(/backup of 127\.0\.0\.2:57999 into cluster-9\/set-1\/shard_1\.mbstream failed: .*57999/);
    expect(await readdir(path.join(root, 'cluster-9/set-1'))).toEqual([]);
    await expect(client.pullBackup({ op_id: '', root, key: 'k', source, pv_limit_mb: 0, meta: {} })).rejects.toThrow(/op_id is required/);
  });

  it('Verify with a sealed object\'s data key checks every record\'s tag: a byte altered with its manifest rewritten passes the sha256 and fails the tags', async () => {
    const dataKey = randomBytes(32);
    const key = 'cluster-3/set-1/shard_1.mbstream';
    await client.put(root, key, sealAll(dataKey, randomBytes(3 * 1024 * 1024)));
    expect(await client.verify(root, key, dataKey)).toMatchObject({ ok: true, problem: '' });
    const file = path.join(root, key);
    const altered = await readFile(file);
    altered[2 * 1024 * 1024] ^= 0x01;
    await writeFile(file, altered);
    const manifest = JSON.parse(await readFile(`${file}.manifest.json`, 'utf8'));
    await writeFile(`${file}.manifest.json`, JSON.stringify({ ...manifest, sha256: sha(altered) }));
    expect(await client.verify(root, key)).toMatchObject({ ok: true });
    expect(await client.verify(root, key, dataKey)).toMatchObject({ ok: false, problem: expect.stringMatching(/^its sealed records do not authenticate: record 1 fails authentication/) });
    expect(await client.verify(root, key, randomBytes(32))).toMatchObject({ ok: false, problem: expect.stringMatching(/record 0 fails authentication/) });
  });

  it('refuses keys and roots that could leave the storage', async () => {
    await expect(client.put(root, '../escape', Buffer.from('x'))).rejects.toThrow(/storage key/);
    await expect(client.put(root, 'a/../../b', Buffer.from('x'))).rejects.toThrow(/storage key/);
    await expect(client.verify('relative/root', 'a')).rejects.toThrow(/storage root/);
    await expect(client.verify(root, 'missing/key')).rejects.toThrow(/no object/);
  });
});

describe('the GTID position read from a passing mbstream', () => {
  it('finds mariadb_backup_binlog_info however the stream is cut into pieces', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-mbs-'));
    try {
      await writeFile(path.join(dir, 'ibdata1'), Buffer.alloc(300_000, 3));
      await writeFile(path.join(dir, 'mariadb_backup_binlog_info'), 'mariadb-bin.000003\t1234\t0-1-42,1-2-7\n');
      const { stdout } = await promisify(execFile)('mbstream', ['-c', 'ibdata1', 'mariadb_backup_binlog_info'], { cwd: dir, encoding: 'buffer', maxBuffer: 1 << 24 });
      for (const piece of [1, 7, 4096, 65536, stdout.length]) {
        const sniffer = new MbstreamSniffer();
        for (let at = 0; at < stdout.length; at += piece) sniffer.push(stdout.subarray(at, at + piece));
        expect(sniffer.problem).toBe('');
        expect(gtidOfBackup(sniffer)).toBe('0-1-42,1-2-7');
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('falls back to the slave position and says when the bytes are no mbstream', () => {
    const sniffer = new MbstreamSniffer();
    sniffer.push(Buffer.from('not a stream at all, just text'));
    expect(sniffer.problem).toMatch(/XBSTCK01/);
    expect(gtidOfBackup(sniffer)).toBeUndefined();
  });

  it('an empty position (a shard that never committed) is the empty GTID, not a missing one', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-mbs-'));
    try {
      await writeFile(path.join(dir, 'xtrabackup_binlog_info'), 'mariadb-bin.000002\t342\n');
      const { stdout } = await promisify(execFile)('mbstream', ['-c', 'xtrabackup_binlog_info'], { cwd: dir, encoding: 'buffer' });
      const sniffer = new MbstreamSniffer();
      sniffer.push(stdout);
      expect(gtidOfBackup(sniffer)).toBe('');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
