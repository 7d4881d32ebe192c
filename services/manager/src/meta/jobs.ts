// Apply functions of the jobs domain: the replicated record of every job's life.

import { own } from './dict';
import { errorEntry } from '@kcm/protocol';
import { accepted, refused, type ApplyOutcome } from './outcome';
import { dict } from './dict';
import { linkAuditRecord } from './audit';
import { type JobRecord, type JobResultRecord, type MetaState, runQueueOf } from './state';
import type { AuditRecord } from '../audit/chain';
import { CommandKind, type CommandBase } from './command-numbers';

export interface JobSubmitted extends CommandBase<typeof CommandKind.JobSubmitted> {
  jobType: string;
  sentJobType: string;
  paras: Record<string, unknown>;
  /** Client idempotency key: the same key yields the same job, never a second one. */
  requestId: string | null;
  /**
   * With a request id: requestDigest(jobType, paras as validated, before any name was
   * resolved to an id), from the proposer. The same key with another digest is CONFLICT.
   * Absent in entries written before: such a submission matches whatever reuses its key.
   */
  requestDigest?: string;
  /** Jobs with the same lock key (e.g. `cluster:7`) run one at a time in submission order. */
  lockKey: string | null;
  /**
   * The job's steps, named by the submitter. When given and no unfinished job holds the
   * lock key, the job is runnable at once and this entry also starts it (status ongoing,
   * as JobStarted would), saving the runner a commit; otherwise it waits in started and
   * the runner commits JobStarted when its turn comes. Absent in entries written before.
   */
  stepNames?: string[];
  /**
   * The leader's maxJobsPerCluster: with a `cluster:` lock key, refused (OVERLOADED) when
   * that many unfinished jobs already hold it. Carried in the entry so every member reaches
   * the same verdict. Absent (internal jobs such as failovers, older entries): no limit.
   */
  maxJobsPerLock?: number;
  /** The submitter's token name (JobRecord.submittedBy); absent for the leader's own jobs. */
  submittedBy?: string;
  /**
   * The submission's audit record, numbered and chained by the leader (audit/chain.ts).
   * Apply refuses the whole submission when it does not follow the chain (meta/audit.ts).
   * Absent on the leader's own jobs and on entries written before the audit trail.
   */
  audit?: AuditRecord;
}

export interface JobStarted extends CommandBase<typeof CommandKind.JobStarted> {
  jobId: string;
  stepNames: string[];
}

export interface JobStepDone extends CommandBase<typeof CommandKind.JobStepDone> {
  jobId: string;
  step: number;
  output: unknown;
}

export interface JobProgress extends CommandBase<typeof CommandKind.JobProgress> {
  jobId: string;
  step: number;
  unitsDone: number;
  unitsTotal: number;
}

export interface JobFinished extends CommandBase<typeof CommandKind.JobFinished> {
  jobId: string;
  outcome: JobResultRecord;
  /**
   * How many finished jobs the history keeps, this one included: the oldest finished ones
   * beyond it are dropped in the same apply. Chosen by the leader that proposes (its
   * config) and carried here, so every member drops exactly the same jobs whatever its
   * own config says. Absent (entries written before the limit existed): nothing is dropped.
   */
  keepFinished?: number;
}

/**
 * Stop a job: one still waiting in its run queue (never started) ends failed with CANCELED
 * in this apply; a running one is marked, and its runner stops at the next step boundary,
 * rolls back, and finishes it failed with CANCELED.
 */
export interface JobCancelRequested extends CommandBase<typeof CommandKind.JobCancelRequested> {
  jobId: string;
  /** The token name of whoever asked (audit and the job's error), or null. */
  by: string | null;
  /** As in JobFinished: the finished-job history the leader keeps. */
  keepFinished?: number;
}

export interface SubmittedJob {
  jobId: string;
  /** True when the request id was seen before and the earlier job is returned. */
  duplicate: boolean;
}

/**
 * The job a request id already created, when this request is a retry of it; CONFLICT when
 * the id was used for a different request (another job type or other paras); undefined
 * when the id is new. Without a digest on either side (entries and images from before
 * digests existed) the request matches, as it always did.
 */
export function jobOfRequest(state: MetaState, requestId: string, digest: string | undefined): ApplyOutcome<SubmittedJob> | undefined {
  const jobId = state.requestIds[requestId];
  if (jobId === undefined) return undefined;
  const job = state.jobs[jobId];
  if (digest !== undefined && job?.requestDigest !== undefined && job.requestDigest !== digest) {
    return refused(
      'CONFLICT',
      `request_id: ${requestId} was already used for job ${jobId} (${job.sentJobType}) with a different body; a retry must send the same job_type and paras, a new request needs a new request_id`,
    );
  }
  return accepted({ jobId, duplicate: true });
}

export function applyJobSubmitted(state: MetaState, cmd: JobSubmitted): ApplyOutcome<SubmittedJob> {
  // The audit record first: a submission that does not extend the chain changes nothing.
  const audit = cmd.audit === undefined ? undefined : linkAuditRecord(state, cmd.audit);
  if (audit !== undefined && 'ok' in audit) return audit;
  const digest = cmd.requestId === null ? undefined : cmd.requestDigest;
  if (cmd.requestId !== null) {
    const earlier = jobOfRequest(state, cmd.requestId, digest);
    if (earlier !== undefined) {
      if (audit && earlier.ok) audit.jobId = earlier.value.jobId;
      return earlier;
    }
  }
  const waiting = cmd.lockKey === null ? 0 : (state.runQueues[cmd.lockKey]?.length ?? 0);
  if (cmd.maxJobsPerLock !== undefined && cmd.lockKey?.startsWith('cluster:') && waiting >= cmd.maxJobsPerLock) {
    return refused('OVERLOADED', `${cmd.lockKey.replace(':', ' ')} already has ${waiting} unfinished jobs (maxJobsPerCluster ${cmd.maxJobsPerLock}); retry once one has finished`);
  }
  const id = String(++state.counters.job);
  const queue = runQueueOf({ id, lockKey: cmd.lockKey });
  // A key is held while any unfinished job has it: this job then waits its turn in 'started'.
  const startsNow = cmd.stepNames !== undefined && cmd.stepNames.length > 0 && state.runQueues[queue] === undefined;
  state.jobs[id] = {
    id,
    jobType: cmd.jobType,
    sentJobType: cmd.sentJobType,
    paras: cmd.paras,
    requestId: cmd.requestId,
    ...(digest === undefined ? {} : { requestDigest: digest }),
    lockKey: cmd.lockKey,
    status: startsNow ? 'ongoing' : 'started',
    submittedAt: cmd.at,
    finishedAt: null,
    stepNames: startsNow ? [...(cmd.stepNames ?? [])] : [],
    stepOutputs: dict(),
    progress: null,
    result: null,
    ...(cmd.submittedBy === undefined ? {} : { submittedBy: cmd.submittedBy }),
  };
  (state.runQueues[queue] ??= []).push(id);
  if (cmd.requestId !== null) state.requestIds[cmd.requestId] = id;
  if (audit) audit.jobId = id;
  return accepted({ jobId: id, duplicate: false });
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
  leaveRunQueue(state, job);
  job.status = cmd.outcome.ok ? 'done' : 'failed';
  job.finishedAt = cmd.at;
  job.progress = null;
  recordFinished(state, job);
  if (cmd.keepFinished !== undefined) dropOldestFinished(state, Math.max(1, cmd.keepFinished));
  return accepted({ duplicate: false });
}

const CANCELED_CODE = errorEntry('CANCELED').code;

/**
 * cancel_job. A job waiting behind another in its run queue never started: it ends failed
 * with CANCELED here. The job at the head of its queue may be running on the leader: it is
 * marked, and its runner stops at the next step boundary, rolls back like a failed step,
 * and finishes it CANCELED (jobs/framework/runner.ts).
 */
export function applyJobCancelRequested(state: MetaState, cmd: JobCancelRequested): ApplyOutcome<{ outcome: 'canceled' | 'stopping' }> {
  const job = own(state.jobs, cmd.jobId) ? state.jobs[cmd.jobId] : undefined;
  if (!job) return refused('NOT_FOUND', `paras.job_id: job ${cmd.jobId} does not exist (or finished and is no longer kept)`);
  if (job.result) return refused('CONFLICT', `paras.job_id: job ${cmd.jobId} already ended ${job.status}`);
  const queue = state.runQueues[runQueueOf(job)] ?? [];
  if (queue[0] !== job.id) {
    const who = cmd.by === null ? '' : ` by ${cmd.by}`;
    applyJobFinished(state, {
      kind: CommandKind.JobFinished, at: cmd.at, jobId: job.id, keepFinished: cmd.keepFinished,
      outcome: { ok: false, errorCode: CANCELED_CODE, errorInfo: `canceled${who} (cancel_job) while it waited; it never ran`, attachment: null },
    });
    return accepted({ outcome: 'canceled' });
  }
  job.cancelRequested ??= { by: cmd.by, at: cmd.at };
  return accepted({ outcome: 'stopping' });
}

/**
 * Keeps the newest `keep` finished jobs. A dropped job's request id goes with it: a
 * client retrying that request from then on creates a new job. Unfinished jobs are never
 * dropped. Why a limit at all: the whole state is one snapshot image, serialised on every
 * member's event loop at every snapshot, and job history would otherwise grow without end
 * (40k jobs: a 40 MB image, about 250 ms to write and 360 ms to read back).
 */
function dropOldestFinished(state: MetaState, keep: number): void {
  const excess = state.finishedJobs.length - keep;
  if (excess <= 0) return;
  for (const id of state.finishedJobs.splice(0, excess)) {
    const job = state.jobs[id];
    if (!job) continue;
    if (job.requestId !== null && state.requestIds[job.requestId] === id) delete state.requestIds[job.requestId];
    delete state.jobs[id];
  }
}

/** Submission order: job ids come from a counter. */
function submissionOrder(a: JobRecord, b: JobRecord): number {
  return Number(a.id) - Number(b.id);
}

/** Finish time, then submission: the order finishedJobs keeps and the oldest are dropped in. */
function finishOrder(a: JobRecord, b: JobRecord): number {
  return (a.finishedAt ?? 0) - (b.finishedAt ?? 0) || submissionOrder(a, b);
}

/**
 * Files a finished job in finishedJobs by finishOrder, normally at the end. Not simply in
 * apply order: the list must be a function of the finished jobs alone, so that a member
 * that rebuilt it from an older image (which only has the finish times) and a member that
 * replayed the log hold the same list, and so drop the same jobs, even where a new leader's
 * clock put a later finish before an earlier one.
 */
function recordFinished(state: MetaState, job: JobRecord): void {
  const list = state.finishedJobs;
  let at = list.length;
  while (at > 0 && finishOrder(job, state.jobs[list[at - 1]]) < 0) at--;
  list.splice(at, 0, job.id);
}

/** finishedJobs for an image from before it existed. */
export function rebuildFinishedJobs(state: MetaState): string[] {
  return Object.values(state.jobs)
    .filter((job) => job.result !== null)
    .sort(finishOrder)
    .map((job) => job.id);
}

/** A finished job leaves its queue (normally as its head: only heads run). */
function leaveRunQueue(state: MetaState, job: JobRecord): void {
  const key = runQueueOf(job);
  const queue = state.runQueues[key] ?? [];
  const at = queue.indexOf(job.id);
  if (at >= 0) queue.splice(at, 1);
  if (queue.length === 0) delete state.runQueues[key];
}

/**
 * Jobs the runner may start now, in submission order: unfinished, and first among the
 * unfinished jobs sharing their lock key. Costs one step per queue, however many jobs wait.
 */
export function runnableJobs(state: MetaState): JobRecord[] {
  const runnable: JobRecord[] = [];
  for (const key in state.runQueues) runnable.push(state.jobs[state.runQueues[key][0]]);
  return runnable.sort(submissionOrder);
}

/** The run queues of a state that has none recorded (an image from before they existed). */
export function rebuildRunQueues(state: MetaState): Record<string, string[]> {
  const queues = dict<string[]>();
  const unfinished = Object.values(state.jobs)
    .filter((job) => !job.result)
    .sort(submissionOrder);
  for (const job of unfinished) (queues[runQueueOf(job)] ??= []).push(job.id);
  return queues;
}
