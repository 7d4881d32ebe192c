// ReadIndex bookkeeping for the driver: callers of RaftNode.read() that arrive before the
// next loop pass share one ReadIndex round; once the core answers a round with its read
// index, its callers wait until the state machine has applied that index.

import { TimeoutError } from './core/errors';

interface ReadWaiter {
  settled: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
  timer: NodeJS.Timeout;
}

export class ReadRounds {
  /** Reads that arrived since the last round started; they share the next one. */
  private batch: ReadWaiter[] = [];
  private readonly rounds = new Map<string, ReadWaiter[]>();
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
    this.rounds.set(key, waiters);
    return Buffer.from(key, 'latin1');
  }

  /** The core answered the round `ctx` with read index `index`. */
  answered(ctx: Uint8Array, index: number): void {
    const key = Buffer.from(ctx).toString('latin1');
    const waiters = this.rounds.get(key);
    if (!waiters) return; // not ours, or already forgotten
    this.rounds.delete(key);
    this.waitingForApply.push({ index, waiters });
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
    for (const [key, waiters] of this.rounds) if (waiters.every((w) => w.settled)) this.rounds.delete(key);
  }

  /**
   * Fails every read whose round was started and not answered (sent to a leader that is
   * gone) and, when `alsoWaitingToStart`, the reads whose round has not started yet (with
   * no leader known it would be dropped; with one, it simply goes to the new leader).
   */
  failUnanswered(err: () => Error, alsoWaitingToStart: boolean): void {
    const unanswered = [...this.rounds.values()].flat();
    this.rounds.clear();
    if (alsoWaitingToStart) {
      unanswered.push(...this.batch);
      this.batch = [];
    }
    for (const r of unanswered) r.reject(err());
  }

  failAll(err: () => Error): void {
    const all = [...this.batch, ...[...this.rounds.values()].flat(), ...this.waitingForApply.flatMap((w) => w.waiters)];
    for (const r of all) r.reject(err());
    this.batch = [];
    this.rounds.clear();
    this.waitingForApply = [];
  }
}
