// Job family: cancel_job (beyond the spec's list, issue 19). One step commits the request;
// the apply decides (meta/jobs.ts applyJobCancelRequested): a waiting job ends CANCELED at
// once, a running one is stopped by its runner at the next step boundary and rolled back.

import { KcmError } from '@kcm/protocol';
import { CommandKind } from '../meta/commands';
import { own } from '../meta/dict';
import type { MetaState } from '../meta/state';
import { orThrow } from './framework/errors';
import type { JobOf } from './framework/workflow';

function cancelable(state: MetaState, jobId: string): void {
  const job = own(state.jobs, jobId) ? state.jobs[jobId] : undefined;
  if (!job) throw KcmError.of('NOT_FOUND', `paras.job_id: job ${jobId} does not exist (or finished and is no longer kept)`, { field: 'paras.job_id' });
  if (job.result) throw KcmError.of('CONFLICT', `paras.job_id: job ${jobId} already ended ${job.status}`, { field: 'paras.job_id' });
  if (job.jobType === 'cancel_job') throw KcmError.of('CONFLICT', `paras.job_id: job ${jobId} is itself a cancel_job`, { field: 'paras.job_id' });
}

export function cancelJobJob(keepFinished: number | undefined): JobOf<'cancel_job', { 'request cancellation': { outcome: 'canceled' | 'stopping' } }> {
  return {
    jobType: 'cancel_job',
    validate: (p, state) => cancelable(state, p.job_id),
    // Not behind the job it stops: a cancel must not wait for what it cancels.
    lockKey: () => null,
    steps: (p) => [
      {
        name: 'request cancellation',
        async run(ctx) {
          const by = ctx.state().jobs[ctx.jobId]?.submittedBy ?? null;
          const outcome = orThrow(await ctx.propose({ kind: CommandKind.JobCancelRequested, at: ctx.now(), jobId: p.job_id, by, keepFinished })) as { outcome: 'canceled' | 'stopping' };
          return { outcome: outcome.outcome };
        },
      },
    ],
    result: (o, p) => ({ job_id: p.job_id, outcome: o['request cancellation'].outcome }),
  };
}
