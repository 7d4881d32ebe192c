// 5-node clusters under random faults: minorities of two, two-way splits, more voters to
// confuse. Shorter runs than the 3-node suites (each tick costs more).

import { describe } from 'vitest';
import { seededSafetySuite } from './seeded-suite';

describe('5-node simulated cluster under drops, duplicates, delays, partitions, crashes and pauses', () => {
  seededSafetySuite({ nodes: 5, ticks: 1500, firstSeed: 1001, count: 150, chunk: 25 });
});
