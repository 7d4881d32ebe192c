// The Raft state machine (Raft paper, thesis; design after etcd-io/raft raft.go). Pure:
// it is fed ticks and messages, and collects messages to send in `msgs` and completed
// reads in `readStates`; RawNode turns that into a Ready.
//
// Role behaviour is swapped, not branched: becoming a role installs that role's step and
// tick functions (stepLeader/stepCandidate/stepFollower in their own files).

import { RaftLog, payloadBytes } from './log';
import { confAfterEntry } from './membership';
import { ReadIndexBatcher } from './read-only';
import { stepCandidate, stepFollower } from './step-follower';
import { maybeCommit, stepLeader } from './step-leader';
import type { LogReader } from './storage';
import { ProgressTracker } from './tracker';
import type { Entry, Message, NodeId, RaftConfig, ReadState, Role } from './types';

export type StepFn = (r: Raft, m: Message) => void;

/** Message.context of a Vote sent by a forced campaign (after TimeoutNow): bypasses leases. */
export const TRANSFER_CONTEXT: Uint8Array = new TextEncoder().encode('transfer');

export function isTransferContext(ctx: Uint8Array | undefined): boolean {
  if (!ctx || ctx.byteLength !== TRANSFER_CONTEXT.byteLength) return false;
  for (let i = 0; i < ctx.byteLength; i++) if (ctx[i] !== TRANSFER_CONTEXT[i]) return false;
  return true;
}

type CampaignKind = 'preElection' | 'election' | 'transfer';

const MESSAGE_TYPES = new Set<string>([
  'PreVote', 'PreVoteResp', 'Vote', 'VoteResp', 'App', 'AppResp', 'Heartbeat', 'HeartbeatResp',
  'Snap', 'TimeoutNow', 'ReadIndex', 'ReadIndexResp',
]);

export class Raft {
  readonly id: NodeId;
  term = 0;
  vote: NodeId | null = null;
  lead: NodeId | null = null;
  role: Role = 'follower';
  readonly log: RaftLog;
  readonly tracker: ProgressTracker;
  readonly reads = new ReadIndexBatcher();
  /** Messages to send, drained into each Ready. */
  msgs: Message[] = [];
  readStates: ReadState[] = [];

  readonly electionTimeout: number;
  readonly heartbeatTimeout: number;
  readonly checkQuorum: boolean;
  readonly preVote: boolean;
  readonly lazyCommitBroadcast: boolean;
  readonly maxSizePerMsg: number;
  readonly maxUncommittedSize: number;
  readonly maxCommittedSizePerReady: number;
  private readonly random: () => number;

  electionElapsed = 0;
  heartbeatElapsed = 0;
  randomizedElectionTimeout = 0;

  /** Leader: the voter we are handing leadership to, or null. */
  leadTransferee: NodeId | null = null;
  /** Leader: index of the latest conf entry; no new one while it is unapplied. */
  pendingConfIndex = 0;
  /** Leader: payload bytes of entries appended this term and not yet applied. */
  uncommittedSize = 0;
  /** Leader: new entries or a new commit index wait to be broadcast (batched until ready()). */
  pendingBroadcast = false;
  /** Leader: reads received before an entry of this term committed. */
  readsAwaitingCommit: { ctx: Uint8Array; from: NodeId }[] = [];

  step: StepFn = stepFollower;
  tick: () => void = () => this.tickElection();

  constructor(config: RaftConfig, storage: LogReader) {
    if (config.electionTick <= config.heartbeatTick) throw new Error('raft config: electionTick must exceed heartbeatTick');
    this.id = config.id;
    this.electionTimeout = config.electionTick;
    this.heartbeatTimeout = config.heartbeatTick;
    this.random = config.random;
    this.checkQuorum = config.checkQuorum ?? true;
    this.preVote = config.preVote ?? true;
    this.lazyCommitBroadcast = config.lazyCommitBroadcast ?? true;
    this.maxSizePerMsg = config.maxSizePerMsg ?? 1024 * 1024;
    this.maxUncommittedSize = config.maxUncommittedEntriesSize ?? 64 * 1024 * 1024;
    this.maxCommittedSizePerReady = config.maxCommittedSizePerReady ?? 16 * 1024 * 1024;

    const { hardState, confState } = storage.initialState();
    this.log = new RaftLog(storage, config.applied ?? 0);
    this.tracker = new ProgressTracker(confState, config.maxInflightMsgs ?? 256, config.maxInflightBytes ?? 8 * 1024 * 1024);
    if (hardState.commit > 0) this.log.commitTo(hardState.commit);
    if (this.log.applied > this.log.committed) {
      throw new Error(`raft config: applied ${this.log.applied} is beyond commit ${this.log.committed}`);
    }
    this.replayAppliedConfChanges();
    this.becomeFollower(hardState.term, null);
    this.vote = hardState.vote;
  }

  /** Storage's conf is as of its snapshot; re-apply conf entries the state machine already applied. */
  private replayAppliedConfChanges(): void {
    const first = this.log.firstIndex();
    if (this.log.applied < first) return;
    for (const e of this.log.slice(first, this.log.applied + 1, Number.MAX_SAFE_INTEGER)) {
      if (e.type === 'conf') this.tracker.conf = confAfterEntry(this.tracker.conf, e) ?? this.tracker.conf;
    }
  }

  // ---- sending ----------------------------------------------------------------------

  /** Queues `m` for the next Ready; `term` defaults to ours (PreVote/PreVoteResp set their own). */
  send(m: Omit<Message, 'from' | 'term'> & { term?: number }): void {
    // Callers pass a fresh literal: fill it in rather than copy it (this is a hot path).
    const msg = m as Message;
    msg.from = this.id;
    if (msg.term === undefined) msg.term = this.term;
    this.msgs.push(msg);
  }

  // ---- roles ------------------------------------------------------------------------

  private reset(term: number): void {
    if (this.term !== term) {
      this.term = term;
      this.vote = null;
    }
    this.lead = null;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.randomizedElectionTimeout = this.electionTimeout + Math.floor(this.random() * this.electionTimeout);
    this.leadTransferee = null;
    this.tracker.votes.clear();
    this.tracker.resetProgress(this.log.lastIndex());
    const self = this.tracker.progress.get(this.id);
    if (self) self.match = this.log.lastIndex();
    this.pendingConfIndex = 0;
    this.uncommittedSize = 0;
    this.pendingBroadcast = false;
    this.reads.reset();
    this.readsAwaitingCommit = [];
  }

  becomeFollower(term: number, lead: NodeId | null): void {
    this.step = stepFollower;
    this.reset(term);
    this.tick = () => this.tickElection();
    this.lead = lead;
    this.role = 'follower';
  }

  becomePreCandidate(): void {
    if (this.role === 'leader') throw new Error('raft: leader cannot become pre-candidate');
    // Pre-vote changes neither term nor vote (Raft thesis 9.6): a node that cannot win
    // does not disturb the group.
    this.step = stepCandidate;
    this.tracker.votes.clear();
    this.tick = () => this.tickElection();
    this.lead = null;
    this.role = 'preCandidate';
  }

  becomeCandidate(): void {
    if (this.role === 'leader') throw new Error('raft: leader cannot become candidate');
    this.step = stepCandidate;
    this.reset(this.term + 1);
    this.tick = () => this.tickElection();
    this.vote = this.id;
    this.role = 'candidate';
  }

  becomeLeader(): void {
    if (this.role === 'follower') throw new Error('raft: follower cannot become leader');
    this.step = stepLeader;
    this.reset(this.term);
    this.tick = () => this.tickHeartbeat();
    this.lead = this.id;
    this.role = 'leader';
    const self = this.tracker.progress.get(this.id);
    if (self) {
      self.becomeReplicate();
      self.recentActive = true;
    }
    // Conservatively assume an unapplied conf change may be in the log.
    this.pendingConfIndex = this.log.lastIndex();
    // The no-op of Raft paper 5.4.2 / thesis 6.4: commits the previous terms' entries.
    this.appendEntry('normal', new Uint8Array(0));
  }

  /** Leader: appends one entry of this term; returns its index. */
  appendEntry(type: Entry['type'], data: Uint8Array): number {
    const index = this.log.lastIndex() + 1;
    this.log.append([{ term: this.term, index, type, data }]);
    this.uncommittedSize += data.byteLength;
    this.tracker.progress.get(this.id)?.maybeUpdate(index);
    // Followers never hold more than we did, so only a single voter commits on its own append.
    if (this.tracker.conf.voters.length === 1) maybeCommit(this);
    this.pendingBroadcast = true;
    return index;
  }

  // ---- time -------------------------------------------------------------------------

  private tickElection(): void {
    this.electionElapsed++;
    if (this.promotable() && this.electionElapsed >= this.randomizedElectionTimeout) {
      this.electionElapsed = 0;
      this.hup(this.preVote ? 'preElection' : 'election');
    }
  }

  private tickHeartbeat(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.electionTimeout) {
      this.electionElapsed = 0;
      if (this.checkQuorum) {
        // Raft thesis 6.2: a leader that cannot reach a quorum steps down, so clients
        // find the real leader and stale reads are impossible.
        if (!this.tracker.quorumActive(this.id)) {
          this.becomeFollower(this.term, null);
          return;
        }
        for (const [id, pr] of this.tracker.progress) if (id !== this.id) pr.recentActive = false;
      }
      // A transfer that did not finish within an election timeout is abandoned.
      this.leadTransferee = null;
    }
    if (this.heartbeatElapsed >= this.heartbeatTimeout) {
      this.heartbeatElapsed = 0;
      this.bcastHeartbeat(this.reads.roundContext());
    }
  }

  bcastHeartbeat(ctx: Uint8Array | undefined): void {
    for (const [id, pr] of this.tracker.progress) {
      if (id === this.id) continue;
      // Never tell a follower to commit beyond what it is known to hold.
      this.send({ type: 'Heartbeat', to: id, commit: Math.min(pr.match, this.log.committed), context: ctx });
    }
  }

  // ---- elections --------------------------------------------------------------------

  /** Can this node become leader? Only voters, and not while a snapshot is being applied. */
  promotable(): boolean {
    return this.tracker.isVoter(this.id) && this.log.unstable.snapshot === undefined;
  }

  /** Starts an election unless this node must not (leader, non-voter, unapplied conf change). */
  hup(kind: CampaignKind): void {
    if (this.role === 'leader') return;
    if (!this.promotable()) return;
    // A committed but unapplied conf change may remove us or change the quorum.
    if (this.hasUnappliedConfChanges()) return;
    this.campaign(kind);
  }

  private hasUnappliedConfChanges(): boolean {
    const { applied, committed } = this.log;
    if (applied >= committed) return false;
    const lo = Math.max(applied + 1, this.log.firstIndex());
    return this.log.slice(lo, committed + 1, Number.MAX_SAFE_INTEGER).some((e) => e.type === 'conf');
  }

  campaign(kind: CampaignKind): void {
    let voteType: 'PreVote' | 'Vote';
    let term: number;
    if (kind === 'preElection') {
      this.becomePreCandidate();
      voteType = 'PreVote';
      term = this.term + 1;
    } else {
      this.becomeCandidate();
      voteType = 'Vote';
      term = this.term;
    }
    if (this.poll(this.id, true) === 'won') {
      // A single-voter group wins at once.
      if (kind === 'preElection') this.campaign('election');
      else this.becomeLeader();
      return;
    }
    const index = this.log.lastIndex();
    const logTerm = this.log.lastTerm();
    const context = kind === 'transfer' ? TRANSFER_CONTEXT : undefined;
    for (const id of this.tracker.conf.voters) {
      if (id === this.id) continue;
      this.send({ type: voteType, to: id, term, index, logTerm, context });
    }
  }

  poll(id: NodeId, granted: boolean) {
    this.tracker.recordVote(id, granted);
    return this.tracker.tallyVotes();
  }

  // ---- the entry point for every message --------------------------------------------

  /** Handles one message; stale, unknown and malformed messages are ignored, never thrown. */
  stepMessage(m: Message): void {
    if (!MESSAGE_TYPES.has(m.type) || typeof m.term !== 'number') return;
    if (m.term > this.term) {
      if (m.type === 'Vote' || m.type === 'PreVote') {
        // Leader lease (thesis 4.2.3): while we hear from a live leader, a vote request is
        // a disruptive or removed server; ignore it unless it is a forced transfer.
        const inLease = this.checkQuorum && this.lead !== null && this.electionElapsed < this.electionTimeout;
        if (inLease && !isTransferContext(m.context)) return;
      }
      if (m.type === 'PreVote') {
        // Pre-votes never change our term.
      } else if (m.type === 'PreVoteResp' && !m.reject) {
        // A granted pre-vote carries the term the candidate will use, not a newer leader.
      } else {
        const fromLeader = m.type === 'App' || m.type === 'Heartbeat' || m.type === 'Snap';
        this.becomeFollower(m.term, fromLeader ? m.from : null);
      }
    } else if (m.term < this.term) {
      if ((this.checkQuorum || this.preVote) && (m.type === 'App' || m.type === 'Heartbeat')) {
        // A leader of an older term: our term in the answer makes it step down. Needed
        // because pre-vote/check-quorum may stop our term reaching it through votes.
        this.send({ type: 'AppResp', to: m.from });
      } else if (m.type === 'PreVote') {
        this.send({ type: 'PreVoteResp', to: m.from, reject: true });
      }
      return;
    }
    if (m.type === 'Vote' || m.type === 'PreVote') {
      this.handleVoteRequest(m);
      return;
    }
    this.step(this, m);
  }

  private handleVoteRequest(m: Message): void {
    const respType = m.type === 'Vote' ? 'VoteResp' : 'PreVoteResp';
    // One vote per term (paper 5.2); a pre-vote for a future term binds nothing.
    const canVote =
      this.vote === m.from ||
      (this.vote === null && this.lead === null) ||
      (m.type === 'PreVote' && m.term > this.term);
    if (canVote && this.log.isUpToDate(m.index ?? 0, m.logTerm ?? 0)) {
      // Election restriction (paper 5.4.1): only an up-to-date candidate gets the vote.
      this.send({ type: respType, to: m.from, term: m.term, reject: false });
      if (m.type === 'Vote') {
        this.electionElapsed = 0;
        this.vote = m.from;
      }
    } else {
      this.send({ type: respType, to: m.from, reject: true });
    }
  }

  /** Leader: payload of applied entries no longer counts toward the uncommitted cap. */
  reduceUncommittedSize(applied: readonly Entry[]): void {
    if (this.role !== 'leader' || this.uncommittedSize === 0) return;
    this.uncommittedSize = Math.max(0, this.uncommittedSize - payloadBytes(applied));
  }
}
