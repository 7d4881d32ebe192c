// The storage contract between the core and its adapters, and the in-memory reference.
//
// The core only *reads* storage, synchronously (LogReader). Writes happen in the driver,
// from a Ready, through Storage.persist: one call per Ready, synced when Ready.mustSync.
// Adapters keep the un-compacted log in memory so reads stay synchronous; the durable
// copy (LevelDB) is what survives a crash.

import { CompactedError, SnapshotOutOfDateError, UnavailableError } from './errors';
import type { ConfState, Entry, HardState, Snapshot, SnapshotImage } from './types';

export interface InitialState {
  hardState: HardState;
  confState: ConfState;
}

/** What the core reads. Indices follow the paper: the log is [firstIndex, lastIndex]. */
export interface LogReader {
  initialState(): InitialState;
  /** Index of the first entry still in the log (snapshot index + 1). */
  firstIndex(): number;
  lastIndex(): number;
  /**
   * Term of entry i for i in [firstIndex - 1, lastIndex] (firstIndex - 1 is the snapshot's).
   * Throws CompactedError below that range and UnavailableError above it.
   */
  term(index: number): number;
  /** Entries [lo, hi), at least one entry even if it alone exceeds maxBytes. */
  entries(lo: number, hi: number, maxBytes?: number): Entry[];
  snapshot(): Snapshot;
}

export interface PersistUpdate {
  hardState?: HardState;
  /** Appended after truncating any existing entries at or above entries[0].index. */
  entries?: Entry[];
  /** Replaces the whole log up to snapshot.meta.index (a snapshot received from the leader). */
  snapshot?: Snapshot;
}

export interface Storage extends LogReader {
  /**
   * One atomic write of everything a Ready asks to persist. When `sync` is true the
   * promise resolves only after the data is on stable storage; the driver sends the
   * Ready's messages only after that.
   */
  persist(update: PersistUpdate, sync: boolean): Promise<void>;
  /**
   * Records a snapshot the local state machine took at `index` (<= applied) and
   * discards log entries up to `index`, keeping entries after it. The image may come as
   * its pieces, as the state machine produces them: a storage that keeps images in files
   * writes each as it arrives and never holds the whole image (LevelStorage). Take them
   * promptly: the driver may hold apply until the last is taken. When this rejects before
   * taking the last piece, the caller closes the pieces.
   */
  createSnapshot(index: number, conf: ConfState, image: ImagePieces): Promise<void>;
  close(): Promise<void>;
}

/** A snapshot image whole, or its pieces in order. */
export type ImagePieces = Uint8Array | AsyncIterable<Uint8Array>;

/** The image whole: its pieces joined (for storages that keep images in memory). */
export async function joinPieces(image: ImagePieces): Promise<Uint8Array> {
  if (image instanceof Uint8Array) return image;
  const pieces: Uint8Array[] = [];
  for await (const piece of image) pieces.push(piece);
  if (pieces.length === 1) return pieces[0];
  const whole = new Uint8Array(pieces.reduce((sum, p) => sum + p.byteLength, 0));
  let at = 0;
  for (const piece of pieces) {
    whole.set(piece, at);
    at += piece.byteLength;
  }
  return whole;
}

export const emptyHardState = (): HardState => ({ term: 0, vote: null, commit: 0 });

export function entryBytes(e: Entry): number {
  return e.data.byteLength + 24;
}

/** Takes entries from the front of `ents` while their total stays within maxBytes (at least one). */
export function limitSize(ents: Entry[], maxBytes: number | undefined): Entry[] {
  if (maxBytes === undefined || ents.length === 0) return ents;
  let size = entryBytes(ents[0]);
  let n = 1;
  for (; n < ents.length; n++) {
    size += entryBytes(ents[n]);
    if (size > maxBytes) break;
  }
  return n === ents.length ? ents : ents.slice(0, n);
}

/**
 * The in-memory reference Storage. `ents[0]` is a dummy entry holding the snapshot's
 * index and term, so term(firstIndex - 1) needs no special case.
 */
export class MemoryStorage implements Storage {
  private hardState: HardState = emptyHardState();
  private snap: Snapshot = { meta: { index: 0, term: 0, conf: { voters: [], learners: [] } }, data: new Uint8Array() };
  private ents: Entry[] = [{ index: 0, term: 0, type: 'normal', data: new Uint8Array() }];

  /** A fresh storage for a brand-new group whose initial members are `voters`. */
  static bootstrap(voters: string[], learners: string[] = []): MemoryStorage {
    const s = new MemoryStorage();
    s.snap = { ...s.snap, meta: { ...s.snap.meta, conf: { voters: [...voters], learners: [...learners] } } };
    return s;
  }

  initialState(): InitialState {
    return { hardState: { ...this.hardState }, confState: cloneConf(this.snap.meta.conf) };
  }

  firstIndex(): number {
    return this.ents[0].index + 1;
  }

  lastIndex(): number {
    return this.ents[0].index + this.ents.length - 1;
  }

  term(index: number): number {
    const offset = this.ents[0].index;
    if (index < offset) throw new CompactedError(index, offset + 1);
    if (index - offset >= this.ents.length) throw new UnavailableError(index, this.lastIndex());
    return this.ents[index - offset].term;
  }

  entries(lo: number, hi: number, maxBytes?: number): Entry[] {
    const offset = this.ents[0].index;
    if (lo <= offset) throw new CompactedError(lo, offset + 1);
    if (hi > this.lastIndex() + 1) throw new UnavailableError(hi - 1, this.lastIndex());
    return limitSize(this.ents.slice(lo - offset, hi - offset), maxBytes);
  }

  snapshot(): Snapshot {
    return this.snap;
  }

  async persist(update: PersistUpdate, _sync: boolean): Promise<void> {
    this.persistNow(update);
  }

  /** Synchronous persist, for the simulator and tests that drive the core by hand. */
  persistNow(update: PersistUpdate): void {
    // All or nothing, like one batch: a rejected update (e.g. entries leaving a gap after
    // its snapshot) must not leave the snapshot applied. The fields are replaced, never
    // mutated in place, except by append's last step, after which nothing can throw; so
    // keeping the old references is a full undo.
    const before = { snap: this.snap, ents: this.ents, hardState: this.hardState };
    try {
      if (update.snapshot) this.applySnapshot(update.snapshot);
      if (update.entries && update.entries.length > 0) this.append(update.entries);
      if (update.hardState) this.hardState = { ...update.hardState };
    } catch (err) {
      ({ snap: this.snap, ents: this.ents, hardState: this.hardState } = before);
      throw err;
    }
  }

  async createSnapshot(index: number, conf: ConfState, image: ImagePieces): Promise<void> {
    this.checkSnapshotIndex(index); // before taking the pieces, as a storage that writes them as they come does
    this.createSnapshotNow(index, conf, await joinPieces(image));
  }

  createSnapshotNow(index: number, conf: ConfState, data: SnapshotImage): void {
    this.checkSnapshotIndex(index);
    const offset = this.ents[0].index;
    const term = this.ents[index - offset].term;
    this.snap = { meta: { index, term, conf: cloneConf(conf) }, data };
    this.ents = this.ents.slice(index - offset);
    this.ents[0] = { index, term, type: 'normal', data: new Uint8Array() };
  }

  private checkSnapshotIndex(index: number): void {
    if (index <= this.snap.meta.index) throw new SnapshotOutOfDateError(index, this.snap.meta.index);
    if (index > this.lastIndex()) throw new UnavailableError(index, this.lastIndex());
  }

  async close(): Promise<void> {}

  private applySnapshot(snap: Snapshot): void {
    if (snap.meta.index <= this.snap.meta.index) throw new SnapshotOutOfDateError(snap.meta.index, this.snap.meta.index);
    this.snap = { meta: { ...snap.meta, conf: cloneConf(snap.meta.conf) }, data: snap.data };
    this.ents = [{ index: snap.meta.index, term: snap.meta.term, type: 'normal', data: new Uint8Array() }];
  }

  private append(entries: Entry[]): void {
    const first = this.firstIndex();
    // Entries already compacted into the snapshot are committed and identical: skip them.
    if (entries[entries.length - 1].index < first) return;
    if (entries[0].index < first) entries = entries.slice(first - entries[0].index);
    const at = entries[0].index - this.ents[0].index;
    if (at > this.ents.length) {
      throw new UnavailableError(entries[0].index, this.lastIndex());
    }
    // In place: copying the whole log on every persist made appends O(log length).
    // Nothing below can throw, so persistNow's all-or-nothing undo stays valid.
    if (at < this.ents.length) this.ents.length = at;
    for (const e of entries) this.ents.push(e);
  }
}

export function cloneConf(c: ConfState): ConfState {
  return { voters: [...c.voters], learners: [...c.learners] };
}
