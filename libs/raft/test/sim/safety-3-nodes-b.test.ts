// 3-node clusters under random faults, second half of the seeds (see safety-3-nodes-a).

import { describe } from 'vitest';
import { seededSafetySuite } from './seeded-suite';

describe('3-node simulated cluster under drops, duplicates, delays, partitions, crashes and pauses (more seeds)', () => {
  seededSafetySuite({ nodes: 3, ticks: 2000, firstSeed: 176, count: 175, chunk: 25 });
});
