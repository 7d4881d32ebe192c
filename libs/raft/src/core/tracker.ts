// The leader's bookkeeping across the group: the current configuration, one Progress per
// member, and the votes of an election in progress.

import { Progress } from './progress';
import { committedIndex, hasQuorum, voteResult, type VoteResult } from './quorum';
import type { ConfState, NodeId } from './types';

export class ProgressTracker {
  conf: ConfState;
  readonly progress = new Map<NodeId, Progress>();
  readonly votes = new Map<NodeId, boolean>();
  private readonly scratch: number[] = [];

  constructor(conf: ConfState, private readonly maxInflightMsgs: number, private readonly maxInflightBytes: number) {
    this.conf = conf;
  }

  isVoter(id: NodeId): boolean {
    return this.conf.voters.includes(id);
  }

  isMember(id: NodeId): boolean {
    return this.isVoter(id) || this.conf.learners.includes(id);
  }

  newProgress(next: number, isLearner: boolean): Progress {
    return new Progress(next, isLearner, this.maxInflightMsgs, this.maxInflightBytes);
  }

  /** Fresh progress for every member (a new term): all probing from lastIndex + 1. */
  resetProgress(lastIndex: number): void {
    this.progress.clear();
    for (const id of this.conf.voters) this.progress.set(id, this.newProgress(lastIndex + 1, false));
    for (const id of this.conf.learners) this.progress.set(id, this.newProgress(lastIndex + 1, true));
  }

  committed(): number {
    return committedIndex(this.conf.voters, (id) => this.progress.get(id)?.match ?? 0, this.scratch);
  }

  recordVote(id: NodeId, granted: boolean): void {
    if (!this.votes.has(id)) this.votes.set(id, granted);
  }

  tallyVotes(): VoteResult {
    return voteResult(this.conf.voters, this.votes);
  }

  /** Check-quorum: did a majority of voters (self always) talk to us since the last check? */
  quorumActive(self: NodeId): boolean {
    return hasQuorum(this.conf.voters, (id) => id === self || this.progress.get(id)?.recentActive === true);
  }
}
