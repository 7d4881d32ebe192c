// stype s3 through s3rver, the S3-compatible STAND-IN for a real S3 (Ceph's radosgw is too
// heavy for these machines; docs/backup-s3.md says what the stand-in does not prove), on
// 127.0.5.1. The storage agent's S3 store (capabilities/storage/s3/): a multipart upload read
// back byte for byte and checked against its sha256; a byte flipped in the bucket refuses the
// read and fails verify; and a connection cut (iptables REJECT with tcp-reset on the
// stand-in's port) in the middle of an upload: the upload continues at the part it was on,
// parts 1..k are sent once, with one upload id, and the object is whole.

import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openS3Root } from '../../services/agent/src/capabilities/storage/s3/targets';
import type { S3ObjectStore } from '../../services/agent/src/capabilities/storage/s3/s3-store';
import type { S3ObjectWriter } from '../../services/agent/src/capabilities/storage/s3/s3-writer';
import { startS3StandIn, storedParts, type S3StandIn } from '../../services/agent/test/storage/s3-stand-in';

const run = promisify(execFile);
const ADDRESS = '127.0.5.1';
const PORT = 59410;
const MiB = 1024 * 1024;
const PART = 6 * MiB;
const CUT = ['OUTPUT', '-d', ADDRESS, '-p', 'tcp', '--dport', String(PORT), '-j', 'REJECT', '--reject-with', 'tcp-reset'];

async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = probe();
    if (got !== undefined && got !== false) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function readAll(store: S3ObjectStore, key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of store.read(key)) chunks.push(c);
  return Buffer.concat(chunks);
}

/** s3rver's file holding an object's bytes (`<key>._S3rver_object` under the bucket's directory). */
async function standInFileOf(s3: S3ObjectStore, dir: string, key: string): Promise<string> {
  return path.join(dir, s3.bucket, `${s3.objectKey(key)}._S3rver_object`);
}

describe('s3 backup storage through the s3rver stand-in: multipart, integrity, resume after a cut connection', () => {
  let tmp: string;
  let standIn: S3StandIn;
  let store: S3ObjectStore;

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'kcm-s3-'));
    standIn = await startS3StandIn(ADDRESS, PORT, path.join(tmp, 'stand-in'));
    const target = { endpoint: standIn.endpoint, region: '', bucket: standIn.bucket, prefix: 'kcm/test', ...standIn.credentials };
    store = await openS3Root(path.join(tmp, 'spool'), target);
    store.writerOptions = { basePartBytes: PART, retryWindowMs: 120_000 };
    await store.open();
  });

  afterAll(async () => {
    await run('iptables', ['-D', ...CUT]).catch(() => {});
    store?.close();
    await standIn?.close();
    await rm(tmp, { recursive: true, force: true });
  });

  it('an object of 3.5 parts is stored as 4 parts and read back whole; list and delete see it', async () => {
    const data = randomBytes(3 * PART + PART / 2);
    const writer = await store.writer('cluster_1/backup_1/shard_1.mbstream');
    for (let at = 0; at < data.length; at += 1 * MiB) await writer.write(data.subarray(at, at + MiB));
    const info = await writer.commit({ gtid_pos: '0-1-5' });
    expect(info).toMatchObject({ bytes: data.length, sha256: createHash('sha256').update(data).digest('hex'), meta: { gtid_pos: '0-1-5' } });
    expect(storedParts(standIn, 'shard_1.mbstream').map((r) => r.partNumber)).toEqual([1, 2, 3, 4]);
    expect((await readAll(store, info.key)).equals(data)).toBe(true);
    expect((await store.verify(info.key)).ok).toBe(true);
    expect((await store.list('cluster_1/')).map((o) => o.key)).toEqual([info.key]);
    // Nothing left on the agent's disk once committed.
    expect(await readdir(path.join(tmp, 'spool', 's3-uploads'))).toEqual([]);
  });

  it('a byte flipped in the bucket: verify says so and a read fails at its end', async () => {
    const key = 'cluster_1/backup_1/shard_1.mbstream';
    const file = await standInFileOf(store, standIn.directory, key);
    const original = await readFile(file);
    const altered = Buffer.from(original);
    altered[altered.length >> 1] ^= 0x01;
    await writeFile(file, altered);
    try {
      const check = await store.verify(key);
      expect(check.ok).toBe(false);
      expect(check.problem).toMatch(/sha256 is [0-9a-f]{64}, manifest says/);
      await expect(readAll(store, key)).rejects.toThrow(/is corrupt/);
    } finally {
      await writeFile(file, original);
    }
    expect(await store.delete('cluster_1/')).toBe(1);
    expect(await store.list('')).toEqual([]);
    await expect(stat(file)).rejects.toThrow(/ENOENT/);
  });

  it('a connection cut after part 2: the upload goes on at part 3 (parts 1-2 sent once, one upload id), and the object is whole', async () => {
    const key = 'cluster_2/backup_7/shard_1.mbstream';
    const data = randomBytes(5 * PART + 123);
    const writer: S3ObjectWriter = (await store.writer(key)) as S3ObjectWriter;
    await writer.write(data.subarray(0, 2 * PART));
    await waitFor('parts 1 and 2 stored', () => storedParts(standIn, key).length === 2);
    await run('iptables', ['-I', ...CUT]);
    let cutRemoved = false;
    try {
      // Part 3 fills and its upload hits the cut; the stream goes on into the spool meanwhile.
      const rest = writer.write(data.subarray(2 * PART));
      rest.catch(() => {});
      await waitFor('a failed attempt of part 3 (the cut connection)', () => writer.record.failedAttempts >= 2);
      expect(writer.record.parts.map((p) => p.partNumber)).toEqual([1, 2]);
      await run('iptables', ['-D', ...CUT]);
      cutRemoved = true;
      await rest;
    } finally {
      if (!cutRemoved) await run('iptables', ['-D', ...CUT]).catch(() => {});
    }
    const failed = writer.record.failedAttempts;
    const attempts = writer.record.parts.map((p) => `${p.partNumber}:${p.attempts}`);
    const info = await writer.commit();
    const parts = storedParts(standIn, key);
    console.log(`stand-in stored parts ${parts.map((r) => r.partNumber).join(',')} of upload ${parts[0].uploadId}; failed attempts during the cut: ${failed}; attempts per part ${attempts.join(' ')}`);
    expect(parts.map((r) => r.partNumber)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(new Set(parts.map((r) => r.uploadId)).size).toBe(1);
    expect(standIn.requests.filter((r) => r.method === 'POST' && r.key.endsWith(key) && r.status === 200 && r.uploadId === undefined)).toHaveLength(1); // one CreateMultipartUpload
    expect(failed).toBeGreaterThanOrEqual(2);
    expect(writer.record.parts[2].attempts).toBeGreaterThan(1);
    expect(info.sha256).toBe(createHash('sha256').update(data).digest('hex'));
    expect((await readAll(store, key)).equals(data)).toBe(true);
  });
});
