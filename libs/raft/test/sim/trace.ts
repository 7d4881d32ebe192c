// The event log of one simulated run. Every event is one text line fed to a running
// sha256, so two runs are byte-identical exactly when their hashes are equal; only the
// last `tailSize` lines are kept in memory, to print beside a failing seed.

import { createHash, type Hash } from 'node:crypto';

export class Trace {
  private readonly hash: Hash = createHash('sha256');
  private readonly tail: string[] = [];
  private next = 0;
  private count = 0;
  private digest: string | null = null;

  constructor(private readonly tailSize = 200) {}

  /** Records one event at logical time `tick`. */
  record(tick: number, event: string): void {
    if (this.digest !== null) throw new Error('trace already finished');
    const line = `${tick} ${event}`;
    this.hash.update(line);
    this.hash.update('\n');
    this.count++;
    if (this.tail.length < this.tailSize) this.tail.push(line);
    else {
      this.tail[this.next] = line;
      this.next = (this.next + 1) % this.tailSize;
    }
  }

  get events(): number {
    return this.count;
  }

  /** The sha256 of every line recorded; closes the trace. */
  finish(): string {
    if (this.digest === null) this.digest = this.hash.digest('hex');
    return this.digest;
  }

  /** The last lines, oldest first. */
  lastLines(): string[] {
    return [...this.tail.slice(this.next), ...this.tail.slice(0, this.next)];
  }
}
