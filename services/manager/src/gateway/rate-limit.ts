// Emit's request rate per caller: a token bucket per key (the authenticated token's name;
// the client address where no token identifies the caller), refilled at `ratePerSecond`
// up to `burst`. Above it the gateway answers OVERLOADED (HTTP 429) with the envelope,
// before the body is parsed: a flood costs a lookup, not a validation.
//
// Buckets are per member (each counts what it receives), kept in a Map and dropped once
// full again, so many one-off callers cannot grow it without bound.

export interface RateLimitOptions {
  /** Requests per second per key; 0 turns the limit off. */
  ratePerSecond: number;
  burst: number;
  now?: () => number;
}

interface Bucket {
  tokens: number;
  at: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly now: () => number;
  private lastSweep = 0;

  constructor(private readonly opts: RateLimitOptions) {
    this.now = opts.now ?? Date.now;
  }

  get enabled(): boolean {
    return this.opts.ratePerSecond > 0;
  }

  /** Takes one request for `key`: 0 when allowed, else how many ms until one would be. */
  take(key: string): number {
    if (!this.enabled) return 0;
    const now = this.now();
    const bucket = this.refilled(key, now);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) / this.opts.ratePerSecond) * 1000);
  }

  private refilled(key: string, now: number): Bucket {
    if (now - this.lastSweep > 10_000) this.sweep(now);
    const bucket = this.buckets.get(key);
    if (!bucket) {
      const fresh = { tokens: this.opts.burst, at: now };
      this.buckets.set(key, fresh);
      return fresh;
    }
    bucket.tokens = Math.min(this.opts.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.opts.ratePerSecond);
    bucket.at = now;
    return bucket;
  }

  /** Forgets buckets that would be full by now: they behave exactly like new ones. */
  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [key, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.opts.ratePerSecond >= this.opts.burst) this.buckets.delete(key);
    }
  }
}
