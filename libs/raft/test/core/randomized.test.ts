// Seeded random walks (see randomized.ts): membership changes, transfers, snapshots and
// message chaos at once, with election safety, state machine safety and read
// linearizability checked after every step. More seeds: soak/random-walk.ts.

import { describe, expect, it } from 'vitest';
import { randomWalk } from './randomized';

describe('randomized walks', () => {
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    it(`seed ${seed}: one leader per term, identical applied entries, no stale reads, progress after faults stop. Reference: Raft paper section 5.4 (Figure 3 properties), thesis 6.4`, () => {
      const result = randomWalk(seed, 1500);
      expect(result.violations).toEqual([]);
      expect(result.committed).toBeGreaterThan(50);
      expect(result.snapshots).toBeGreaterThan(0);
    });
  }
});
