// The shape shared by the seeded safety suites: seeds in chunks of one `it` each, every
// run checked for invariant violations, linearizability and progress.

import { expect, it } from 'vitest';
import { RawNode } from '../../src/core/raw-node';
import { formatFailure, formatSummary, runSeeds } from './seed-runner';

export interface SeededSuite {
  nodes: number;
  ticks: number;
  firstSeed: number;
  count: number;
  chunk: number;
}

export function seededSafetySuite(s: SeededSuite): void {
  for (let from = s.firstSeed; from < s.firstSeed + s.count; from += s.chunk) {
    const count = Math.min(s.chunk, s.firstSeed + s.count - from);
    it(`seeds ${from}..${from + count - 1}: no invariant violation, linearizable histories, progress in most runs`, () => {
      const summary = runSeeds({ RawNode, nodes: s.nodes, ticks: s.ticks, firstSeed: from, count });
      console.log(formatSummary(`${s.nodes} nodes, seeds ${from}..${from + count - 1}`, summary));
      const failures = summary.failures.map((f) => formatFailure(f)).join('\n\n');
      expect(summary.failures, failures).toHaveLength(0);
      expect(summary.lincheckUnknown, 'the linearizability checker ran out of time on these seeds').toEqual([]);
      // Progress: faults stop at 3/4 of the run, so a healthy core acknowledges writes.
      expect(summary.lowProgress.length, `seeds with little progress: ${summary.lowProgress}`).toBeLessThanOrEqual(
        Math.floor(count / 5),
      );
    });
  }
}
