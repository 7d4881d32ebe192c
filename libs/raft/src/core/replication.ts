// The leader's sending side of log replication (paper 5.3): App messages with flow
// control per follower, snapshots for followers behind compaction, and the batched
// broadcast of new entries and commit indexes.

import { CompactedError } from './errors';
import { entryBytes } from './storage';
import type { Raft } from './raft';
import type { Entry, NodeId } from './types';

/**
 * Sends one App to `to` if its flow control allows it. Returns whether a message went
 * out. An App with no entries is sent only when `sendIfEmpty` (to carry a commit index
 * or probe). Falls back to a snapshot when the entries are compacted.
 */
export function sendAppend(r: Raft, to: NodeId, sendIfEmpty: boolean): boolean {
  const pr = r.tracker.progress.get(to);
  if (!pr || to === r.id || pr.isPaused()) return false;
  const prevIndex = pr.next - 1;
  let prevTerm: number;
  let entries: Entry[];
  try {
    prevTerm = r.log.term(prevIndex);
    entries = r.log.entriesFrom(pr.next, r.maxSizePerMsg);
  } catch (e) {
    if (e instanceof CompactedError) return sendSnapshot(r, to);
    throw e;
  }
  if (entries.length === 0 && !sendIfEmpty) return false;
  let bytes = 0;
  for (const e of entries) bytes += entryBytes(e);
  const commit = r.log.committed;
  r.send({ type: 'App', to, index: prevIndex, logTerm: prevTerm, entries, commit });
  pr.sentEntries(entries.length, prevIndex + entries.length, bytes);
  pr.sentCommit = Math.max(pr.sentCommit, commit);
  return true;
}

/** Sends as many Apps as flow control allows (replicate state pipelines them). */
export function sendAppendsWhileAllowed(r: Raft, to: NodeId, sendIfEmpty: boolean): void {
  if (!sendAppend(r, to, sendIfEmpty)) return;
  while (sendAppend(r, to, false)) {
    // keep streaming until paused or caught up
  }
}

/**
 * Replicate state with a full window: an empty App at next - 1, outside flow control. If
 * the follower lost the pipelined Apps it rejects it and we fall back to probing; if they
 * are merely slow it acks what it has. Sent at most once per heartbeat response.
 */
export function sendWindowProbe(r: Raft, to: NodeId): void {
  const pr = r.tracker.progress.get(to);
  if (!pr || pr.state !== 'replicate') return;
  const prevIndex = pr.next - 1;
  const prevTerm = r.log.termOrZero(prevIndex);
  if (prevTerm === 0 && prevIndex > 0) return; // compacted: the next rejection leads to a snapshot
  r.send({ type: 'App', to, index: prevIndex, logTerm: prevTerm, entries: [], commit: r.log.committed });
}

function sendSnapshot(r: Raft, to: NodeId): boolean {
  const pr = r.tracker.progress.get(to)!;
  // Do not ship a (possibly large) snapshot to a follower we have not heard from lately.
  if (!pr.recentActive) return false;
  const snapshot = r.log.snapshot();
  if (snapshot.meta.index === 0) return false;
  pr.becomeSnapshot(snapshot.meta.index);
  r.send({ type: 'Snap', to, snapshot });
  return true;
}

export function sendTimeoutNow(r: Raft, to: NodeId): void {
  r.send({ type: 'TimeoutNow', to });
}

/**
 * Leader: sends what accumulated since the last Ready (new entries, a new commit index)
 * to every follower, so a burst of proposals or acks costs one App per follower.
 */
export function flushBroadcast(r: Raft): void {
  if (!r.pendingBroadcast) return;
  r.pendingBroadcast = false;
  if (r.role !== 'leader') return;
  const commit = r.log.committed;
  for (const [id, pr] of r.tracker.progress) {
    if (id === r.id) continue;
    sendAppendsWhileAllowed(r, id, pr.canBumpCommit(commit));
  }
}
