// The public face of the pure core: feed it ticks, proposals and messages; drain a Ready;
// persist, send and apply it in the order of driver-order.ts, then advance(ready). One
// Ready is outstanding at a time.

import { Raft } from './raft';
import { advanceReady, hardStateOf, hasReady, softStateOf, takeReady } from './ready';
import { leaderReadIndex, proposeConfChange, proposeData, transferLeadership } from './step-leader';
import { statusOf, type RaftStatus } from './status';
import type { LogReader } from './storage';
import type { ConfChange, HardState, Message, NodeId, RaftConfig, Ready, SoftState } from './types';

export class RawNode {
  private readonly raft: Raft;
  private prevSoft: SoftState;
  private prevHard: HardState;

  /**
   * Restores term, vote, commit and membership from `storage` (its conf plus any conf
   * entries up to config.applied). config.applied defaults to the storage snapshot's
   * index: the driver then restores its state machine from storage.snapshot().
   */
  constructor(config: RaftConfig, storage: LogReader) {
    this.raft = new Raft(config, storage);
    this.prevSoft = softStateOf(this.raft);
    this.prevHard = hardStateOf(this.raft);
  }

  /** One logical clock tick. */
  tick(): void {
    this.raft.tick();
  }

  /** Starts an election now (pre-vote first when enabled). Ignored on a leader or non-voter. */
  campaign(): void {
    this.raft.hup(this.raft.preVote ? 'preElection' : 'election');
  }

  /** Throws NotLeaderError | ProposalDroppedError | ProposalOverloadedError. */
  propose(data: Uint8Array): { index: number; term: number } {
    return proposeData(this.raft, data);
  }

  /** Throws ProposalDroppedError while another conf change is pending or the change is refused. */
  proposeConfChange(cc: ConfChange): { index: number; term: number } {
    return proposeConfChange(this.raft, cc);
  }

  /** Never throws on stale or unknown messages: it ignores them. */
  step(m: Message): void {
    this.raft.stepMessage(m);
  }

  /**
   * Asks for a linearizable read point, answered later as Ready.readStates[{index,
   * requestCtx: ctx}]. Followers forward it to the leader; dropped if no leader is known.
   */
  readIndex(ctx: Uint8Array): void {
    const r = this.raft;
    if (r.role === 'leader') leaderReadIndex(r, ctx, r.id);
    else if (r.lead !== null && r.role === 'follower') r.send({ type: 'ReadIndex', to: r.lead, context: ctx });
  }

  /** Leader only: hand leadership to voter `to`; aborted after an election timeout. */
  transferLeader(to: NodeId): void {
    transferLeadership(this.raft, to);
  }

  hasReady(): boolean {
    return hasReady(this.raft, this.prevSoft, this.prevHard);
  }

  ready(): Ready {
    const rd = takeReady(this.raft, this.prevSoft, this.prevHard);
    if (rd.softState) this.prevSoft = rd.softState;
    if (rd.hardState) this.prevHard = rd.hardState;
    return rd;
  }

  advance(rd: Ready): void {
    advanceReady(this.raft, rd);
  }

  status(): RaftStatus {
    return statusOf(this.raft);
  }

  /** The transport could not deliver to `id`: stop pipelining to it and probe instead. */
  reportUnreachable(id: NodeId): void {
    const pr = this.raft.role === 'leader' ? this.raft.tracker.progress.get(id) : undefined;
    if (pr && pr.state === 'replicate') pr.becomeProbe();
  }

  /** The snapshot sent to `id` was delivered (ok) or failed; resume probing after the next heartbeat. */
  reportSnapshot(id: NodeId, ok: boolean): void {
    const pr = this.raft.role === 'leader' ? this.raft.tracker.progress.get(id) : undefined;
    if (!pr || pr.state !== 'snapshot') return;
    if (!ok) pr.pendingSnapshot = 0;
    pr.becomeProbe();
    pr.probeSent = true;
  }
}

export type { RaftStatus } from './status';
