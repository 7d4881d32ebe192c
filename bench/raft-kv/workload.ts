// The workload of our etcd reference, identical for both systems: `concurrency` closed-loop
// workers, each putting a 128-byte value to a key nobody wrote before, one request at a
// time, for a fixed duration. Only acknowledged puts count; their latency is measured
// from the call to the acknowledgement.

import { randomBytes } from 'node:crypto';

/** One put by worker `worker`; true when acknowledged as committed. */
export type PutFn = (worker: number, key: string, value: Uint8Array) => Promise<boolean>;

export interface PhaseResult {
  concurrency: number;
  seconds: number;
  ops: number;
  errors: number;
  opsPerSec: number;
  /** Mean latency, ms (to set against means measured inside the system). */
  meanMs: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  /** Fsyncs the leader did during the phase (when the system reports them). */
  leaderFsyncs?: number;
  /** Fsyncs summed over all members. */
  totalFsyncs?: number;
  /**
   * Index of the member leading at the end of the phase. Worker w talks to member w % 3,
   * so at c=1 everything goes to member 0: through a follower, each put costs a
   * forwarding round trip more than at the leader (with ours as with etcd).
   */
  leaderMember?: number;
  /** CPU milliseconds per acknowledged put: each member's (in member order) and the load generator's. */
  cpuMsPerOp?: { members: number[]; client: number };
  /** Elections during the phase (ours: term increases; etcd: its leader_changes_seen counter). */
  leaderChanges?: number;
}

export const VALUE_BYTES = 128;

/** The raw outcome of running the workload for a while: one latency per acknowledged put. */
export interface Samples {
  latencies: number[];
  errors: number;
  seconds: number;
}

/** Runs `concurrency` closed-loop workers for `seconds` (keys under `keyPrefix`, which must be new). */
export async function collectSamples(options: {
  concurrency: number;
  seconds: number;
  keyPrefix: string;
  put: PutFn;
}): Promise<Samples> {
  const { concurrency, seconds, keyPrefix, put } = options;
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  const end = started + seconds * 1000;

  const worker = async (w: number) => {
    const value = randomBytes(VALUE_BYTES);
    for (let n = 0; performance.now() < end; n++) {
      const t0 = performance.now();
      const ok = await put(w, `${keyPrefix}/${w}/${n}`, value);
      if (ok) latencies.push(performance.now() - t0);
      else errors++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  return { latencies, errors, seconds: (performance.now() - started) / 1000 };
}

/** One phase's figures from the samples of its slices (pooled, as if measured in one go). */
export function summarize(concurrency: number, slices: Samples[]): PhaseResult {
  const latencies = slices.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const seconds = slices.reduce((sum, s) => sum + s.seconds, 0);
  return {
    concurrency,
    seconds,
    ops: latencies.length,
    errors: slices.reduce((sum, s) => sum + s.errors, 0),
    opsPerSec: latencies.length / seconds,
    meanMs: latencies.length > 0 ? latencies.reduce((a, b) => a + b, 0) / latencies.length : 0,
    p50: percentile(latencies, 0.5),
    p95: percentile(latencies, 0.95),
    p99: percentile(latencies, 0.99),
    max: latencies.length > 0 ? latencies[latencies.length - 1] : 0,
  };
}

export async function runPhase(options: {
  concurrency: number;
  seconds: number;
  keyPrefix: string;
  put: PutFn;
}): Promise<PhaseResult> {
  return summarize(options.concurrency, [await collectSamples(options)]);
}

/** Nearest-rank percentile of an ascending array (0 when empty). */
export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export function formatPhase(label: string, r: PhaseResult): string {
  const perFsync = r.leaderFsyncs ? (r.ops / r.leaderFsyncs).toFixed(1) : '-';
  return (
    `${label.padEnd(6)} c=${String(r.concurrency).padStart(3)}  ${r.opsPerSec.toFixed(0).padStart(6)} ops/s  ` +
    `p50 ${r.p50.toFixed(2).padStart(6)}  p95 ${r.p95.toFixed(2).padStart(6)}  p99 ${r.p99.toFixed(2).padStart(6)}  ` +
    `max ${r.max.toFixed(1).padStart(6)} ms  ops/fsync(leader) ${perFsync.padStart(5)}  ` +
    `fsyncs(all) ${String(r.totalFsyncs ?? '-').padStart(6)}  errors ${r.errors}` +
    (r.leaderMember === undefined ? '' : `  leader m${r.leaderMember}`) +
    (r.leaderChanges === undefined ? '' : `  leader changes ${r.leaderChanges}`) +
    (r.cpuMsPerOp ? `  cpu ms/op ${formatCpu(r.cpuMsPerOp)}` : '')
  );
}

/** "1.23 = 0.50+0.40+0.33 + client 0.20": members' sum first, the leader's share is in the member list. */
function formatCpu(cpu: { members: number[]; client: number }): string {
  const sum = cpu.members.reduce((a, b) => a + b, 0);
  return `${sum.toFixed(2)} = ${cpu.members.map((m) => m.toFixed(2)).join('+')} + client ${cpu.client.toFixed(2)}`;
}
