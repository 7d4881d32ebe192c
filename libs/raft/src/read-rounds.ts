// ReadIndex bookkeeping for the driver: callers of RaftNode.read() that arrive before the
// next loop pass share one ReadIndex round; once the core answers a round with its read
// index, its callers wait until the state machine has applied that index.
//
// A follower's round is one ReadIndex message to the leader and one ReadIndexResp back,
// and the core never sends either again (etcd's neither: its server re-asks every 500 ms).
// A transport loses messages now and then: whatever was written into a connection the
// peer had already closed is gone (a member SIGSTOPped past the gRPC keepalive timeout
// wakes up with such a connection). So a round not answered within a few ticks is asked
// again, with the same context: the leader answers each copy, the first answer settles the
// round, and later ones find it gone.

import { TimeoutError } from './core/errors';

interface Round {
  ctx: Uint8Array;
  waiters: ReadWaiter[];
  /** Ticks since the round was last asked of the leader. */
  ticksUnanswered: number;
}

interface ReadWaiter {
  settled: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
  timer: NodeJS.Timeout;
}

export class ReadRounds {
  /** Reads that arrived since the last round started; they share the next one. */
  private batch: ReadWaiter[] = [];
  private readonly rounds = new Map<string, Round>();
  private seq = 0;
  /** Reads whose round was answered with `index`, waiting for applied >= index. */
  private waitingForApply: { index: number; waiters: ReadWaiter[] }[] = [];

  /** `prefix` makes round ids unique per member (followers forward them to the leader). */
  constructor(private readonly prefix: string) {}

  /** A read barrier that settles when its round is answered and applied, or times out. */
  wait(timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: ReadWaiter = {
        settled: false,
        resolve: () => {
          if (waiter.settled) return;
          waiter.settled = true;
          clearTimeout(waiter.timer);
          resolve();
        },
        reject: (err) => {
          if (waiter.settled) return;
          waiter.settled = true;
          clearTimeout(waiter.timer);
          reject(err);
        },
        timer: setTimeout(() => waiter.reject(new TimeoutError('read', timeoutMs)), timeoutMs),
      };
      this.batch.push(waiter);
    });
  }

  /** Opens a round for the reads waiting since the last one: returns the context to pass to RawNode.readIndex, if any. */
  startRound(): Uint8Array | undefined {
    if (this.batch.length === 0) return undefined;
    const waiters = this.batch.filter((w) => !w.settled);
    this.batch = [];
    if (waiters.length === 0) return undefined;
    const key = `${this.prefix}/${++this.seq}`;
    const ctx = Buffer.from(key, 'latin1');
    this.rounds.set(key, { ctx, waiters, ticksUnanswered: 0 });
    return ctx;
  }

  /**
   * Counts a tick for every unanswered round; returns the contexts of those unanswered
   * for `everyTicks` ticks, to be asked again (their count starts over).
   */
  dueForAskingAgain(everyTicks: number): Uint8Array[] {
    const due: Uint8Array[] = [];
    for (const round of this.rounds.values()) {
      if (++round.ticksUnanswered < everyTicks) continue;
      round.ticksUnanswered = 0;
      due.push(round.ctx);
    }
    return due;
  }

  /** The connection to the leader broke: what it carried may be lost, so every unanswered round is asked again at the next tick. */
  askAgainSoon(everyTicks: number): void {
    for (const round of this.rounds.values()) round.ticksUnanswered = Math.max(round.ticksUnanswered, everyTicks - 1);
  }

  /** The core answered the round `ctx` with read index `index`. */
  answered(ctx: Uint8Array, index: number): void {
    const key = Buffer.from(ctx).toString('latin1');
    const round = this.rounds.get(key);
    if (!round) return; // not ours, already answered (a round asked twice is answered twice), or forgotten
    this.rounds.delete(key);
    this.waitingForApply.push({ index, waiters: round.waiters });
  }

  /** The state machine has applied `applied`: release every read answered at or below it. */
  release(applied: number): void {
    if (this.waitingForApply.length === 0) return;
    const still: typeof this.waitingForApply = [];
    for (const w of this.waitingForApply) {
      if (w.index <= applied) for (const r of w.waiters) r.resolve();
      else still.push(w);
    }
    this.waitingForApply = still;
  }

  /** Rounds the core dropped (no leader) are never answered: forget them once their callers timed out. */
  forgetSettled(): void {
    for (const [key, round] of this.rounds) if (round.waiters.every((w) => w.settled)) this.rounds.delete(key);
  }

  /**
   * Fails every read whose round was started and not answered (sent to a leader that is
   * gone) and, when `alsoWaitingToStart`, the reads whose round has not started yet (with
   * no leader known it would be dropped; with one, it simply goes to the new leader).
   */
  failUnanswered(err: () => Error, alsoWaitingToStart: boolean): void {
    const unanswered = [...this.rounds.values()].flatMap((round) => round.waiters);
    this.rounds.clear();
    if (alsoWaitingToStart) {
      unanswered.push(...this.batch);
      this.batch = [];
    }
    for (const r of unanswered) r.reject(err());
  }

  failAll(err: () => Error): void {
    const all = [...this.batch, ...[...this.rounds.values()].flatMap((round) => round.waiters), ...this.waitingForApply.flatMap((w) => w.waiters)];
    for (const r of all) r.reject(err());
    this.batch = [];
    this.rounds.clear();
    this.waitingForApply = [];
  }
}
