// The leader's step function: acknowledgements drive commit (paper 5.3, 5.4.2),
// rejections drive fast backtracking, heartbeat acks confirm ReadIndex rounds, and a
// caught-up transfer target gets TimeoutNow (thesis 3.10).

import { applyConfChangeTo, confChangeProblem, encodeConfEntry } from './confchange';
import { NotLeaderError, ProposalDroppedError, ProposalOverloadedError } from './errors';
import type { Raft } from './raft';
import { sendAppend, sendAppendsWhileAllowed, sendTimeoutNow, sendWindowProbe } from './replication';
import type { ConfChange, Message, NodeId } from './types';

export function stepLeader(r: Raft, m: Message): void {
  switch (m.type) {
    case 'ReadIndex':
      leaderReadIndex(r, m.context ?? new Uint8Array(0), m.from);
      return;
    case 'AppResp':
    case 'HeartbeatResp':
      break;
    default:
      return; // votes are handled before; App/Heartbeat of our own term cannot come from another leader
  }
  const pr = r.tracker.progress.get(m.from);
  if (!pr) return; // not a member (any more)
  pr.recentActive = true;

  if (m.type === 'HeartbeatResp') {
    pr.probeSent = false;
    if (pr.match < r.log.lastIndex() || pr.state === 'probe') {
      // An empty App at next - 1 also serves to find out whether pipelined Apps were lost:
      // without it a follower whose whole window was dropped would wait forever.
      if (!sendAppend(r, m.from, true) && pr.state === 'replicate') sendWindowProbe(r, m.from);
    }
    if (m.context) {
      r.reads.ack(m.from, m.context);
      completeReadRounds(r);
    }
    return;
  }

  const index = m.index ?? 0;
  if (m.reject) {
    // Fast backtracking: the hint names the follower's last entry whose term is <= the
    // term we sent, and we skip our own entries of any term above the hinted one.
    let nextProbe = m.rejectHint ?? 0;
    if ((m.logTerm ?? 0) > 0) nextProbe = r.log.findConflictByTerm(nextProbe, m.logTerm!).index;
    if (pr.maybeDecrTo(index, nextProbe)) {
      if (pr.state === 'replicate') pr.becomeProbe();
      sendAppend(r, m.from, true);
    }
    return;
  }

  const wasProbe = pr.state === 'probe';
  if (!pr.maybeUpdate(index) && !(wasProbe && pr.match === index)) return; // stale or duplicate
  if (pr.state === 'probe') {
    pr.becomeReplicate();
  } else if (pr.state === 'snapshot' && pr.match + 1 >= r.log.firstIndex()) {
    // The follower has the snapshot (or caught up otherwise): replicate from its match.
    pr.becomeProbe();
    pr.becomeReplicate();
  } else if (pr.state === 'replicate') {
    pr.inflights.freeLE(index);
  }
  if (maybeCommit(r) && !r.lazyCommitBroadcast) {
    r.pendingBroadcast = true;
  }
  // Fill the window that this ack opened (new entries carry the new commit index too).
  sendAppendsWhileAllowed(r, m.from, false);
  if (m.from === r.leadTransferee && pr.match === r.log.lastIndex()) sendTimeoutNow(r, m.from);
}

/**
 * Advances commit to the highest index a quorum holds, but only if that entry is of the
 * current term (paper 5.4.2, Figure 8): older entries commit indirectly with it.
 */
export function maybeCommit(r: Raft): boolean {
  const index = r.tracker.committed();
  if (index <= r.log.committed || r.log.termOrZero(index) !== r.term) return false;
  r.log.commitTo(index);
  if (r.readsAwaitingCommit.length > 0) {
    const waiting = r.readsAwaitingCommit;
    r.readsAwaitingCommit = [];
    for (const read of waiting) leaderReadIndex(r, read.ctx, read.from);
  }
  return true;
}

/** A read at the leader, asked locally (from === r.id) or forwarded by a follower. */
export function leaderReadIndex(r: Raft, ctx: Uint8Array, from: NodeId): void {
  // Thesis 6.4: until an entry of this term commits, our commit index may be stale.
  if (r.log.termOrZero(r.log.committed) !== r.term) {
    r.readsAwaitingCommit.push({ ctx, from });
    return;
  }
  if (r.tracker.conf.voters.length === 1 && r.tracker.isVoter(r.id)) {
    answerRead(r, r.log.committed, ctx, from);
    return;
  }
  r.reads.enqueue({ ctx, from });
  if (!r.reads.inFlight()) startReadRound(r);
}

function startReadRound(r: Raft): void {
  r.bcastHeartbeat(r.reads.startRound(r.log.committed));
}

function completeReadRounds(r: Raft): void {
  const round = r.reads.takeConfirmed(r.tracker.conf.voters, r.id);
  if (!round) return;
  for (const read of round.reads) answerRead(r, round.index, read.ctx, read.from);
  // Reads that arrived during that round go out in the next one.
  if (r.reads.hasQueued()) startReadRound(r);
}

function answerRead(r: Raft, index: number, ctx: Uint8Array, from: NodeId): void {
  if (from === r.id) {
    r.readStates.push({ index, requestCtx: ctx });
    return;
  }
  // The follower serves the read once it has applied `index`. The round's heartbeats
  // carried the commit index as of the round's start; if it has moved on (or the read
  // was answered without a round), say so now rather than at the next heartbeat.
  if (r.tracker.progress.get(from)?.canBumpCommit(r.log.committed)) sendAppend(r, from, true);
  r.send({ type: 'ReadIndexResp', to: from, index, context: ctx });
}

/** Leader: start handing leadership to `to` (a no-op for self, non-voters, or a repeat). */
export function transferLeadership(r: Raft, to: NodeId): void {
  if (r.role !== 'leader' || to === r.id || !r.tracker.isVoter(to)) return;
  if (r.leadTransferee === to) return;
  r.leadTransferee = to;
  // The transfer must finish within an election timeout (tickHeartbeat aborts it).
  r.electionElapsed = 0;
  const pr = r.tracker.progress.get(to)!;
  if (pr.match === r.log.lastIndex()) sendTimeoutNow(r, to);
  else sendAppend(r, to, true);
}

/** A learner is promoted only when its log is within this many entries of the leader's. */
export const PROMOTION_MAX_LAG = 64;

/** Leader: appends a client proposal; throws if it must be dropped or the leader is overloaded. */
export function proposeData(r: Raft, data: Uint8Array): { index: number; term: number } {
  checkAcceptingProposals(r);
  const size = data.byteLength;
  // Empty entries never count; one entry of any size passes when nothing is uncommitted.
  if (r.uncommittedSize > 0 && size > 0 && r.uncommittedSize + size > r.maxUncommittedSize) {
    throw new ProposalOverloadedError(r.uncommittedSize, r.maxUncommittedSize);
  }
  return { index: r.appendEntry('normal', data), term: r.term };
}

/** Leader: appends a membership change, one at a time; refused changes throw ProposalDroppedError. */
export function proposeConfChange(r: Raft, cc: ConfChange): { index: number; term: number } {
  checkAcceptingProposals(r);
  // Single-server changes are safe only one at a time (thesis 4.1).
  if (r.pendingConfIndex > r.log.applied) {
    throw new ProposalDroppedError(`configuration change at index ${r.pendingConfIndex} is not applied yet`);
  }
  const problem = confChangeProblem(r.tracker.conf, cc);
  if (problem) throw new ProposalDroppedError(problem);
  if (cc.type === 'promote') {
    // Thesis 4.2.1: a voter that cannot keep up would stall commits; the caller retries.
    // Caught up: streaming (replicate state), heard from lately, and close behind.
    const pr = r.tracker.progress.get(cc.node);
    const lag = r.log.lastIndex() - (pr?.match ?? 0);
    if (!pr || pr.state !== 'replicate' || !pr.recentActive || lag > PROMOTION_MAX_LAG) {
      throw new ProposalDroppedError(`learner ${cc.node} has not caught up (${lag} entries behind)`);
    }
  }
  // With the previous change applied, our conf is the latest one in the log.
  const index = r.appendEntry('conf', encodeConfEntry(cc, applyConfChangeTo(r.tracker.conf, cc)));
  r.pendingConfIndex = index;
  return { index, term: r.term };
}

function checkAcceptingProposals(r: Raft): void {
  if (r.role !== 'leader') throw new NotLeaderError(r.lead);
  if (r.leadTransferee !== null) throw new ProposalDroppedError(`leadership is being transferred to ${r.leadTransferee}`);
}
