// The default suite's share of `npm run fuzz:emit`: 5,000 cases against a real 3-manager
// group that holds machines, a backup storage, a cluster and finished jobs (emit-fuzz.ts),
// while the jobs the fuzz gets accepted run. Nothing may exit, answer 5xx or without the
// envelope, or change state beyond what the accepted requests account for.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFuzz, startFuzzGroup, type FuzzGroup } from './emit-fuzz';

describe('Emit under 5,000 fuzzed requests to a populated group', () => {
  let group: FuzzGroup;
  beforeAll(async () => {
    group = await startFuzzGroup();
  }, 120_000);
  afterAll(() => group?.stop());

  it('no process exits, no 5xx, every reply has the envelope, and rejected requests change no state', async () => {
    const figures = await runFuzz(group, { cases: 5_000, seed: Number(process.env.KCM_FUZZ_SEED ?? 7) });
    expect(figures.failures).toEqual([]);
    expect({ exits: figures.processExits, http5xx: figures.replies5xx, noEnvelope: figures.repliesWithoutEnvelope, unaccounted: figures.unaccountedStateChanges }).toEqual({ exits: 0, http5xx: 0, noEnvelope: 0, unaccounted: 0 });
    expect(figures.cases).toBe(5_000);
    // What every comparison compared: the fixtures' four hosts, a storage, a cluster, finished jobs.
    expect(figures.leastState).toMatchObject({ machines: 4, clusters: expect.any(Number), storages: expect.any(Number), finishedJobs: expect.any(Number) });
    expect(Math.min(figures.leastState.clusters, figures.leastState.storages, figures.leastState.finishedJobs)).toBeGreaterThan(0);
    // And jobs ran while the fuzz went on: accepted ones ended done as well as failed.
    expect(figures.acceptedEnded.done ?? 0).toBeGreaterThan(0);
  }, 180_000);
});
