// The Storage contract, as one suite run against every implementation (MemoryStorage,
// LevelStorage). A durable store (factory.supportsReopen) is also closed and reopened
// after each scenario, and must then show exactly what was persisted.

import { afterEach, describe, expect, it } from 'vitest';
import { CompactedError, SnapshotOutOfDateError, UnavailableError } from '../../src/core/errors';
import { entryBytes } from '../../src/core/storage';
import type { Storage } from '../../src/core/storage';
import type { ConfState, Entry, Snapshot } from '../../src/core/types';
import { readImage } from '../../src/snapshot-files';

export interface StorageUnderTest {
  storage: Storage;
  /** Closes the store and opens it again over the same durable state (supportsReopen only). */
  reopen(): Promise<void>;
  dispose(): Promise<void>;
}

export interface StorageFactory {
  /** True when the store is durable: the suite then re-checks every scenario after a reopen. */
  supportsReopen: boolean;
  /** A brand-new store for a group whose initial membership is `conf`. */
  bootstrap(conf: ConfState): Promise<StorageUnderTest>;
}

const bytes = (...values: number[]) => Uint8Array.from(values);

export function entry(index: number, term: number, data: Uint8Array = bytes(index & 0xff), type: Entry['type'] = 'normal'): Entry {
  return { index, term, type, data };
}

/** Entries [from, to] all of `term`. */
export function run(from: number, to: number, term: number): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push(entry(i, term));
  return out;
}

const plain = (e: Entry) => ({ index: e.index, term: e.term, type: e.type, data: Array.from(e.data) });

export function runStorageContract(name: string, factory: StorageFactory): void {
  describe(`Storage contract: ${name}`, () => {
    const conf: ConfState = { voters: ['a', 'b', 'c'], learners: ['d'] };
    let subject: StorageUnderTest | undefined;

    afterEach(async () => {
      await subject?.dispose();
      subject = undefined;
    });

    async function fresh(): Promise<StorageUnderTest> {
      subject = await factory.bootstrap(conf);
      return subject;
    }

    /** Runs `check` now and, for a durable store, again after a close and reopen. */
    async function checkAndAfterReopen(s: StorageUnderTest, check: (storage: Storage) => void | Promise<void>): Promise<void> {
      await check(s.storage);
      if (!factory.supportsReopen) return;
      await s.reopen();
      await check(s.storage);
    }

    const logOf = (storage: Storage) => storage.entries(storage.firstIndex(), storage.lastIndex() + 1).map(plain);

    it('a bootstrapped store is empty, with the initial membership and a zero hard state', async () => {
      const s = await fresh();
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.initialState()).toEqual({ hardState: { term: 0, vote: null, commit: 0 }, confState: conf });
        expect(storage.firstIndex()).toBe(1);
        expect(storage.lastIndex()).toBe(0);
        expect(storage.term(0)).toBe(0);
        expect(storage.entries(1, 1)).toEqual([]);
        expect(storage.snapshot().meta).toEqual({ index: 0, term: 0, conf });
        expect(() => storage.term(1)).toThrow(UnavailableError);
      });
    });

    it('appended entries are readable in order, and later appends extend the log', async () => {
      const s = await fresh();
      await s.storage.persist({ entries: run(1, 3, 1) }, true);
      await s.storage.persist({ entries: [entry(4, 2, bytes()), entry(5, 2, bytes(1, 2, 3), 'conf')] }, true);
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.firstIndex()).toBe(1);
        expect(storage.lastIndex()).toBe(5);
        expect(storage.term(3)).toBe(1);
        expect(storage.term(4)).toBe(2);
        expect(logOf(storage)).toEqual([...run(1, 3, 1), entry(4, 2, bytes()), entry(5, 2, bytes(1, 2, 3), 'conf')].map(plain));
      });
    });

    it('an append that would leave a gap is rejected and changes nothing', async () => {
      const s = await fresh();
      await s.storage.persist({ entries: run(1, 2, 1) }, true);
      await expect(s.storage.persist({ entries: run(4, 5, 1) }, true)).rejects.toThrow(UnavailableError);
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.lastIndex()).toBe(2);
        expect(logOf(storage)).toEqual(run(1, 2, 1).map(plain));
      });
    });

    it('a rejected persist changes nothing, not even the snapshot and hard state it carried', async () => {
      const s = await fresh();
      await s.storage.persist({ entries: run(1, 3, 1), hardState: { term: 1, vote: 'a', commit: 1 } }, true);
      const snap: Snapshot = { meta: { index: 10, term: 2, conf }, data: bytes(1) };
      const gapped = { snapshot: snap, entries: run(12, 13, 2), hardState: { term: 2, vote: null, commit: 10 } };
      await expect(s.storage.persist(gapped, true)).rejects.toThrow(UnavailableError);
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.snapshot().meta.index).toBe(0);
        expect(logOf(storage)).toEqual(run(1, 3, 1).map(plain));
        expect(storage.initialState().hardState).toEqual({ term: 1, vote: 'a', commit: 1 });
      });
    });

    it('entries conflicting with the log replace its suffix, and the entries above them disappear', async () => {
      const s = await fresh();
      await s.storage.persist({ entries: run(1, 6, 1) }, true);
      await s.storage.persist({ entries: run(3, 4, 2) }, true);
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.lastIndex()).toBe(4);
        expect(logOf(storage)).toEqual([...run(1, 2, 1), ...run(3, 4, 2)].map(plain));
        expect(() => storage.term(5)).toThrow(UnavailableError);
      });
      // A longer suffix after the truncation is appended normally.
      await s.storage.persist({ entries: run(5, 7, 3) }, true);
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.lastIndex()).toBe(7);
        expect(storage.term(6)).toBe(3);
      });
    });

    it('term() and entries() throw Compacted below the log and Unavailable above it', async () => {
      const s = await fresh();
      await s.storage.persist({ entries: run(1, 6, 1) }, true);
      await s.storage.createSnapshot(3, conf, bytes(9));
      await checkAndAfterReopen(s, (storage) => {
        expect(() => storage.term(2)).toThrow(CompactedError);
        expect(storage.term(3)).toBe(1); // the snapshot's own term stays readable
        expect(storage.term(6)).toBe(1);
        expect(() => storage.term(7)).toThrow(UnavailableError);
        expect(() => storage.entries(3, 5)).toThrow(CompactedError);
        expect(() => storage.entries(4, 8)).toThrow(UnavailableError);
        expect(storage.entries(4, 7).map((e) => e.index)).toEqual([4, 5, 6]);
        expect(storage.entries(5, 5)).toEqual([]);
      });
    });

    it('entries() stops at maxBytes but always returns at least one entry', async () => {
      const s = await fresh();
      const big = (i: number) => entry(i, 1, new Uint8Array(100).fill(i));
      await s.storage.persist({ entries: [big(1), big(2), big(3), big(4)] }, true);
      const one = entryBytes(big(1));
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.entries(1, 5, 0).map((e) => e.index)).toEqual([1]);
        expect(storage.entries(1, 5, one).map((e) => e.index)).toEqual([1]);
        expect(storage.entries(1, 5, 2 * one).map((e) => e.index)).toEqual([1, 2]);
        expect(storage.entries(2, 5, 3 * one - 1).map((e) => e.index)).toEqual([2, 3]);
        expect(storage.entries(1, 5, 100 * one).map((e) => e.index)).toEqual([1, 2, 3, 4]);
        expect(Array.from(storage.entries(3, 4)[0].data)).toEqual(new Array(100).fill(3));
      });
    });

    it('the hard state round-trips, including a cleared vote', async () => {
      const s = await fresh();
      await s.storage.persist({ hardState: { term: 5, vote: 'b', commit: 0 } }, true);
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.initialState().hardState).toEqual({ term: 5, vote: 'b', commit: 0 });
      });
      await s.storage.persist({ hardState: { term: 2 ** 40, vote: null, commit: 3 }, entries: run(1, 3, 6) }, false);
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.initialState().hardState).toEqual({ term: 2 ** 40, vote: null, commit: 3 });
        expect(storage.lastIndex()).toBe(3);
      });
    });

    it('createSnapshot compacts the log up to its index and keeps the entries after it', async () => {
      const s = await fresh();
      await s.storage.persist({ entries: [...run(1, 4, 1), ...run(5, 10, 2)] }, true);
      const newConf: ConfState = { voters: ['a', 'b', 'c', 'd'], learners: [] };
      await s.storage.createSnapshot(5, newConf, bytes(7, 7, 7));
      await checkAndAfterReopen(s, async (storage) => {
        expect(storage.firstIndex()).toBe(6);
        expect(storage.lastIndex()).toBe(10);
        expect(storage.term(5)).toBe(2);
        expect(storage.snapshot().meta).toEqual({ index: 5, term: 2, conf: newConf });
        expect(Array.from(await readImage(storage.snapshot().data))).toEqual([7, 7, 7]);
        expect(storage.initialState().confState).toEqual(newConf);
        expect(logOf(storage)).toEqual(run(6, 10, 2).map(plain));
      });
      await expect(s.storage.createSnapshot(4, conf, bytes())).rejects.toThrow(SnapshotOutOfDateError);
      await expect(s.storage.createSnapshot(5, conf, bytes())).rejects.toThrow(SnapshotOutOfDateError);
      await expect(s.storage.createSnapshot(11, conf, bytes())).rejects.toThrow(UnavailableError);
      // Compacting the whole log leaves an empty log that starts after the snapshot.
      await s.storage.createSnapshot(10, newConf, bytes(8));
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.firstIndex()).toBe(11);
        expect(storage.lastIndex()).toBe(10);
        expect(storage.term(10)).toBe(2);
        expect(() => storage.term(9)).toThrow(CompactedError);
      });
    });

    it('a snapshot received through persist replaces the whole log, even entries above it', async () => {
      const s = await fresh();
      await s.storage.persist({ entries: run(1, 6, 1) }, true);
      const snapConf: ConfState = { voters: ['a', 'b'], learners: ['e'] };
      const snap: Snapshot = { meta: { index: 4, term: 3, conf: snapConf }, data: bytes(4, 4) };
      await s.storage.persist({ snapshot: snap, hardState: { term: 3, vote: null, commit: 4 } }, true);
      await checkAndAfterReopen(s, async (storage) => {
        expect(storage.firstIndex()).toBe(5);
        expect(storage.lastIndex()).toBe(4);
        expect(storage.term(4)).toBe(3);
        expect(() => storage.term(5)).toThrow(UnavailableError);
        expect(storage.snapshot().meta).toEqual(snap.meta);
        expect(Array.from(await readImage(storage.snapshot().data))).toEqual([4, 4]);
        expect(storage.initialState()).toEqual({ hardState: { term: 3, vote: null, commit: 4 }, confState: snapConf });
      });
      const older: Snapshot = { meta: { index: 4, term: 3, conf: snapConf }, data: bytes() };
      await expect(s.storage.persist({ snapshot: older }, true)).rejects.toThrow(SnapshotOutOfDateError);
    });

    it('a snapshot and the entries after it can arrive in one persist', async () => {
      const s = await fresh();
      await s.storage.persist({ entries: run(1, 2, 1) }, true);
      const snap: Snapshot = { meta: { index: 20, term: 4, conf }, data: bytes(20) };
      await s.storage.persist({ snapshot: snap, entries: run(21, 23, 4), hardState: { term: 4, vote: 'a', commit: 21 } }, true);
      await checkAndAfterReopen(s, (storage) => {
        expect(storage.firstIndex()).toBe(21);
        expect(storage.lastIndex()).toBe(23);
        expect(logOf(storage)).toEqual(run(21, 23, 4).map(plain));
        expect(storage.initialState().hardState).toEqual({ term: 4, vote: 'a', commit: 21 });
      });
    });

    it('entries that partly overlap the snapshot are appended from the first index on', async () => {
      const s = await fresh();
      await s.storage.persist({ entries: run(1, 7, 1) }, true);
      await s.storage.createSnapshot(5, conf, bytes());
      await s.storage.persist({ entries: run(3, 9, 1) }, true);
      await checkAndAfterReopen(s, async (storage) => {
        expect(storage.firstIndex()).toBe(6);
        expect(storage.lastIndex()).toBe(9);
        expect(logOf(storage)).toEqual(run(6, 9, 1).map(plain));
      });
      // Entries wholly inside the snapshot are already committed in it: nothing changes.
      await s.storage.persist({ entries: run(2, 4, 1) }, true);
      await checkAndAfterReopen(s, async (storage) => {
        expect(storage.firstIndex()).toBe(6);
        expect(storage.lastIndex()).toBe(9);
      });
    });
  });
}
