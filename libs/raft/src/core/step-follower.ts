// The follower's and candidates' step functions, and the receiving side of replication:
// AppendEntries consistency check (paper 5.3), heartbeats, InstallSnapshot.

import type { Raft } from './raft';
import type { Message } from './types';

export function stepFollower(r: Raft, m: Message): void {
  switch (m.type) {
    case 'App':
    case 'Heartbeat':
    case 'Snap':
      // Hearing from the leader of our term resets the election clock (paper 5.2).
      r.electionElapsed = 0;
      r.lead = m.from;
      if (m.type === 'App') handleAppend(r, m);
      else if (m.type === 'Heartbeat') handleHeartbeat(r, m);
      else handleSnapshot(r, m);
      return;
    case 'TimeoutNow':
      // Leadership transfer (thesis 3.10): campaign at once, past any lease.
      r.hup('transfer');
      return;
    case 'ReadIndexResp':
      r.readStates.push({ index: m.index ?? 0, requestCtx: m.context ?? new Uint8Array(0) });
      return;
    default:
      return;
  }
}

/** Shared by pre-candidates and candidates; each only counts responses of its own kind. */
export function stepCandidate(r: Raft, m: Message): void {
  switch (m.type) {
    case 'App':
    case 'Heartbeat':
    case 'Snap':
      // A leader of our term exists (paper 5.2): return to follower and obey it.
      r.becomeFollower(m.term, m.from);
      stepFollower(r, m);
      return;
    case 'PreVoteResp':
      if (r.role !== 'preCandidate') return;
      // A grant is for the term we would campaign in; an older grant means nothing now.
      if (!m.reject && m.term !== r.term + 1) return;
      tally(r, m);
      return;
    case 'VoteResp':
      if (r.role !== 'candidate') return;
      tally(r, m);
      return;
    default:
      return;
  }
}

function tally(r: Raft, m: Message): void {
  const result = r.poll(m.from, !m.reject);
  if (result === 'won') {
    if (r.role === 'preCandidate') r.campaign('election');
    else r.becomeLeader();
  } else if (result === 'lost') {
    // Stay in our term; a rejecting node with a higher term already moved us forward.
    r.becomeFollower(r.term, null);
  }
}

function handleAppend(r: Raft, m: Message): void {
  const prevIndex = m.index ?? 0;
  const log = r.log;
  if (prevIndex < log.committed) {
    // Everything up to our commit is settled; tell the leader where we are.
    r.send({ type: 'AppResp', to: m.from, index: log.committed });
    return;
  }
  const lastNew = log.maybeAppend(prevIndex, m.logTerm ?? 0, m.commit ?? 0, m.entries ?? []);
  if (lastNew !== undefined) {
    r.send({ type: 'AppResp', to: m.from, index: lastNew });
    return;
  }
  // Reject with a hint (etcd's fast backtracking): our last index <= prevIndex whose
  // term is <= the leader's prevTerm, so the leader can skip a whole term per round trip.
  const hint = log.findConflictByTerm(Math.min(prevIndex, log.lastIndex()), m.logTerm ?? 0);
  r.send({ type: 'AppResp', to: m.from, index: prevIndex, reject: true, rejectHint: hint.index, logTerm: hint.term });
}

function handleHeartbeat(r: Raft, m: Message): void {
  // The leader sends min(match, commit), so this never exceeds what we hold.
  const commit = Math.min(m.commit ?? 0, r.log.lastIndex());
  r.log.commitTo(commit);
  r.send({ type: 'HeartbeatResp', to: m.from, context: m.context });
}

function handleSnapshot(r: Raft, m: Message): void {
  const snap = m.snapshot;
  if (!snap) return;
  const { index, term } = snap.meta;
  const log = r.log;
  if (index <= log.committed) {
    // Old news (a duplicate or reordered Snap): we are already past it.
    r.send({ type: 'AppResp', to: m.from, index: log.committed });
    return;
  }
  if (log.matchTerm(index, term)) {
    // We already hold the snapshot's last entry: just commit up to it (paper 7: keep
    // the entries after it). Only the commit index is known to match the leader.
    log.commitTo(index);
    r.send({ type: 'AppResp', to: m.from, index: log.committed });
    return;
  }
  log.restore(snap);
  r.tracker.conf = { voters: [...snap.meta.conf.voters], learners: [...snap.meta.conf.learners] };
  r.tracker.resetProgress(log.lastIndex());
  r.send({ type: 'AppResp', to: m.from, index: log.lastIndex() });
}
