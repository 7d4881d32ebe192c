// 3-node clusters under random faults, first half of the seeds (split in two files so
// the two CPU cores run them side by side). Replay a seed with run-seeds.ts.

import { describe } from 'vitest';
import { seededSafetySuite } from './seeded-suite';

describe('3-node simulated cluster under drops, duplicates, delays, partitions, crashes and pauses', () => {
  seededSafetySuite({ nodes: 3, ticks: 2000, firstSeed: 1, count: 175, chunk: 25 });
});
