// An fs storage object's writer flushes what it wrote as it goes (a datasync in the
// background every 32 MiB), so commit's fsync is not left a whole backup to write, and a
// background flush that fails fails the commit: on Linux a later fsync need not report an
// error again, and a backup whose bytes may not be on disk must not be recorded as stored.

import { createHash } from 'node:crypto';
import { mkdtemp, open, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FsObjectStore } from '../../src/capabilities/storage/object-store';

const MiB = 1024 * 1024;

async function fileHandlePrototype(dir: string) {
  const probe = await open(path.join(dir, 'probe'), 'w');
  const proto = Object.getPrototypeOf(probe) as { datasync(): Promise<void> };
  await probe.close();
  await rm(path.join(dir, 'probe'));
  return proto;
}

describe('ObjectWriter flushes as it writes', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-writer-flush-'));
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await rm(dir, { recursive: true, force: true });
  });

  it('starts a datasync every 32 MiB, never two at once, and the object is whole', async () => {
    const proto = await fileHandlePrototype(dir);
    const real = proto.datasync;
    let running = 0;
    let most = 0;
    let calls = 0;
    vi.spyOn(proto, 'datasync').mockImplementation(async function (this: unknown) {
      calls++;
      most = Math.max(most, ++running);
      try {
        await new Promise((r) => setTimeout(r, 20)); // a slow disk: later writes arrive meanwhile
        return await real.call(this);
      } finally {
        running--;
      }
    });
    const store = new FsObjectStore(path.join(dir, 'store'));
    const writer = await store.writer('sets/a');
    const hash = createHash('sha256');
    for (let i = 0; i < 25; i++) {
      const batch = [Buffer.alloc(2 * MiB, i), Buffer.alloc(2 * MiB, 255 - i)]; // 100 MiB in 4 MiB batches
      for (const b of batch) hash.update(b);
      await writer.writeAll(batch);
    }
    const info = await writer.commit();
    expect(info.bytes).toBe(100 * MiB);
    expect(info.sha256).toBe(hash.digest('hex'));
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(calls).toBeLessThanOrEqual(3);
    expect(most).toBe(1);
  });

  it('a background flush that failed fails the commit, and abort leaves no file behind', async () => {
    const proto = await fileHandlePrototype(dir);
    vi.spyOn(proto, 'datasync').mockRejectedValue(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    const store = new FsObjectStore(path.join(dir, 'store'));
    const writer = await store.writer('sets/b');
    for (let i = 0; i < 10; i++) await writer.writeAll([Buffer.alloc(4 * MiB, i)]);
    await expect(writer.commit()).rejects.toThrow(/EIO/);
    await writer.abort();
    expect(await readdir(path.join(dir, 'store', 'sets'))).toEqual([]);
  });
});
