// Linearizable reads without writing to the log (Raft thesis 6.4, ReadIndex), batched:
// reads that arrive while a confirmation round is in flight wait for the next round, so
// one heartbeat round to a quorum confirms any number of concurrent reads.
//
// A round records the leader's commit index when it starts; every heartbeat sent while
// it is in flight carries the round id as its context, and a follower echoes it back.
// Once a quorum of voters (the leader included) has echoed an id >= the round's, the
// leader was still the leader after the round began, so the recorded index is safe to
// read at for every read in the round.

import { majority } from './quorum';
import type { NodeId } from './types';

export interface PendingRead {
  /** The caller's request id, returned in the ReadState. */
  ctx: Uint8Array;
  /** Who asked: the leader itself or a follower that forwarded the read. */
  from: NodeId;
}

export interface ConfirmedRound {
  index: number;
  reads: PendingRead[];
}

interface Round {
  id: number;
  index: number;
  reads: PendingRead[];
}

export class ReadIndexBatcher {
  private queued: PendingRead[] = [];
  private round: Round | null = null;
  private nextRoundId = 1;
  private readonly acked = new Map<NodeId, number>();

  hasQueued(): boolean {
    return this.queued.length > 0;
  }

  inFlight(): boolean {
    return this.round !== null;
  }

  enqueue(read: PendingRead): void {
    this.queued.push(read);
  }

  /** Starts a round for everything queued, reading at `commit`; returns its heartbeat context. */
  startRound(commit: number): Uint8Array {
    this.round = { id: this.nextRoundId++, index: commit, reads: this.queued };
    this.queued = [];
    return encodeRoundId(this.round.id);
  }

  /** The heartbeat context of the round in flight, if any. */
  roundContext(): Uint8Array | undefined {
    return this.round ? encodeRoundId(this.round.id) : undefined;
  }

  /** Records a heartbeat response echoing `ctx` from `from`. */
  ack(from: NodeId, ctx: Uint8Array | undefined): void {
    const id = decodeRoundId(ctx);
    if (id === undefined) return;
    if ((this.acked.get(from) ?? 0) < id) this.acked.set(from, id);
  }

  /** If the round in flight is confirmed by a quorum of `voters` (self included), ends and returns it. */
  takeConfirmed(voters: readonly NodeId[], self: NodeId): ConfirmedRound | null {
    const round = this.round;
    if (!round) return null;
    let acks = 0;
    for (const id of voters) if (id === self || (this.acked.get(id) ?? 0) >= round.id) acks++;
    if (acks < majority(voters.length)) return null;
    this.round = null;
    return { index: round.index, reads: round.reads };
  }

  /** Drops every pending read (leadership lost: callers time out and retry). */
  reset(): void {
    this.queued = [];
    this.round = null;
    this.acked.clear();
  }
}

function encodeRoundId(id: number): Uint8Array {
  const buf = new Uint8Array(9);
  buf[0] = 0x52; // 'R': marks a read round, so other contexts never parse as one
  new DataView(buf.buffer).setFloat64(1, id);
  return buf;
}

function decodeRoundId(ctx: Uint8Array | undefined): number | undefined {
  if (!ctx || ctx.byteLength !== 9 || ctx[0] !== 0x52) return undefined;
  return new DataView(ctx.buffer, ctx.byteOffset, 9).getFloat64(1);
}
