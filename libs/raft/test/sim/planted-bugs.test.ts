// Planted bugs: each mutant is a copy of the core with one rule broken (mutants.ts).
// The simulator must catch every one of them, through the safety invariants or the
// linearizability check, within a bounded number of seeds. A mutation whose target text
// has disappeared from the core fails here instead of passing silently.

import { afterAll, describe, expect, it } from 'vitest';
import { loadMutant, plantedBugs, removeMutants } from './mutants';
import { formatFailure, runSeeds } from './seed-runner';

/** Seeds each mutant may take to be caught. Measured first catches: see the report line each test prints. */
const seedBound = 60;

describe('planted bugs are caught by the simulator', () => {
  afterAll(() => removeMutants());

  for (const bug of plantedBugs) {
    it(`catches ${bug.name} (${bug.breaks})`, async () => {
      const core = await loadMutant(bug);
      const summary = runSeeds({ ...core, ...bug.hunt, firstSeed: 1, count: seedBound, stopAtFirstFailure: true });
      expect(summary.failures, `${bug.name} survived ${summary.runs} seeds`).toHaveLength(1);
      const caught = summary.failures[0];
      // Caught by a checker, not by the mutant throwing on its own.
      expect(caught.error, formatFailure(caught)).toBeUndefined();
      const by = caught.violations.length > 0 ? caught.violations[0].invariant : `linearizability (${caught.linearizability})`;
      expect(caught.violations.length > 0 || caught.linearizability === 'illegal').toBe(true);
      console.log(`${bug.name}: caught at seed ${caught.seed} (${summary.runs} runs) by ${by}`);
    });
  }

  it('fails loudly when a mutation no longer finds its target text in the core', async () => {
    await expect(
      loadMutant({ ...plantedBugs[0], name: 'stale-mutation', find: 'text that is not in the core' }),
    ).rejects.toThrow(/expected the target text exactly once .* found it 0 times/);
  });
});
