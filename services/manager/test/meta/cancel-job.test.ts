// cancel_job in the replicated state: a job waiting in its run queue ends CANCELED at once
// and never becomes runnable; the job at the head of its queue (possibly running) is marked
// for its runner to stop at the next step boundary; a finished job cannot be canceled.

import { describe, expect, it } from 'vitest';
import { errorEntry } from '@kcm/protocol';
import { CommandKind } from '../../src/meta/commands';
import { applyCommand } from '../../src/meta/fsm';
import { runnableJobs } from '../../src/meta/jobs';
import { emptyMetaState, type MetaState } from '../../src/meta/state';

function submit(state: MetaState, lockKey: string | null): string {
  const out = applyCommand(state, { kind: CommandKind.JobSubmitted, at: 1, jobType: 'add_shards', sentJobType: 'add_shards', paras: {}, requestId: null, lockKey, stepNames: ['a', 'b'] });
  if (!out.ok) throw new Error(out.message);
  return (out.value as { jobId: string }).jobId;
}

const cancel = (state: MetaState, jobId: string) => applyCommand(state, { kind: CommandKind.JobCancelRequested, at: 5, jobId, by: 'ops' });

describe('JobCancelRequested', () => {
  it('ends a waiting job CANCELED at once: it never runs, and the queue moves on without it', () => {
    const s = emptyMetaState();
    const running = submit(s, 'cluster:1');
    const waiting = submit(s, 'cluster:1');
    const after = submit(s, 'cluster:1');
    expect(cancel(s, waiting)).toEqual({ ok: true, value: { outcome: 'canceled' } });
    expect(s.jobs[waiting]).toMatchObject({ status: 'failed', result: { ok: false, errorCode: errorEntry('CANCELED').code } });
    expect(s.jobs[waiting].result!.errorInfo).toBe('canceled by ops (cancel_job) while it waited; it never ran');
    expect(s.runQueues['cluster:1']).toEqual([running, after]);
    expect(runnableJobs(s).map((j) => j.id)).toEqual([running]);
  });

  it('marks the job at the head of its queue for its runner, which stops it between steps', () => {
    const s = emptyMetaState();
    const running = submit(s, 'cluster:1');
    expect(cancel(s, running)).toEqual({ ok: true, value: { outcome: 'stopping' } });
    expect(s.jobs[running].cancelRequested).toEqual({ by: 'ops', at: 5 });
    expect(s.jobs[running].result).toBeNull();
  });

  it('refuses a job that ended or does not exist, changing nothing', () => {
    const s = emptyMetaState();
    const job = submit(s, null);
    applyCommand(s, { kind: CommandKind.JobFinished, at: 2, jobId: job, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: {} } });
    const before = JSON.stringify(s);
    expect(cancel(s, job)).toMatchObject({ ok: false, refusal: 'CONFLICT' });
    expect(cancel(s, '99')).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
    expect(cancel(s, '__proto__')).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
    expect(JSON.stringify(s)).toBe(before);
  });
});
