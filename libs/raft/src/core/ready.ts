// Building a Ready from the core's state, and recording what a Ready handed out, so the
// same work is never handed out twice (etcd's RawNode.readyWithoutAccept/acceptReady).

import { applyConfEntry } from './membership';
import type { Raft } from './raft';
import { flushBroadcast } from './replication';
import type { HardState, Ready, SoftState } from './types';

export function softStateOf(r: Raft): SoftState {
  return { leader: r.lead, role: r.role };
}

export function hardStateOf(r: Raft): HardState {
  return { term: r.term, vote: r.vote, commit: r.log.committed };
}

export function sameSoftState(a: SoftState, b: SoftState): boolean {
  return a.leader === b.leader && a.role === b.role;
}

export function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

export function hasReady(r: Raft, prevSoft: SoftState, prevHard: HardState): boolean {
  return (
    r.pendingBroadcast ||
    r.msgs.length > 0 ||
    r.readStates.length > 0 ||
    r.log.unstable.hasNextEntries() ||
    r.log.unstable.nextSnapshot() !== undefined ||
    r.log.hasNextCommittedEntries() ||
    // Compared field by field: hasReady is polled often and should not allocate.
    r.lead !== prevSoft.leader ||
    r.role !== prevSoft.role ||
    r.term !== prevHard.term ||
    r.vote !== prevHard.vote ||
    r.log.committed !== prevHard.commit
  );
}

/**
 * Collects everything to persist, send and apply, and marks it handed out. The driver
 * persists (one synced write when mustSync), sends and applies in the order planReady
 * gives (driver-order.ts: only App and Heartbeat may leave before the write is durable;
 * votes and append acks never), then calls advance().
 */
export function takeReady(r: Raft, prevSoft: SoftState, prevHard: HardState): Ready {
  flushBroadcast(r);
  const log = r.log;
  const rd: Ready = {
    entries: log.unstable.nextEntries(),
    committedEntries: log.nextCommittedEntries(r.maxCommittedSizePerReady),
    messages: r.msgs,
    readStates: r.readStates,
    mustSync: false,
  };
  const snapshot = log.unstable.nextSnapshot();
  if (snapshot) rd.snapshot = snapshot;
  const soft = softStateOf(r);
  if (!sameSoftState(soft, prevSoft)) rd.softState = soft;
  const hard = hardStateOf(r);
  if (!sameHardState(hard, prevHard)) rd.hardState = hard;
  rd.mustSync =
    rd.entries.length > 0 || snapshot !== undefined || hard.term !== prevHard.term || hard.vote !== prevHard.vote;

  r.msgs = [];
  r.readStates = [];
  log.unstable.acceptInProgress();
  if (rd.committedEntries.length > 0) log.acceptApplying(rd.committedEntries[rd.committedEntries.length - 1].index);
  return rd;
}

/** The driver persisted and applied `rd`. */
export function advanceReady(r: Raft, rd: Ready): void {
  const log = r.log;
  if (rd.entries.length > 0) {
    const last = rd.entries[rd.entries.length - 1];
    log.unstable.stableTo(last.index, last.term);
  }
  if (rd.snapshot) {
    log.unstable.stableSnapTo(rd.snapshot.meta.index);
    log.appliedTo(rd.snapshot.meta.index);
  }
  const committed = rd.committedEntries;
  if (committed.length > 0) {
    for (const e of committed) {
      // Membership takes effect as its entry is applied (etcd's model); status().conf
      // is therefore the configuration as of the last applied entry.
      if (e.type === 'conf') applyConfEntry(r, e);
    }
    log.appliedTo(committed[committed.length - 1].index);
    r.reduceUncommittedSize(committed);
  }
}
