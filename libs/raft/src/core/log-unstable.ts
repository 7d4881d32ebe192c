// The tail of the log not yet known to be on stable storage, plus a snapshot received
// from the leader and not yet persisted. Entries [offset, offset + entries.length) live
// here; [offset, offsetInProgress) were already handed to the driver in a Ready whose
// advance() has not come back yet.

import type { Entry, Snapshot } from './types';

export class UnstableLog {
  entries: Entry[] = [];
  offset: number;
  offsetInProgress: number;
  snapshot: Snapshot | undefined;
  snapshotInProgress = false;

  constructor(offset: number) {
    this.offset = offset;
    this.offsetInProgress = offset;
  }

  /** The last index held here (entry or snapshot), if any. */
  maybeLastIndex(): number | undefined {
    if (this.entries.length > 0) return this.offset + this.entries.length - 1;
    if (this.snapshot) return this.snapshot.meta.index;
    return undefined;
  }

  maybeFirstIndex(): number | undefined {
    return this.snapshot ? this.snapshot.meta.index + 1 : undefined;
  }

  /** The term of entry i if this part of the log knows it. */
  maybeTerm(i: number): number | undefined {
    if (i < this.offset) {
      if (this.snapshot && this.snapshot.meta.index === i) return this.snapshot.meta.term;
      return undefined;
    }
    const k = i - this.offset;
    return k < this.entries.length ? this.entries[k].term : undefined;
  }

  /** Entries not yet handed to the driver. */
  nextEntries(): Entry[] {
    const from = this.offsetInProgress - this.offset;
    return from >= this.entries.length ? [] : this.entries.slice(from);
  }

  hasNextEntries(): boolean {
    return this.offsetInProgress - this.offset < this.entries.length;
  }

  nextSnapshot(): Snapshot | undefined {
    return this.snapshot && !this.snapshotInProgress ? this.snapshot : undefined;
  }

  /** A Ready handed out everything currently here. */
  acceptInProgress(): void {
    if (this.entries.length > 0) this.offsetInProgress = this.offset + this.entries.length;
    if (this.snapshot) this.snapshotInProgress = true;
  }

  /**
   * Entries up to (i, t) are persisted. Ignored if entry i has since been replaced by a
   * different term (a leader change truncated it while the write was in flight).
   */
  stableTo(i: number, t: number): void {
    if (i < this.offset) return;
    const k = i - this.offset;
    if (k >= this.entries.length || this.entries[k].term !== t) return;
    this.entries = k + 1 === this.entries.length ? [] : this.entries.slice(k + 1);
    this.offset = i + 1;
    this.offsetInProgress = Math.max(this.offsetInProgress, this.offset);
  }

  stableSnapTo(i: number): void {
    if (this.snapshot && this.snapshot.meta.index === i) {
      this.snapshot = undefined;
      this.snapshotInProgress = false;
    }
  }

  restore(snap: Snapshot): void {
    this.offset = snap.meta.index + 1;
    this.offsetInProgress = this.offset;
    this.entries = [];
    this.snapshot = snap;
    this.snapshotInProgress = false;
  }

  /** Appends `ents` (contiguous), truncating anything here at or above ents[0].index. */
  truncateAndAppend(ents: readonly Entry[]): void {
    const from = ents[0].index;
    const end = this.offset + this.entries.length;
    if (from === end) {
      for (const e of ents) this.entries.push(e);
    } else if (from <= this.offset) {
      // Replaces everything unstable; the stable log above `from` is overridden too.
      this.offset = from;
      this.offsetInProgress = from;
      this.entries = ents.slice();
    } else {
      const kept = this.entries.slice(0, from - this.offset);
      for (const e of ents) kept.push(e);
      this.entries = kept;
      this.offsetInProgress = Math.min(this.offsetInProgress, from);
    }
  }

  /** Entries [lo, hi) which must all lie in [offset, end). */
  slice(lo: number, hi: number): Entry[] {
    return this.entries.slice(lo - this.offset, hi - this.offset);
  }
}
