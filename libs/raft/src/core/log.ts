// The Raft log as the core sees it: stable entries read from storage, the unstable tail,
// and the commit/apply cursors. All reads are synchronous; nothing here does I/O.

import { CompactedError, UnavailableError } from './errors';
import { UnstableLog } from './log-unstable';
import { entryBytes, type LogReader } from './storage';
import type { Entry, Snapshot } from './types';

export class RaftLog {
  readonly unstable: UnstableLog;
  committed: number;
  /** Highest index the state machine has applied (advance() reported it). */
  applied: number;
  /** Highest index handed out in a Ready for applying (applied <= applying <= committed). */
  applying: number;

  constructor(readonly storage: LogReader, applied: number) {
    const first = storage.firstIndex();
    const last = storage.lastIndex();
    this.unstable = new UnstableLog(last + 1);
    this.committed = first - 1;
    this.applied = Math.max(first - 1, applied);
    this.applying = this.applied;
  }

  firstIndex(): number {
    return this.unstable.maybeFirstIndex() ?? this.storage.firstIndex();
  }

  lastIndex(): number {
    return this.unstable.maybeLastIndex() ?? this.storage.lastIndex();
  }

  lastTerm(): number {
    return this.term(this.lastIndex());
  }

  /** Term of entry i; throws CompactedError/UnavailableError outside [firstIndex - 1, lastIndex]. */
  term(i: number): number {
    const u = this.unstable.maybeTerm(i);
    if (u !== undefined) return u;
    const last = this.lastIndex();
    if (i > last) throw new UnavailableError(i, last);
    // Below an unstable snapshot everything is compacted, whatever storage still holds.
    const snap = this.unstable.snapshot;
    if (snap && i < snap.meta.index) throw new CompactedError(i, snap.meta.index + 1);
    return this.storage.term(i);
  }

  /** Term of entry i, or 0 when it is compacted or beyond the end. */
  termOrZero(i: number): number {
    try {
      return this.term(i);
    } catch (e) {
      if (e instanceof CompactedError || e instanceof UnavailableError) return 0;
      throw e;
    }
  }

  matchTerm(i: number, t: number): boolean {
    if (i > this.lastIndex()) return false;
    return this.termOrZero(i) === t;
  }

  /** Raft paper 5.4.1: is a log ending at (lastIndex, lastTerm) at least as up to date as ours? */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const ourTerm = this.lastTerm();
    return lastTerm > ourTerm || (lastTerm === ourTerm && lastIndex >= this.lastIndex());
  }

  /**
   * Entries [lo, lastIndex] capped at maxBytes (at least one). Throws CompactedError when
   * lo is below firstIndex (the caller sends a snapshot instead).
   */
  entriesFrom(lo: number, maxBytes: number): Entry[] {
    const last = this.lastIndex();
    if (lo > last) return [];
    return this.slice(lo, last + 1, maxBytes);
  }

  /** Entries [lo, hi) capped at maxBytes (at least one). */
  slice(lo: number, hi: number, maxBytes: number): Entry[] {
    const first = this.firstIndex();
    if (lo < first) throw new CompactedError(lo, first);
    const uOffset = this.unstable.offset;
    let ents: Entry[];
    if (lo >= uOffset) {
      // Size the slice before copying it: this is the leader's hot path.
      const all = this.unstable.entries;
      const from = lo - uOffset;
      const end = Math.min(hi - uOffset, all.length);
      let n = from + 1;
      for (let size = from < end ? entryBytes(all[from]) : 0; n < end; n++) {
        size += entryBytes(all[n]);
        if (size > maxBytes) break;
      }
      return all.slice(from, Math.min(n, end));
    } else {
      const stableHi = Math.min(hi, uOffset);
      ents = this.storage.entries(lo, stableHi, maxBytes);
      // Storage stopped early because of the size cap: do not go on into the unstable part.
      if (ents.length < stableHi - lo || hi <= uOffset) return ents;
      const tail = this.unstable.slice(uOffset, hi);
      ents = ents.length === 0 ? tail : ents.concat(tail);
    }
    return limitBytes(ents, maxBytes);
  }

  /**
   * The follower's side of AppendEntries (paper 5.3): if our entry at prevIndex has
   * prevTerm, append `ents` (deleting a conflicting suffix, keeping matching entries)
   * and return the index of the last new entry; otherwise return undefined.
   */
  maybeAppend(prevIndex: number, prevTerm: number, committed: number, ents: Entry[]): number | undefined {
    if (!this.matchTerm(prevIndex, prevTerm)) return undefined;
    const lastNew = prevIndex + ents.length;
    const conflict = this.findConflict(ents);
    if (conflict !== 0) {
      if (conflict <= this.committed) {
        throw new Error(`raft invariant: entry ${conflict} conflicts with committed entry (commit ${this.committed})`);
      }
      const from = conflict - ents[0].index;
      this.unstable.truncateAndAppend(from === 0 ? ents : ents.slice(from));
    }
    this.commitTo(Math.min(committed, lastNew));
    return lastNew;
  }

  /** The index of the first entry of `ents` that is missing or differs in term here; 0 if none. */
  private findConflict(ents: Entry[]): number {
    const last = this.lastIndex();
    for (const e of ents) {
      if (e.index > last || !this.matchTerm(e.index, e.term)) return e.index;
    }
    return 0;
  }

  /**
   * Fast backtracking (etcd's findConflictByTerm): the largest index <= `index` whose
   * term is <= `term`, with that term (0 if unknown). Skips a whole divergent term at once.
   */
  findConflictByTerm(index: number, term: number): { index: number; term: number } {
    for (; index > 0; index--) {
      let ours: number;
      try {
        ours = this.term(index);
      } catch {
        return { index, term: 0 };
      }
      if (ours <= term) return { index, term: ours };
    }
    return { index: 0, term: 0 };
  }

  /** Appends entries the leader created; returns the new last index. */
  append(ents: readonly Entry[]): number {
    if (ents.length === 0) return this.lastIndex();
    if (ents[0].index - 1 < this.committed) {
      throw new Error(`raft invariant: append at ${ents[0].index} is below commit ${this.committed}`);
    }
    this.unstable.truncateAndAppend(ents);
    return this.lastIndex();
  }

  commitTo(i: number): void {
    if (i <= this.committed) return;
    const last = this.lastIndex();
    if (i > last) throw new Error(`raft invariant: commit ${i} beyond last index ${last}`);
    this.committed = i;
  }

  /** Whether committed entries wait to be handed out (none while a snapshot is pending). */
  hasNextCommittedEntries(): boolean {
    if (this.unstable.snapshot) return false;
    return this.committed > this.applying;
  }

  nextCommittedEntries(maxBytes: number): Entry[] {
    if (!this.hasNextCommittedEntries()) return [];
    const lo = Math.max(this.applying + 1, this.firstIndex());
    return this.slice(lo, this.committed + 1, maxBytes);
  }

  acceptApplying(i: number): void {
    this.applying = Math.max(this.applying, i);
  }

  appliedTo(i: number): void {
    if (i > this.committed) throw new Error(`raft invariant: applied ${i} beyond commit ${this.committed}`);
    this.applied = Math.max(this.applied, i);
    this.applying = Math.max(this.applying, i);
  }

  /** Replaces the log with a snapshot from the leader (entries after it are discarded). */
  restore(snap: Snapshot): void {
    this.committed = snap.meta.index;
    this.unstable.restore(snap);
  }

  snapshot(): Snapshot {
    return this.unstable.snapshot ?? this.storage.snapshot();
  }
}

function limitBytes(ents: Entry[], maxBytes: number): Entry[] {
  if (ents.length <= 1) return ents;
  let size = entryBytes(ents[0]);
  for (let n = 1; n < ents.length; n++) {
    size += entryBytes(ents[n]);
    if (size > maxBytes) return ents.slice(0, n);
  }
  return ents;
}

export function payloadBytes(ents: readonly Entry[]): number {
  let n = 0;
  for (const e of ents) n += e.data.byteLength;
  return n;
}
