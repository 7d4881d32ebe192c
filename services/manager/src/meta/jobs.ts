// Apply functions of the jobs domain: the replicated record of every job's life.

import type { JobFinished, JobProgress, JobStarted, JobStepDone, JobSubmitted } from './commands';
import { accepted, refused, type ApplyOutcome } from './outcome';
import type { JobRecord, MetaState } from './state';

export interface SubmittedJob {
  jobId: string;
  /** True when the request id was seen before and the earlier job is returned. */
  duplicate: boolean;
}

export function applyJobSubmitted(state: MetaState, cmd: JobSubmitted): ApplyOutcome<SubmittedJob> {
  if (cmd.requestId !== null) {
    const earlier = state.requestIds[cmd.requestId];
    if (earlier !== undefined) return accepted({ jobId: earlier, duplicate: true });
  }
  const id = String(++state.counters.job);
  const startsNow = cmd.stepNames !== undefined && cmd.stepNames.length > 0 && !lockKeyHeld(state, cmd.lockKey);
  state.jobs[id] = {
    id,
    jobType: cmd.jobType,
    sentJobType: cmd.sentJobType,
    paras: cmd.paras,
    requestId: cmd.requestId,
    lockKey: cmd.lockKey,
    status: startsNow ? 'ongoing' : 'started',
    submittedAt: cmd.at,
    finishedAt: null,
    stepNames: startsNow ? [...(cmd.stepNames ?? [])] : [],
    stepOutputs: {},
    progress: null,
    result: null,
  };
  state.openJobs[id] = true;
  if (cmd.requestId !== null) state.requestIds[cmd.requestId] = id;
  return accepted({ jobId: id, duplicate: false });
}

/** True when an unfinished job holds `lockKey` (a job without a key never waits). */
function lockKeyHeld(state: MetaState, lockKey: string | null): boolean {
  if (lockKey === null) return false;
  for (const id in state.openJobs) if (state.jobs[id].lockKey === lockKey) return true;
  return false;
}

function unfinishedJob(state: MetaState, jobId: string): JobRecord | ApplyOutcome<never> {
  const job = state.jobs[jobId];
  if (!job) return refused('NOT_FOUND', `job ${jobId} does not exist`);
  if (job.result) return refused('CONFLICT', `job ${jobId} already finished as ${job.status}`);
  return job;
}

const isRecord = (x: JobRecord | ApplyOutcome<never>): x is JobRecord => 'id' in x;

/** Starting twice (a new leader resuming) keeps the step list the job started with. */
export function applyJobStarted(state: MetaState, cmd: JobStarted): ApplyOutcome<{ stepNames: string[] }> {
  const job = unfinishedJob(state, cmd.jobId);
  if (!isRecord(job)) return job;
  if (job.stepNames.length === 0) job.stepNames = [...cmd.stepNames];
  job.status = 'ongoing';
  return accepted({ stepNames: job.stepNames });
}

/** A step's output is recorded once; a repeated report returns the first output. */
export function applyJobStepDone(state: MetaState, cmd: JobStepDone): ApplyOutcome<{ output: unknown; duplicate: boolean }> {
  const job = unfinishedJob(state, cmd.jobId);
  if (!isRecord(job)) return job;
  if (cmd.step < 0 || cmd.step >= job.stepNames.length) {
    return refused('INVALID_PARAS', `job ${cmd.jobId} has no step ${cmd.step}`);
  }
  if (cmd.step in job.stepOutputs) return accepted({ output: job.stepOutputs[cmd.step], duplicate: true });
  job.stepOutputs[cmd.step] = cmd.output ?? null;
  job.progress = null;
  return accepted({ output: job.stepOutputs[cmd.step], duplicate: false });
}

export function applyJobProgress(state: MetaState, cmd: JobProgress): ApplyOutcome<null> {
  const job = unfinishedJob(state, cmd.jobId);
  if (!isRecord(job)) return job;
  job.progress = { step: cmd.step, unitsDone: cmd.unitsDone, unitsTotal: cmd.unitsTotal };
  return accepted(null);
}

export function applyJobFinished(state: MetaState, cmd: JobFinished): ApplyOutcome<{ duplicate: boolean }> {
  const job = state.jobs[cmd.jobId];
  if (!job) return refused('NOT_FOUND', `job ${cmd.jobId} does not exist`);
  if (job.result) return accepted({ duplicate: true });
  job.result = cmd.outcome;
  delete state.openJobs[cmd.jobId];
  job.status = cmd.outcome.ok ? 'done' : 'failed';
  job.finishedAt = cmd.at;
  job.progress = null;
  return accepted({ duplicate: false });
}

/**
 * Jobs the runner may start now: unfinished, and first in submission order among the
 * unfinished jobs sharing their lock key.
 */
export function runnableJobs(state: MetaState): JobRecord[] {
  const heldKeys = new Set<string>();
  const runnable: JobRecord[] = [];
  const unfinished = Object.keys(state.openJobs)
    .map((id) => state.jobs[id])
    .sort((a, b) => Number(a.id) - Number(b.id));
  for (const job of unfinished) {
    if (job.lockKey === null) {
      runnable.push(job);
    } else if (!heldKeys.has(job.lockKey)) {
      heldKeys.add(job.lockKey);
      runnable.push(job);
    }
  }
  return runnable;
}
