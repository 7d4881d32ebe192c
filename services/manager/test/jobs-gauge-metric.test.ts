// kcm_jobs (jobs in the replicated state by status) at 20,000 kept jobs: the counts are
// those of the jobs themselves, and a scrape lets the event loop turn while it counts
// (Object.values over 100,000 jobs held the loop 100-200 ms on every scrape).

import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CommandKind, type Command } from '../src/meta/commands';
import { applyCommand } from '../src/meta/fsm';
import { createManagerMetrics } from '../src/metrics';
import { loadFleetStateDirectly } from '../../../bench/scale/meta-state';

describe('kcm_jobs at 20,000 kept jobs', () => {
  const state = loadFleetStateDirectly(10, 5, 20_000);
  for (let i = 0; i < 3; i++) {
    applyCommand(state, {
      kind: CommandKind.JobSubmitted, at: 1, jobType: 'set_machine', sentJobType: 'set_machine', paras: { hostaddr: '127.50.0.1', node_stats: 'running' },
      requestId: null, lockKey: null, stepNames: ['set machine status'],
    } as Command);
  }
  const registry = new Registry();
  createManagerMetrics(registry, { raft: () => undefined, state: () => state, health: () => undefined });

  it('counts every job by its status, and lets the loop turn while it counts', async () => {
    let turns = 0;
    let counting = true;
    const tick = () => {
      turns++;
      if (counting) setImmediate(tick);
    };
    setImmediate(tick);
    const text = await registry.getSingleMetricAsString('kcm_jobs');
    counting = false;
    const expected: Record<string, number> = { started: 0, ongoing: 0, done: 0, failed: 0 };
    for (const job of Object.values(state.jobs)) expected[job.status]++;
    expect(expected.done).toBe(20_000);
    expect(expected.started + expected.ongoing).toBe(3);
    for (const [status, n] of Object.entries(expected)) expect(text.split('\n')).toContain(`kcm_jobs{status="${status}"} ${n}`);
    expect(turns).toBeGreaterThanOrEqual(2);
  });
});
