// The leader's view of one follower (etcd's tracker.Progress): how far its log matches
// and how entries are being sent to it.
//
// - probe: we do not know where the follower's log diverges; send one App, then wait for
//   an answer (or the next heartbeat response) before sending another.
// - replicate: the follower is caught up to `match`; stream entries optimistically
//   (next runs ahead of match), bounded by the Inflights window.
// - snapshot: a snapshot is on its way; send nothing until reportSnapshot or an AppResp
//   shows the follower has it.

import { Inflights } from './inflights';

export type ProgressState = 'probe' | 'replicate' | 'snapshot';

export class Progress {
  match = 0;
  next: number;
  state: ProgressState = 'probe';
  /** Probe state: an App was sent and no answer has come back yet. */
  probeSent = false;
  /** Snapshot state: the index of the snapshot being sent. */
  pendingSnapshot = 0;
  /** Heard from since the last check-quorum round. */
  recentActive = false;
  /** The highest commit index we told this follower in an App. */
  sentCommit = 0;
  readonly inflights: Inflights;

  constructor(next: number, public isLearner: boolean, maxInflightMsgs: number, maxInflightBytes: number) {
    this.next = next;
    this.inflights = new Inflights(maxInflightMsgs, maxInflightBytes);
  }

  becomeProbe(): void {
    // After a snapshot the follower has at least pendingSnapshot; probe from there.
    if (this.state === 'snapshot') {
      const pending = this.pendingSnapshot;
      this.resetState('probe');
      this.next = Math.max(this.match + 1, pending + 1);
    } else {
      this.resetState('probe');
      this.next = this.match + 1;
    }
    this.sentCommit = Math.min(this.sentCommit, this.next - 1);
  }

  becomeReplicate(): void {
    this.resetState('replicate');
    this.next = this.match + 1;
  }

  becomeSnapshot(snapshotIndex: number): void {
    this.resetState('snapshot');
    this.pendingSnapshot = snapshotIndex;
    this.next = snapshotIndex + 1;
  }

  /** An AppResp acknowledged index n. Returns whether match advanced. */
  maybeUpdate(n: number): boolean {
    let updated = false;
    if (this.match < n) {
      this.match = n;
      updated = true;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, n + 1);
    return updated;
  }

  /**
   * An AppResp rejected `rejected` (the index of the entry before the ones we sent);
   * `matchHint` is the highest index that may match. Returns false if the rejection is
   * stale (an answer to an App we no longer care about), true if next moved back.
   */
  maybeDecrTo(rejected: number, matchHint: number): boolean {
    if (this.state === 'replicate') {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, matchHint + 1), this.match + 1);
    this.probeSent = false;
    return true;
  }

  /** Records an App carrying `entries` entries whose last index is `lastIndex`. */
  sentEntries(entries: number, lastIndex: number, bytes: number): void {
    if (this.state === 'replicate') {
      if (entries > 0) {
        this.next = lastIndex + 1;
        this.inflights.add(lastIndex, bytes);
      }
    } else if (this.state === 'probe') {
      this.probeSent = true;
    }
  }

  /** Whether the commit index `commit` is news this follower can use. */
  canBumpCommit(commit: number): boolean {
    return commit > this.sentCommit && this.sentCommit < this.next - 1;
  }

  isPaused(): boolean {
    switch (this.state) {
      case 'probe':
        return this.probeSent;
      case 'replicate':
        return this.inflights.full();
      case 'snapshot':
        return true;
    }
  }

  private resetState(state: ProgressState): void {
    this.state = state;
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.inflights.reset();
  }
}
