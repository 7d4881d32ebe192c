// Snapshot images in files beside LevelDB: a crash at any step of recording one leaves the
// old or the new snapshot usable, and a log write never queues behind an image.

import { createHash } from 'node:crypto';
import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Level } from 'level';
import { afterEach, describe, expect, it } from 'vitest';
import { LevelStorage } from '../../src/level-storage';
import { snapshotDataKey, snapshotMetaKey } from '../../src/level-keys';
import { encodeSnapshotMeta } from '../../src/codec/entry-codec';
import { FILE_WRITE_BYTES, readImage, readImagePieces, type SnapshotWriteStep } from '../../src/snapshot-files';
import { isStoredImage, type ConfState, type Entry } from '../../src/core/types';

const conf: ConfState = { voters: ['a', 'b', 'c'], learners: [] };
const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kcm-snapshot-files-'));
  dirs.push(dir);
  return dir;
}
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

const entriesFrom = (from: number, count: number, term = 1): Entry[] =>
  Array.from({ length: count }, (_, i) => ({ index: from + i, term, type: 'normal' as const, data: Uint8Array.of(i % 256) }));
const image = (fill: number, bytes = 1000) => new Uint8Array(bytes).fill(fill);
/** `whole` as pieces of `size` bytes, one per turn, as a state machine hands them out. */
async function* piecesOf(whole: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < whole.byteLength; at += size) {
    await new Promise((r) => setImmediate(r));
    yield whole.subarray(at, at + size);
  }
}

/** A store holding entries 1..20 and a first snapshot at index 5 (image of 1s). */
async function storeWithSnapshot(dir: string, afterStep?: (step: SnapshotWriteStep) => void): Promise<LevelStorage> {
  const storage = await LevelStorage.open(dir, { bootstrap: conf, afterSnapshotFileStep: afterStep });
  await storage.persist({ entries: entriesFrom(1, 20), hardState: { term: 1, vote: 'a', commit: 20 } }, true);
  await storage.createSnapshot(5, conf, image(1));
  return storage;
}

const snapshotFiles = async (dir: string) => (await readdir(join(dir, 'snapshots'))).sort();

describe('snapshot images in files beside LevelDB', () => {
  it('keeps the image out of LevelDB: one file, referenced, and read back on open', async () => {
    const dir = await tempDir();
    const storage = await storeWithSnapshot(dir);
    await storage.createSnapshot(10, conf, image(2));
    await storage.close();
    expect(await snapshotFiles(dir)).toHaveLength(1); // the first image was deleted once the second was referenced
    const db = new Level<Uint8Array, Uint8Array>(dir, { keyEncoding: 'view', valueEncoding: 'view' });
    expect(await db.get(snapshotDataKey)).toBeUndefined();
    await db.close();
    const reopened = await LevelStorage.open(dir);
    expect(reopened.snapshot().meta.index).toBe(10);
    expect(await readImage(reopened.snapshot().data)).toEqual(image(2));
    expect(reopened.firstIndex()).toBe(11);
    await reopened.close();
  });

  it('still opens a directory from before, whose image is a LevelDB value, and moves it to a file at the next snapshot', async () => {
    const dir = await tempDir();
    const db = new Level<Uint8Array, Uint8Array>(dir, { keyEncoding: 'view', valueEncoding: 'view' });
    await db.batch([
      { type: 'put', key: snapshotMetaKey, value: encodeSnapshotMeta({ index: 5, term: 1, conf }) },
      { type: 'put', key: snapshotDataKey, value: image(9) },
    ]);
    await db.close();
    const storage = await LevelStorage.open(dir);
    expect(storage.snapshot()).toMatchObject({ meta: { index: 5 }, data: image(9) }); // in memory, as it was in LevelDB
    await storage.persist({ entries: entriesFrom(6, 10), hardState: { term: 1, vote: 'a', commit: 15 } }, true);
    await storage.createSnapshot(12, conf, image(2));
    await storage.close();
    const reopened = await LevelStorage.open(dir);
    expect(reopened.snapshot().meta.index).toBe(12);
    expect(await readImage(reopened.snapshot().data)).toEqual(image(2));
    await reopened.close();
  });

  for (const step of ['appended', 'written', 'renamed'] as const) {
    it(`a crash once the new image is ${step} but not referenced leaves the old snapshot, and open removes the orphan`, async () => {
      const dir = await tempDir();
      let crashAt: SnapshotWriteStep | undefined;
      const storage = await storeWithSnapshot(dir, (s) => {
        if (s === crashAt) throw new Error(`simulated crash after ${s}`);
      });
      crashAt = step;
      // Several writes' worth of pieces: 'appended' stops after the first, with more to come.
      await expect(storage.createSnapshot(10, conf, piecesOf(image(2, 4 * FILE_WRITE_BYTES), 64 * 1024))).rejects.toThrow('simulated crash');
      await storage.close(); // LevelDB's lock; nothing more is written by closing
      const reopened = await LevelStorage.open(dir);
      expect(reopened.snapshot().meta.index).toBe(5);
      expect(await readImage(reopened.snapshot().data)).toEqual(image(1));
      expect(reopened.entries(6, 21)).toHaveLength(15);
      expect(await snapshotFiles(dir)).toHaveLength(1);
      await reopened.close();
    });
  }

  it('a state machine failing part way through its pieces leaves the old snapshot and no partial file', async () => {
    const dir = await tempDir();
    const storage = await storeWithSnapshot(dir);
    async function* failing(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < 3; i++) yield image(2, FILE_WRITE_BYTES);
      throw new Error('state machine failed');
    }
    await expect(storage.createSnapshot(10, conf, failing())).rejects.toThrow('state machine failed');
    expect(await snapshotFiles(dir)).toHaveLength(1);
    expect(storage.snapshot().meta.index).toBe(5);
    expect(await readImage(storage.snapshot().data)).toEqual(image(1));
    await storage.close();
  });

  it('a process killed while pieces were being appended leaves a partial .tmp that is never referenced and is removed at open', async () => {
    const dir = await tempDir();
    const storage = await storeWithSnapshot(dir);
    await storage.close();
    const [current] = await snapshotFiles(dir);
    await writeFile(join(dir, 'snapshots', `0000000000000010-1-1-0.snap.tmp`), image(2, 3 * FILE_WRITE_BYTES));
    const reopened = await LevelStorage.open(dir);
    expect(reopened.snapshot().meta.index).toBe(5);
    expect(await readImage(reopened.snapshot().data)).toEqual(image(1));
    expect(await snapshotFiles(dir)).toEqual([current]);
    await reopened.close();
  });

  it('writes an image given as pieces in order, keeps it in the file (not in memory) and reads it back in pieces, with its SHA-256', async () => {
    const dir = await tempDir();
    const storage = await storeWithSnapshot(dir);
    const whole = Uint8Array.from({ length: 3 * FILE_WRITE_BYTES + 12345 }, (_, i) => (i * 7) % 256);
    await storage.createSnapshot(10, conf, piecesOf(whole, 100_000));
    const stored = storage.snapshot().data;
    expect(isStoredImage(stored)).toBe(true);
    if (!isStoredImage(stored)) return;
    expect(stored.byteLength).toBe(whole.byteLength);
    expect(Buffer.from(stored.sha256!).toString('hex')).toBe(createHash('sha256').update(whole).digest('hex'));
    const read: Uint8Array[] = [];
    for await (const piece of readImagePieces(stored, 256 * 1024)) read.push(piece);
    expect(read.length).toBe(Math.ceil(whole.byteLength / (256 * 1024)));
    expect(Buffer.concat(read).equals(Buffer.from(whole))).toBe(true);
    await storage.close();
    const reopened = await LevelStorage.open(dir);
    const again = reopened.snapshot().data;
    expect(isStoredImage(again) && Buffer.from(again.sha256!).equals(Buffer.from(stored.sha256!))).toBe(true);
    await reopened.close();
  });

  it('a reader opened before a newer snapshot replaced the image still reads the whole old image', async () => {
    const dir = await tempDir();
    const storage = await storeWithSnapshot(dir);
    const old = storage.snapshot().data;
    if (!isStoredImage(old)) throw new Error('expected a stored image');
    const reader = await old.open();
    await storage.createSnapshot(10, conf, image(2));
    expect(await snapshotFiles(dir)).toHaveLength(1); // the old file is gone from the directory
    expect(await reader.read(0, 1000)).toEqual(image(1));
    await reader.close();
    await expect(old.open()).rejects.toThrow(/ENOENT/);
    await storage.close();
  });

  it('a crash after the reference but before the old image is deleted leaves the new snapshot, and open removes the old file', async () => {
    const dir = await tempDir();
    const storage = await storeWithSnapshot(dir);
    const [oldName] = await snapshotFiles(dir);
    await copyFile(join(dir, 'snapshots', oldName), join(dir, 'old-image'));
    await storage.createSnapshot(10, conf, image(2));
    await storage.close();
    await copyFile(join(dir, 'old-image'), join(dir, 'snapshots', oldName)); // as if the delete never ran
    await writeFile(join(dir, 'snapshots', 'half-written.snap.tmp'), 'x');
    const reopened = await LevelStorage.open(dir);
    expect(reopened.snapshot().meta.index).toBe(10);
    expect(await readImage(reopened.snapshot().data)).toEqual(image(2));
    expect(await snapshotFiles(dir)).toHaveLength(1);
    expect(await snapshotFiles(dir)).not.toContain(oldName);
    await reopened.close();
  });

  it('refuses to open on a referenced image of the wrong length (a torn or replaced file)', async () => {
    const dir = await tempDir();
    const storage = await storeWithSnapshot(dir);
    await storage.close();
    const [name] = await snapshotFiles(dir);
    await writeFile(join(dir, 'snapshots', name), image(1, 10));
    await expect(LevelStorage.open(dir)).rejects.toThrow(/holds 10 bytes, 1000 were written/);
  });

  it('a snapshot received from the leader is kept in a file too, replacing the old one', async () => {
    const dir = await tempDir();
    const storage = await storeWithSnapshot(dir);
    await storage.persist({ snapshot: { meta: { index: 30, term: 2, conf }, data: image(3) } }, true);
    await storage.close();
    const reopened = await LevelStorage.open(dir);
    expect(reopened.snapshot().meta).toMatchObject({ index: 30, term: 2 });
    expect(await readImage(reopened.snapshot().data)).toEqual(image(3));
    expect(await snapshotFiles(dir)).toHaveLength(1);
    await reopened.close();
  });

  it('a log write does not wait while a large image is written', async () => {
    const dir = await tempDir();
    const storage = await storeWithSnapshot(dir);
    const order: string[] = [];
    const snapshot = storage.createSnapshot(15, conf, image(4, 64 * 1024 * 1024)).then(() => order.push('snapshot'));
    const append = storage.persist({ entries: entriesFrom(21, 5) }, true).then(() => order.push('append'));
    await Promise.all([snapshot, append]);
    expect(order).toEqual(['append', 'snapshot']);
    expect(storage.lastIndex()).toBe(25);
    expect(storage.firstIndex()).toBe(16);
    await storage.close();
  });
});
