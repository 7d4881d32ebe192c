// Reconnect delays: exponential from minMs to maxMs with jitter, so members that lost the
// same peer at the same moment do not all knock on its door in the same millisecond.

export interface BackoffOptions {
  minMs?: number; // default 50
  maxMs?: number; // default 2000
  random?: () => number;
}

export class Backoff {
  private attempt = 0;
  private readonly minMs: number;
  private readonly maxMs: number;
  private readonly random: () => number;

  constructor(options: BackoffOptions = {}) {
    this.minMs = options.minMs ?? 50;
    this.maxMs = options.maxMs ?? 2000;
    this.random = options.random ?? Math.random;
  }

  /** The delay before the next attempt: half fixed, half random ("equal jitter"). */
  next(): number {
    const ceiling = Math.min(this.maxMs, this.minMs * 2 ** Math.min(this.attempt, 30));
    this.attempt++;
    return Math.round(ceiling / 2 + (ceiling / 2) * this.random());
  }

  /** After a success: the next failure starts again from minMs. */
  reset(): void {
    this.attempt = 0;
  }
}

/** A sleep that stop() can cut short. */
export function cancellableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
