import { describe, expect, it } from 'vitest';
import { CommitPacer } from '../../src/jobs/framework/commit-pacer';
import { CommandKind, type Command } from '../../src/meta/commands';
import { LocalStore } from '../helpers/local-store';

/** A LocalStore that records the order in which commands reach it. */
function recordingStore() {
  const store = new LocalStore();
  const order: string[] = [];
  const propose = store.propose.bind(store);
  store.propose = async (cmd: Command) => {
    order.push(cmd.kind === CommandKind.JobSubmitted ? `submit ${cmd.requestId}` : `runner ${cmd.kind}`);
    return propose(cmd);
  };
  return { store, order };
}

const submission = (requestId: string): Command => ({ kind: CommandKind.JobSubmitted, at: 0, jobType: 't', sentJobType: 't', paras: {}, requestId, lockKey: null });
const started = (jobId: string): Command => ({ kind: CommandKind.JobStarted, at: 0, jobId, stepNames: ['a'] });

describe('CommitPacer', () => {
  it('holds a runner commit until the next submission, then proposes it in the same turn', async () => {
    const { store, order } = recordingStore();
    const pacer = new CommitPacer(store, 10_000);
    await pacer.submitterStore.propose(submission('r1'));
    const runnerCommit = pacer.runnerStore.propose(started('1'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(order).toEqual(['submit r1']); // still held
    const next = pacer.submitterStore.propose(submission('r2'));
    await Promise.all([next, runnerCommit]);
    expect(order).toEqual(['submit r1', 'submit r2', `runner ${CommandKind.JobStarted}`]);
    expect((await runnerCommit).ok).toBe(true);
  });

  it('proposes a held runner commit on its own after maxHoldMs when no submission comes', async () => {
    const { store, order } = recordingStore();
    const pacer = new CommitPacer(store, 5);
    await pacer.submitterStore.propose(submission('r1'));
    const t0 = performance.now();
    const outcome = await pacer.runnerStore.propose(started('1'));
    expect(outcome.ok).toBe(true);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(4);
    expect(order).toEqual(['submit r1', `runner ${CommandKind.JobStarted}`]);
  });

  it('passes a refused or failed runner commit back to the runner unchanged', async () => {
    const { store } = recordingStore();
    const pacer = new CommitPacer(store, 1);
    expect(await pacer.runnerStore.propose(started('404'))).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
    store.failProposals = true;
    await expect(pacer.runnerStore.propose(started('1'))).rejects.toThrow('not leader');
  });
});
