// Storage that can lose power. A Ready's persist is first *written* (visible to the
// core, like the OS page cache) and only becomes durable at a sync point. A crash keeps
// the durable image plus a random prefix of the written-but-unsynced updates (the torn
// un-synced tail) and throws the rest away; the restarted node reads only what survived.
//
// The driver's contract (src/core/driver-order.ts): a Ready with mustSync is written and
// synced; only a leader's App and Heartbeat may leave before the sync, every message that
// promises durable state after it. A commit-only hard state is not written at all until
// the next synced write carries it, so a crash may lose it.
//
// Unlike LevelStorage, which shows a write to readers only once it resolved, this storage
// shows it at once. The core cannot tell: entries of a Ready stay in its unstable log,
// which shadows storage, until advance(), and advance() comes after the write is durable.

import { cloneConf, MemoryStorage, type InitialState, type LogReader, type PersistUpdate } from '../../src/core/storage';
import { imageInMemory, type ConfState, type Entry, type Snapshot } from '../../src/core/types';
import { cloneEntry } from './network';

export class CrashStorage implements LogReader {
  private live: MemoryStorage;
  private readonly durable: MemoryStorage;
  private pending: PersistUpdate[] = [];

  /** `onDurable` sees every update as it reaches the disk, in order (the checker's hook). */
  constructor(
    voters: string[],
    private readonly onDurable: (update: PersistUpdate) => void = () => {},
  ) {
    this.durable = MemoryStorage.bootstrap(voters);
    this.live = copyStorage(this.durable);
  }

  // --- LogReader: the core sees everything written, synced or not. ---
  initialState(): InitialState {
    return this.live.initialState();
  }
  firstIndex(): number {
    return this.live.firstIndex();
  }
  lastIndex(): number {
    return this.live.lastIndex();
  }
  term(index: number): number {
    return this.live.term(index);
  }
  entries(lo: number, hi: number, maxBytes?: number): Entry[] {
    return this.live.entries(lo, hi, maxBytes);
  }
  snapshot(): Snapshot {
    return this.live.snapshot();
  }

  /** Writes one Ready's update; it is not durable until sync(). */
  write(update: PersistUpdate): void {
    if (!update.hardState && !update.snapshot && !(update.entries && update.entries.length > 0)) return;
    this.live.persistNow(update);
    // The disk keeps its own copy: a core that later mutates objects it handed out
    // must not be able to rewrite history behind the checker's back.
    this.pending.push(cloneUpdate(update));
  }

  get unsyncedWrites(): number {
    return this.pending.length;
  }

  /** Makes every written update durable, in order. Returns the updates that became durable. */
  sync(): PersistUpdate[] {
    const synced = this.pending;
    for (const u of synced) this.makeDurable(u);
    this.pending = [];
    return synced;
  }

  /**
   * Records a snapshot the state machine took at `index` and compacts the log. A real
   * store writes it with a sync, so pending writes are flushed first.
   */
  compact(index: number, conf: ConfState, data: Uint8Array): PersistUpdate[] {
    const synced = this.sync();
    this.live.createSnapshotNow(index, conf, data);
    this.durable.createSnapshotNow(index, structuredClone(conf), data.slice());
    return synced;
  }

  /**
   * Power loss: the first `keep` unsynced writes reached the disk (each write is atomic,
   * as one batch is), the rest are lost; the simulator draws `keep` at random in
   * [0, unsyncedWrites]. Returns the updates that survived and how many were lost.
   * After this the core must be rebuilt from this storage.
   */
  crash(keep: number): { survived: PersistUpdate[]; lost: number } {
    if (keep < 0 || keep > this.pending.length) throw new RangeError(`cannot keep ${keep} of ${this.pending.length} writes`);
    const survived = this.pending.slice(0, keep);
    for (const u of survived) this.makeDurable(u);
    const lost = this.pending.length - keep;
    this.pending = [];
    this.live = copyStorage(this.durable);
    return { survived, lost };
  }

  private makeDurable(update: PersistUpdate): void {
    this.durable.persistNow(update);
    this.onDurable(update);
  }

  // --- The durable image, for the invariant checker. ---
  durableFirstIndex(): number {
    return this.durable.firstIndex();
  }
  durableLastIndex(): number {
    return this.durable.lastIndex();
  }
  /** Term of durable entry i, or undefined if it is compacted below the snapshot or missing. */
  durableTerm(index: number): number | undefined {
    if (index < this.durable.firstIndex() - 1 || index > this.durable.lastIndex()) return undefined;
    return this.durable.term(index);
  }
  durableEntries(lo: number, hi: number): Entry[] {
    return hi > lo ? this.durable.entries(lo, hi) : [];
  }
  durableSnapshot(): Snapshot {
    return this.durable.snapshot();
  }
  durableInitialState(): InitialState {
    return this.durable.initialState();
  }
}

function cloneUpdate(u: PersistUpdate): PersistUpdate {
  const c: PersistUpdate = {};
  if (u.hardState) c.hardState = { ...u.hardState };
  if (u.entries) c.entries = u.entries.map(cloneEntry);
  if (u.snapshot) {
    const meta = u.snapshot.meta;
    c.snapshot = { meta: { ...meta, conf: cloneConf(meta.conf) }, data: imageInMemory(u.snapshot.data).slice() };
  }
  return c;
}

/** A deep, independent copy of a MemoryStorage, built only through its public API. */
export function copyStorage(src: MemoryStorage): MemoryStorage {
  const snap = src.snapshot();
  const dst = MemoryStorage.bootstrap(snap.meta.conf.voters, snap.meta.conf.learners);
  if (snap.meta.index > 0) dst.persistNow({ snapshot: structuredClone(snap) });
  const first = src.firstIndex();
  const last = src.lastIndex();
  const entries = last >= first ? structuredClone(src.entries(first, last + 1)) : [];
  dst.persistNow({ entries, hardState: src.initialState().hardState });
  return dst;
}
