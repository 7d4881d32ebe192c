// The live measurements behind get_cluster_summary and get_cluster_detail, made cheap at
// fleet scale (issue 20: 1,000 clusters are 11,000 instances, and one summary used to open
// 11,000 agent calls at once, swamping the leader's event loop until its own read barrier
// timed out). Every status is still measured from the agents, never read from metadata:
// - single-flight: requests asking about the same instance while its probe is in flight
//   share that probe, so concurrent summaries and details cost one probe per instance;
// - a finished measurement younger than `reuseForMs` may be reused, and the reply says how
//   old it is (measured_age_ms). The default is 0 (only probes in flight are shared): a
//   detail read right after a job (a manual_switch) must show what the job did, and with a
//   1 s reuse test/cluster/manual-switch.test.ts read the old master;
// - at most `maxInFlight` probes are open at a time, so the event loop keeps serving Raft
//   heartbeats, writes and other queries while a large summary is measured;
// - measureOnHost: the instances asked for in one turn of the event loop are measured one
//   agent call per host (HostProbeAgent.ProbeHost): a summary over 1,000 clusters on 1,000
//   hosts makes ~1,000 agent calls instead of ~11,000. Each instance still has its own
//   entry, so a detail asked while a summary measures shares the summary's host calls.

/** One measurement of one instance and when it was taken (the clock of `now`, ms). */
export interface Measured<T> {
  value: T;
  measuredAtMs: number;
}

export interface InstanceMeasurementOptions {
  /** Most probes open at once across every query of this manager. Default 64. */
  maxInFlight?: number;
  /** A finished measurement at most this old is reused instead of probing again. Default 0: only probes in flight are shared. */
  reuseForMs?: number;
  /** Monotonic clock (ms). Default performance.now. */
  now?: () => number;
}

export type InstanceKind = 'mariadb' | 'postgres';

export interface InstanceRef {
  kind: InstanceKind;
  port: number;
}

/** Runs one agent call within the bound on calls open at once. */
export type Limit = <T>(call: () => Promise<T>) => Promise<T>;

/**
 * Measures the named instances of one host, each agent call it makes through `limit`; answers
 * one value per instance, in order, and must not throw (an unanswered probe is a
 * measurement too).
 */
export type HostMeasure = (host: string, instances: readonly InstanceRef[], limit: Limit) => Promise<unknown[]>;

interface Batch {
  measure: HostMeasure;
  refs: InstanceRef[];
  waiters: { resolve: (value: unknown) => void; reject: (err: unknown) => void }[];
}

interface Entry {
  promise: Promise<Measured<unknown>>;
  /** Undefined while the probe is in flight. */
  measuredAtMs?: number;
}

export class InstanceMeasurements {
  private readonly maxInFlight: number;
  private readonly reuseForMs: number;
  private readonly now: () => number;
  /** Keyed by kind, host and port (built here, never indexed with a raw client string). */
  private readonly entries = new Map<string, Entry>();
  private readonly waiting: (() => void)[] = [];
  private inFlight = 0;
  private lastSweepMs = 0;
  /** Instances asked for in this turn of the event loop, by host, measured together at its end. */
  private batches = new Map<string, Batch>();

  constructor(opts: InstanceMeasurementOptions = {}) {
    this.maxInFlight = Math.max(1, opts.maxInFlight ?? 64);
    this.reuseForMs = Math.max(0, opts.reuseForMs ?? 0);
    this.now = opts.now ?? (() => performance.now());
  }

  /** Probes open right now (for tests and metrics). */
  get probesInFlight(): number {
    return this.inFlight;
  }

  /**
   * The measurement of `kind` at host:port: the one in flight, a finished one younger than
   * reuseForMs, or a new probe (`probe`, which must not throw: an unanswered probe is a
   * measurement too, `unknown`, and is reused like any other).
   */
  measure<T>(kind: string, host: string, port: number, probe: () => Promise<T>, opts: { limited: boolean } = { limited: true }): Promise<Measured<T>> {
    const key = `${kind}\u0000${host}\u0000${port}`;
    const nowMs = this.now();
    this.sweep(nowMs);
    const known = this.entries.get(key);
    if (known && (known.measuredAtMs === undefined || nowMs - known.measuredAtMs < this.reuseForMs)) {
      return known.promise as Promise<Measured<T>>;
    }
    const entry: Entry = { promise: Promise.resolve(undefined as never) };
    // A host measurement bounds its own agent calls (measureOnHost).
    entry.promise = (opts.limited ? this.limited(probe) : probe()).then((value) => {
      entry.measuredAtMs = this.now();
      return { value, measuredAtMs: entry.measuredAtMs };
    }, (err: unknown) => {
      if (this.entries.get(key) === entry) this.entries.delete(key); // not kept as "in flight" forever
      throw err;
    });
    this.entries.set(key, entry);
    return entry.promise as Promise<Measured<T>>;
  }

  /**
   * The measurement of the instance `kind` at host:port, like `measure`, but a new one is
   * taken together with every other instance of that host asked for in this turn of the event
   * loop: one `measureHost` per host.
   */
  measureOnHost<T>(kind: InstanceKind, host: string, port: number, measureHost: HostMeasure): Promise<Measured<T>> {
    return this.measure(kind, host, port, () =>
      new Promise<T>((resolve, reject) => {
        let batch = this.batches.get(host);
        if (!batch) {
          if (this.batches.size === 0) queueMicrotask(() => this.flush());
          batch = { measure: measureHost, refs: [], waiters: [] };
          this.batches.set(host, batch);
        }
        batch.refs.push({ kind, port });
        batch.waiters.push({ resolve: resolve as (value: unknown) => void, reject });
      }),
    { limited: false });
  }

  private flush(): void {
    const batches = this.batches;
    this.batches = new Map();
    for (const [host, batch] of batches) {
      batch.measure(host, batch.refs, (call) => this.limited(call)).then(
        (values) => batch.waiters.forEach((w, i) => w.resolve(values[i])),
        (err: unknown) => batch.waiters.forEach((w) => w.reject(err)), // a defect of `measure`: the queries fail rather than hang
      );
    }
  }

  /** Age (ms) of the oldest of `measured`, as shown in a reply. */
  ageOf(measured: readonly Measured<unknown>[]): string {
    if (measured.length === 0) return '0';
    const oldest = Math.min(...measured.map((m) => m.measuredAtMs));
    return String(Math.max(0, Math.round(this.now() - oldest)));
  }

  private async limited<T>(probe: () => Promise<T>): Promise<T> {
    // A freed slot is handed straight to the next waiter, so a new caller in between never overshoots.
    if (this.inFlight >= this.maxInFlight) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.inFlight++;
    try {
      return await probe();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.inFlight--;
    }
  }

  /** Forgets finished measurements too old to reuse (instances come and go), at most once per reuse window. */
  private sweep(nowMs: number): void {
    if (nowMs - this.lastSweepMs < Math.max(this.reuseForMs, 1_000)) return;
    this.lastSweepMs = nowMs;
    for (const [key, entry] of this.entries) {
      if (entry.measuredAtMs !== undefined && nowMs - entry.measuredAtMs > this.reuseForMs) this.entries.delete(key);
    }
  }
}
