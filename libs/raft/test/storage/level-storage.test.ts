import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Level } from 'level';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SnapshotOutOfDateError, StoppedError } from '../../src/core/errors';
import { LevelStorage } from '../../src/level-storage';
import { encodeEntryValue } from '../../src/codec/entry-codec';
import { entryIndexOfKey, entryKey } from '../../src/level-keys';
import type { ConfState } from '../../src/core/types';
import { run, runStorageContract } from './storage-contract';

const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kcm-level-storage-'));
  dirs.push(dir);
  return dir;
}
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

runStorageContract('LevelStorage', {
  supportsReopen: true,
  async bootstrap(conf) {
    const dir = await tempDir();
    const subject = {
      storage: await LevelStorage.open(dir, { bootstrap: conf }),
      async reopen() {
        await subject.storage.close();
        subject.storage = await LevelStorage.open(dir);
      },
      async dispose() {
        await subject.storage.close();
      },
    };
    return subject;
  },
});

const conf: ConfState = { voters: ['a', 'b', 'c'], learners: [] };
const bytes = (...values: number[]) => Uint8Array.from(values);

interface WrittenOp {
  type: 'put' | 'del';
  key: Uint8Array;
}

/** What the spy below touches of a LevelDB chained batch (classic-level's internals). */
interface ChainedBatchInternals {
  _put(key: Uint8Array, value: Uint8Array): void;
  _del(key: Uint8Array): void;
  _write(opts: { sync?: boolean }): Promise<void>;
}

/**
 * Records each batch LevelDB is really asked to write (its operations and options), below
 * LevelStorage's own counters. Make the returned mock reject to fail the next write.
 */
function spyOnBatches() {
  const written = vi.fn(async (_ops: WrittenOp[], _opts: { sync?: boolean }): Promise<void> => {});
  const proto = Level.prototype as unknown as { _chainedBatch(): ChainedBatchInternals };
  const open = proto._chainedBatch;
  vi.spyOn(proto, '_chainedBatch').mockImplementation(function (this: unknown) {
    const batch = open.call(this);
    const ops: WrittenOp[] = [];
    const [put, del, write] = [batch._put.bind(batch), batch._del.bind(batch), batch._write.bind(batch)];
    batch._put = (key, value) => {
      ops.push({ type: 'put', key });
      put(key, value);
    };
    batch._del = (key) => {
      ops.push({ type: 'del', key });
      del(key);
    };
    batch._write = async (opts) => {
      await written(ops, opts);
      return write(opts);
    };
    return batch;
  });
  return written;
}

/** Opens the directory with a plain Level handle, to plant what a crash could leave behind. */
async function withRawDb(dir: string, work: (db: Level<Uint8Array, Uint8Array>) => Promise<void>): Promise<void> {
  const db = new Level<Uint8Array, Uint8Array>(dir, { keyEncoding: 'view', valueEncoding: 'view' });
  await db.open();
  try {
    await work(db);
  } finally {
    await db.close();
  }
}

describe('LevelStorage writes', () => {
  it('each persist is exactly one LevelDB batch, synced only when asked', async () => {
    const storage = await LevelStorage.open(await tempDir(), { bootstrap: conf });
    const batches = spyOnBatches();
    const updates = [
      { entries: run(1, 50, 1), hardState: { term: 1, vote: 'a', commit: 0 } },
      { hardState: { term: 1, vote: 'a', commit: 40 } },
      { entries: run(30, 35, 2) }, // truncates 36..50 in the same batch
      { snapshot: { meta: { index: 60, term: 3, conf }, data: bytes(1) }, entries: run(61, 62, 3), hardState: { term: 3, vote: null, commit: 61 } },
    ];
    for (const [i, update] of updates.entries()) {
      const sync = i % 2 === 0;
      const before = storage.stats();
      await storage.persist(update, sync);
      expect(batches).toHaveBeenCalledTimes(i + 1);
      expect(batches.mock.calls[i][1].sync).toBe(sync);
      expect(storage.stats()).toEqual({ writes: before.writes + 1, syncedWrites: before.syncedWrites + (sync ? 1 : 0) });
    }
    expect(storage.lastIndex()).toBe(62);
    await storage.close();
  });

  it('a persist with nothing to write does not touch LevelDB', async () => {
    const storage = await LevelStorage.open(await tempDir(), { bootstrap: conf });
    const batches = spyOnBatches();
    await storage.persist({}, true);
    await storage.persist({ entries: [] }, true);
    expect(batches).not.toHaveBeenCalled();
    expect(storage.stats()).toEqual({ writes: 1, syncedWrites: 1 }); // only the bootstrap write
    await storage.close();
  });

  it('the log view changes only once the write has resolved', async () => {
    const storage = await LevelStorage.open(await tempDir(), { bootstrap: conf });
    const pending = storage.persist({ entries: run(1, 3, 1) }, true);
    expect(storage.lastIndex()).toBe(0);
    await pending;
    expect(storage.lastIndex()).toBe(3);
    await storage.close();
  });

  it('un-awaited persists land on disk in call order', async () => {
    const dir = await tempDir();
    let storage = await LevelStorage.open(dir, { bootstrap: conf });
    const writes = [
      storage.persist({ entries: run(1, 10, 1) }, false),
      storage.persist({ entries: run(5, 6, 2) }, false), // truncates 7..10
      storage.persist({ entries: run(7, 8, 3) }, true),
    ];
    await Promise.all(writes);
    await storage.close();
    storage = await LevelStorage.open(dir);
    expect(storage.entries(1, 9).map((e) => e.term)).toEqual([1, 1, 1, 1, 2, 2, 3, 3]);
    await storage.close();
  });

  it('a failed write leaves the view unchanged and later writes still run', async () => {
    const storage = await LevelStorage.open(await tempDir(), { bootstrap: conf });
    spyOnBatches().mockRejectedValueOnce(new Error('disk full'));
    await expect(storage.persist({ entries: run(1, 3, 1) }, true)).rejects.toThrow('disk full');
    expect(storage.lastIndex()).toBe(0);
    await storage.persist({ entries: run(1, 2, 1) }, true);
    expect(storage.lastIndex()).toBe(2);
    await storage.close();
  });

  it('createSnapshot commits with one batch and range-deletes the compacted entries', async () => {
    const dir = await tempDir();
    const storage = await LevelStorage.open(dir, { bootstrap: conf });
    await storage.persist({ entries: run(1, 1000, 1) }, false);
    const batches = spyOnBatches();
    await storage.createSnapshot(900, conf, bytes(9));
    expect(batches).toHaveBeenCalledTimes(1);
    await storage.close();
    await withRawDb(dir, async (db) => {
      const left = await db.keys({ gte: entryKey(0), lte: entryKey(2000) }).all();
      expect(left.map(entryIndexOfKey)).toEqual(run(901, 1000, 1).map((e) => e.index));
    });
  });

  it('writes after close reject with StoppedError', async () => {
    const storage = await LevelStorage.open(await tempDir(), { bootstrap: conf });
    await storage.close();
    await expect(storage.persist({ entries: run(1, 1, 1) }, true)).rejects.toThrow(StoppedError);
  });
});

describe('LevelStorage open', () => {
  it('bootstrap is written once and ignored when the directory already holds state', async () => {
    const dir = await tempDir();
    let storage = await LevelStorage.open(dir, { bootstrap: conf });
    await storage.persist({ hardState: { term: 2, vote: 'a', commit: 0 } }, true);
    await storage.close();
    storage = await LevelStorage.open(dir, { bootstrap: { voters: ['x'], learners: [] } });
    expect(storage.initialState()).toEqual({ hardState: { term: 2, vote: 'a', commit: 0 }, confState: conf });
    await storage.close();
  });

  it('a new directory without bootstrap starts with no members, waiting for a snapshot', async () => {
    const dir = await tempDir();
    let storage = await LevelStorage.open(dir);
    expect(storage.initialState().confState).toEqual({ voters: [], learners: [] });
    await storage.persist({ snapshot: { meta: { index: 7, term: 2, conf }, data: bytes(1) } }, true);
    await storage.close();
    storage = await LevelStorage.open(dir);
    expect(storage.initialState().confState).toEqual(conf);
    expect(storage.firstIndex()).toBe(8);
    await storage.close();
  });

  it('a store that has only log entries is not brand new: they survive and bootstrap is ignored', async () => {
    const dir = await tempDir();
    let storage = await LevelStorage.open(dir);
    await storage.persist({ entries: run(1, 2, 3) }, true);
    await storage.close();
    storage = await LevelStorage.open(dir, { bootstrap: conf });
    expect(storage.lastIndex()).toBe(2);
    expect(storage.initialState().confState).toEqual({ voters: [], learners: [] });
    await storage.close();
  });

  it('entries left below the snapshot by a crash during compaction are ignored and removed', async () => {
    const dir = await tempDir();
    let storage = await LevelStorage.open(dir, { bootstrap: conf });
    await storage.persist({ entries: run(1, 8, 1) }, true);
    await storage.createSnapshot(5, conf, bytes());
    await storage.close();
    await withRawDb(dir, async (db) => {
      await db.batch(run(2, 4, 1).map((e) => ({ type: 'put' as const, key: entryKey(e.index), value: encodeEntryValue(e) })));
    });
    storage = await LevelStorage.open(dir);
    expect(storage.firstIndex()).toBe(6);
    expect(storage.entries(6, 9).map((e) => e.index)).toEqual([6, 7, 8]);
    await storage.close();
    await withRawDb(dir, async (db) => {
      expect(await db.keys({ gte: entryKey(0), lte: entryKey(5) }).all()).toEqual([]);
    });
  });

  it('a gap in the stored log is reported as corruption, not silently skipped', async () => {
    const dir = await tempDir();
    const storage = await LevelStorage.open(dir, { bootstrap: conf });
    await storage.persist({ entries: run(1, 5, 1) }, true);
    await storage.close();
    await withRawDb(dir, (db) => db.del(entryKey(3)));
    await expect(LevelStorage.open(dir)).rejects.toThrow(/corrupt log: found entry 4 where 3 was expected/);
  });

  it('an older snapshot offered by persist is rejected without writing', async () => {
    const storage = await LevelStorage.open(await tempDir(), { bootstrap: conf });
    await storage.persist({ entries: run(1, 6, 1) }, true);
    await storage.createSnapshot(4, conf, bytes());
    const batches = spyOnBatches();
    await expect(storage.persist({ snapshot: { meta: { index: 3, term: 1, conf }, data: bytes() } }, true)).rejects.toThrow(
      SnapshotOutOfDateError,
    );
    expect(batches).not.toHaveBeenCalled();
    await storage.close();
  });
});
