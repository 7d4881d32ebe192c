// Applying committed membership changes (Raft thesis 4.1, applied as in etcd when the
// entry is applied): the new configuration, the leader's progress map, and the hand-off
// of a leader that removed itself (thesis 4.2.2).

import { applyConfChangeTo, confChangeProblem, decodeConfEntry } from './confchange';
import type { Raft } from './raft';
import { sendAppend, sendTimeoutNow } from './replication';
import { maybeCommit } from './step-leader';
import type { ConfState, Entry, NodeId } from './types';

/** The configuration after conf entry `e` is applied to `conf`, or null if it changes nothing. */
export function confAfterEntry(conf: ConfState, e: Entry): ConfState | null {
  const { cc, confAfter } = decodeConfEntry(e.data);
  if (confAfter) return confAfter;
  return confChangeProblem(conf, cc) === null ? applyConfChangeTo(conf, cc) : null;
}

/** Applies a committed conf entry (called as it is handed out for apply). */
export function applyConfEntry(r: Raft, e: Entry): void {
  const next = confAfterEntry(r.tracker.conf, e);
  if (next === null) return;
  const wasVoter = r.tracker.isVoter(r.id);
  r.tracker.conf = next;
  syncProgressWithConf(r);
  if (r.leadTransferee !== null && !r.tracker.isVoter(r.leadTransferee)) r.leadTransferee = null;
  if (r.role !== 'leader') return;
  if (wasVoter && !r.tracker.isMember(r.id)) {
    stepDownAfterRemoval(r);
    return;
  }
  // The quorum may have shrunk (commit moves) and a new member waits for its first App.
  maybeCommit(r);
  r.pendingBroadcast = true;
}

/** Progress for every member of the configuration, and for no one else. */
function syncProgressWithConf(r: Raft): void {
  const prs = r.tracker.progress;
  for (const id of prs.keys()) if (!r.tracker.isMember(id)) prs.delete(id);
  const ensure = (id: NodeId, isLearner: boolean) => {
    const pr = prs.get(id);
    if (pr) {
      pr.isLearner = isLearner;
      return;
    }
    const added = r.tracker.newProgress(r.log.lastIndex() + 1, isLearner);
    // Counted as active so check-quorum does not trip before it had a chance to answer.
    added.recentActive = true;
    prs.set(id, added);
  };
  for (const id of r.tracker.conf.voters) ensure(id, false);
  for (const id of r.tracker.conf.learners) ensure(id, true);
}

/** A leader that removed itself hands off to the most up-to-date voter, then steps down. */
function stepDownAfterRemoval(r: Raft): void {
  let best: NodeId | null = null;
  let bestMatch = -1;
  for (const id of r.tracker.conf.voters) {
    const match = r.tracker.progress.get(id)?.match ?? 0;
    if (match > bestMatch) {
      best = id;
      bestMatch = match;
    }
  }
  if (best !== null) {
    if (bestMatch < r.log.lastIndex()) sendAppend(r, best, false);
    sendTimeoutNow(r, best);
  }
  r.becomeFollower(r.term, null);
}
