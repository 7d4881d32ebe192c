// The agent's s3 store (capabilities/storage/s3/) against s3rver, the S3-compatible STAND-IN
// for a real S3 (docs/backup-s3.md), in this process on 127.0.5.3: a multipart upload read
// back byte for byte, a byte flipped in the bucket refused by read and verify, list and
// delete through the manifests, and the root of an opened s3 storage never taken for an fs
// directory. (The cut connection is test/backup/s3-storage.test.ts, a system test: iptables.)

import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openS3Root } from '../../src/capabilities/storage/s3/targets';
import type { S3ObjectStore } from '../../src/capabilities/storage/s3/s3-store';
import { storeFor } from '../../src/capabilities/storage/store';
import { startS3StandIn, storedParts, type S3StandIn } from './s3-stand-in';

const MiB = 1024 * 1024;
const PART = 6 * MiB;

async function readAll(store: S3ObjectStore, key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of store.read(key)) chunks.push(c);
  return Buffer.concat(chunks);
}

describe('s3 store through the s3rver stand-in', () => {
  let tmp: string;
  let standIn: S3StandIn;
  let store: S3ObjectStore;
  let root: string;

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'kcm-s3-unit-'));
    standIn = await startS3StandIn('127.0.5.3', 59430, path.join(tmp, 'stand-in'));
    root = path.join(tmp, 'spool');
    store = await openS3Root(root, { endpoint: standIn.endpoint, region: '', bucket: standIn.bucket, prefix: 'kcm', ...standIn.credentials });
    store.writerOptions = { basePartBytes: PART };
    await store.open();
  });

  afterAll(async () => {
    await standIn?.close();
    await rm(tmp, { recursive: true, force: true });
  });

  it('an object of 2.5 parts is stored as 3 parts, read back whole, listed and deleted; the spool is empty after', async () => {
    const data = randomBytes(2 * PART + PART / 2);
    const writer = await storeFor(root).writer('c_1/b_1/shard_1.mbstream');
    await writer.writeAll([data.subarray(0, 100), data.subarray(100)]);
    const info = await writer.commit({ gtid_pos: '0-1-5' });
    expect(info).toMatchObject({ bytes: data.length, sha256: createHash('sha256').update(data).digest('hex'), meta: { gtid_pos: '0-1-5' } });
    expect(storedParts(standIn, 'shard_1.mbstream').map((r) => r.partNumber)).toEqual([1, 2, 3]);
    expect((await readAll(store, info.key)).equals(data)).toBe(true);
    expect(await readdir(path.join(root, 's3-uploads'))).toEqual([]);
    expect((await storeFor(root).list('c_1/')).map((o) => o.key)).toEqual([info.key]);
    // A byte flipped in the bucket (s3rver keeps `<key>._S3rver_object` files).
    const file = path.join(standIn.directory, standIn.bucket, `kcm/${info.key}._S3rver_object`);
    const original = await readFile(file);
    const altered = Buffer.from(original);
    altered[altered.length >> 1] ^= 0x01;
    await writeFile(file, altered);
    expect(await store.verify(info.key)).toMatchObject({ ok: false, problem: expect.stringMatching(/sha256 is [0-9a-f]{64}, manifest says/) });
    await expect(readAll(store, info.key)).rejects.toThrow(/is corrupt/);
    expect(await store.delete('c_1/')).toBe(1);
    expect(await store.list('')).toEqual([]);
  });

  it('an aborted upload leaves no object, and an older object of the key stays out of list until replaced', async () => {
    const writer = await store.writer('c_1/b_2/shard_1.mbstream');
    await writer.write(randomBytes(PART + 10));
    await writer.abort();
    expect(await store.list('c_1/')).toEqual([]);
    await expect(store.info('c_1/b_2/shard_1.mbstream')).rejects.toThrow(/no object/);
  });

  it('after an agent restart (the bucket forgotten), an s3 storage\'s root is refused until opened again, never taken for an fs directory', async () => {
    // What a restarted agent finds: the marker Open left in the root, no bucket in memory.
    const other = path.join(tmp, 'spool-of-a-restarted-agent');
    await mkdir(other, { recursive: true });
    await writeFile(path.join(other, '.kcm-s3-storage.json'), JSON.stringify({ endpoint: standIn.endpoint, bucket: standIn.bucket, prefix: 'kcm' }));
    expect(() => storeFor(other)).toThrow(/was not opened on this agent since it started/);
    const reopened = await openS3Root(other, { endpoint: standIn.endpoint, region: '', bucket: standIn.bucket, prefix: 'kcm', ...standIn.credentials });
    expect(storeFor(other)).toBe(reopened);
  });

  it('an empty object is stored and read back', async () => {
    const writer = await store.writer('c_1/empty');
    const info = await writer.commit();
    expect(info.bytes).toBe(0);
    expect((await readAll(store, 'c_1/empty')).length).toBe(0);
  });
});
