// Runs many seeds and summarises them; shared by the vitest suites and run-seeds.ts.

import { runSimulation, type SimOptions, type SimResult } from './cluster';
import type { OrderStats } from './sim-node';

export interface SeedBatch extends Omit<SimOptions, 'seed'> {
  firstSeed: number;
  count: number;
  /** Stop at the first failing seed (for hunting planted bugs). */
  stopAtFirstFailure?: boolean;
}

export interface BatchSummary {
  runs: number;
  failures: SimResult[];
  /** Seeds whose history came out 'unknown' (the checker ran out of time): not a pass. */
  lincheckUnknown: number[];
  /** Runs where fewer than `minWritesForProgress` writes completed. */
  lowProgress: number[];
  writesOk: number;
  readsOk: number;
  unknownOutcomes: number;
  committedEntries: number;
  faults: number;
  /** The production driver order's windows, summed over the runs (see OrderStats). */
  order: OrderStats;
  elapsedMs: number;
}

/** A run "made progress" when at least this many client writes were acknowledged. */
export const minWritesForProgress = 10;

export function runSeeds(batch: SeedBatch): BatchSummary {
  const { firstSeed, count, stopAtFirstFailure, ...options } = batch;
  const started = performance.now();
  const summary: BatchSummary = {
    runs: 0,
    failures: [],
    lincheckUnknown: [],
    lowProgress: [],
    writesOk: 0,
    readsOk: 0,
    unknownOutcomes: 0,
    committedEntries: 0,
    faults: 0,
    order: { sentBeforeDurable: 0, appliedDuringWrite: 0, steppedDuringWrite: 0, crashesInWindow: 0 },
    elapsedMs: 0,
  };
  for (let seed = firstSeed; seed < firstSeed + count; seed++) {
    const r = runSimulation({ ...options, seed });
    summary.runs++;
    summary.writesOk += r.stats.writesOk;
    summary.readsOk += r.stats.readsOk;
    summary.unknownOutcomes += r.stats.unknown;
    summary.committedEntries += r.stats.committedEntries;
    summary.faults += r.stats.faults;
    for (const k of Object.keys(summary.order) as (keyof OrderStats)[]) summary.order[k] += r.stats[k];
    if (r.stats.writesOk < minWritesForProgress) summary.lowProgress.push(seed);
    if (r.linearizability === 'unknown') summary.lincheckUnknown.push(seed);
    if (!r.ok && r.linearizability !== 'unknown') {
      summary.failures.push(r);
      if (stopAtFirstFailure) break;
    }
  }
  summary.elapsedMs = performance.now() - started;
  return summary;
}

/** What a failed run prints: the seed to replay, what broke, and the end of the trace. */
export function formatFailure(r: SimResult, tailLines = 40): string {
  const what: string[] = [];
  for (const v of r.violations) what.push(`${v.invariant}: ${v.detail}`);
  if (r.error) what.push(`exception: ${r.error.split('\n').slice(0, 4).join('\n  ')}`);
  if (r.linearizability === 'illegal') what.push(`not linearizable:\n${r.linearizabilityReport ?? ''}`);
  return [
    `seed ${r.seed} FAILED (replay: runSimulation({ seed: ${r.seed}, ... }); trace sha256 ${r.traceHash})`,
    ...what,
    `last ${Math.min(tailLines, r.traceTail.length)} trace lines:`,
    ...r.traceTail.slice(-tailLines).map((l) => `  ${l}`),
  ].join('\n');
}

export function formatSummary(label: string, s: BatchSummary): string {
  return (
    `${label}: ${s.runs} runs in ${(s.elapsedMs / 1000).toFixed(1)} s, ${s.failures.length} failed, ` +
    `${s.lincheckUnknown.length} lincheck timeouts, ${s.lowProgress.length} with < ${minWritesForProgress} writes; ` +
    `${s.writesOk} writes and ${s.readsOk} reads acknowledged, ${s.unknownOutcomes} unknown outcomes, ` +
    `${s.committedEntries} entries committed, ${s.faults} faults injected; production order: ` +
    `${s.order.sentBeforeDurable} messages sent before their sender's write was durable, ` +
    `${s.order.appliedDuringWrite} entries applied during a write, ${s.order.steppedDuringWrite} steps during a write, ` +
    `${s.order.crashesInWindow} crashes inside the window`
  );
}
