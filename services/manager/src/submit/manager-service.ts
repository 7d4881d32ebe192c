// The JobService behind the gateway: one path for every write (validate against the
// replicated state, commit JobSubmitted, reply with the id only after commit) and
// linearizable reads for get_status and the queries.

import { KcmError, parseId, type JobProgressAttachment, type JobResults, type ValidRequest } from '@kcm/protocol';
import type { JobService, JobStatusView, SubmitContext } from '../gateway/job-service';
import { CommandKind } from '../meta/commands';
import { jobOfRequest, type SubmittedJob } from '../meta/jobs';
import { requestDigest } from '../meta/request-digest';
import type { JobRecord, MetaState } from '../meta/state';
import type { Clock, MetaStore } from '../meta/store';
import { orThrow } from '../jobs/framework/errors';
import { redactParas } from '../audit/chain';
import { AuditSequencer } from '../audit/sequencer';
import type { JobRegistry } from '../jobs/framework/runner';
import type { JobDefinition } from '../jobs/framework/workflow';
import { revealSealed } from '../secrets/reveal';
import type { SecretBox } from '../secrets/secret-box';

/** A sync query: answers from the replicated state (and live probes where the spec asks). */
export type QueryHandler = (req: ValidRequest, state: MetaState) => Promise<Record<string, unknown>> | Record<string, unknown>;

export interface ManagerServiceDeps {
  store: MetaStore;
  registry: JobRegistry;
  queries: ReadonlyMap<string, QueryHandler>;
  /** A ReadIndex barrier: resolves once the local state reflects every write committed before the call. */
  linearizableRead(): Promise<void>;
  /**
   * What a submission's validation waits for; defaults to linearizableRead. Validation only
   * needs every write committed so far to be applied here: the submission itself goes
   * through Raft, so a deposed leader's stale view can never commit a job.
   */
  validationBarrier?(): Promise<void>;
  /** Stamps each submission (its job's submittedAt). Default: Date.now. */
  now?: Clock;
  /** Unfinished jobs one cluster may have (queued or running); more are refused OVERLOADED. Absent: no limit. */
  maxJobsPerCluster?: number;
  /** Opens the passwords a job result holds sealed (create_cluster's) for get_status. */
  secrets: SecretBox;
  /** Told after each submission commits, so the runner starts the job without waiting. */
  onSubmitted?(jobId: string): void;
}

export class ManagerService implements JobService {
  private readonly audit = new AuditSequencer();

  constructor(private readonly deps: ManagerServiceDeps) {}

  async submitJob(req: ValidRequest, context: SubmitContext = {}): Promise<{ jobId: string }> {
    const def = this.definitionOf(req);
    const paras = req.paras as Record<string, unknown>;
    await (this.deps.validationBarrier ?? this.deps.linearizableRead)();
    // A retry of a request that already created a job gets that job, even when the job has
    // since changed the state its validation looks at (a retried delete_machine must not
    // answer NOT_FOUND because its own first attempt already removed the machine).
    // The same request id with another body is CONFLICT here as in apply (see jobOfRequest).
    const requestId = req.envelope.request_id;
    const digest = requestId === undefined ? undefined : requestDigest(req.jobType, paras);
    const earlier = requestId === undefined ? undefined : jobOfRequest(this.deps.store.state(), requestId, digest);
    if (earlier !== undefined) return { jobId: orThrow(earlier).jobId };
    const resolved = validatedParas(def, paras, this.deps.store.state());
    const now = (this.deps.now ?? Date.now)();
    const command = {
      kind: CommandKind.JobSubmitted,
      at: now,
      jobType: req.jobType,
      sentJobType: req.sentJobType,
      // Secrets in paras (an S3 secret key) enter the log sealed.
      paras: def.sealParas ? def.sealParas(resolved, this.deps.secrets) : resolved,
      requestId: requestId ?? null,
      ...(digest === undefined ? {} : { requestDigest: digest }),
      lockKey: def.lockKey(resolved, this.deps.store.state()),
      // Lets the commit also start the job when nothing it waits for is running.
      stepNames: def.steps(resolved).map((s) => s.name),
      ...(this.deps.maxJobsPerCluster === undefined ? {} : { maxJobsPerLock: this.deps.maxJobsPerCluster }),
      ...(context.identity === undefined ? {} : { submittedBy: context.identity.name }),
    } as const;
    // Numbered right before the proposal, with no await between: proposals keep call order.
    const audit = context.identity === undefined ? undefined : this.audit.next(this.deps.store.state().audit.tip, auditFields(req, context, now));
    let outcome;
    try {
      outcome = await this.deps.store.propose(audit === undefined ? command : { ...command, audit });
    } catch (err) {
      this.audit.reset();
      throw err;
    }
    if (!outcome.ok && outcome.refusal === 'NO_LEADER') this.audit.reset();
    const submitted = orThrow(outcome) as SubmittedJob;
    this.deps.onSubmitted?.(submitted.jobId);
    return { jobId: submitted.jobId };
  }

  private definitionOf(req: ValidRequest): JobDefinition {
    const def = this.deps.registry.get(req.jobType);
    if (!def) throw KcmError.of('UNSUPPORTED', `${req.sentJobType} is a valid job type that this kcm does not run yet`, { field: 'job_type' });
    return def;
  }

  /** A dry run: the submission's own checks on the live state, then the plan; nothing is proposed. */
  async planJob(req: ValidRequest): Promise<Record<string, unknown>> {
    const def = this.definitionOf(req);
    const paras = req.paras as Record<string, unknown>;
    await this.deps.linearizableRead();
    const state = this.deps.store.state();
    const resolved = validatedParas(def, paras, state);
    const lockKey = def.lockKey(resolved, state);
    return {
      dry_run: '1',
      job_type: req.sentJobType,
      steps: def.steps(resolved).map((s) => s.name),
      // Jobs with the same lock run one at a time: a real submission would wait behind these.
      waits_behind: String(lockKey === null ? 0 : (state.runQueues[lockKey]?.length ?? 0)),
      ...(def.dryRunPlan ? { plan: def.dryRunPlan(resolved, state) } : {}),
    };
  }

  /**
   * The passwords a result holds (create_cluster's) are shown to the token that submitted
   * the job and to admins; anyone else, and a call with no identity, sees HIDDEN_SECRET.
   */
  async getStatus(jobId: string, context: SubmitContext = {}): Promise<JobStatusView> {
    await this.deps.linearizableRead();
    const state = this.deps.store.state();
    const job = state.jobs[jobId];
    if (!job) throw KcmError.of('NOT_FOUND', missingJobMessage(state, jobId), { field: 'job_id' });
    const view = statusView(job);
    if (!view.attachment) return view;
    const caller = context.identity;
    const mayReveal = caller !== undefined && (caller.role === 'admin' || (job.submittedBy !== undefined && caller.name === job.submittedBy));
    return { ...view, attachment: revealSealed(view.attachment, this.deps.secrets, mayReveal) };
  }

  async runQuery(req: ValidRequest): Promise<Record<string, unknown>> {
    const handler = this.deps.queries.get(req.jobType);
    if (!handler) throw KcmError.of('UNSUPPORTED', `${req.sentJobType} is not answered by this kcm yet`, { field: 'job_type' });
    await this.deps.linearizableRead();
    return handler(req, this.deps.store.state());
  }
}

/** What the audit trail says about a submission, besides its place in the chain (audit/chain.ts). */
function auditFields(req: ValidRequest, context: SubmitContext, now: number) {
  return {
    at: now,
    by: context.identity?.name ?? '',
    role: context.identity?.role ?? 'viewer',
    client: context.clientAddress ?? '',
    via: context.receivedBy ?? '',
    jobType: req.jobType,
    sentJobType: req.sentJobType,
    // As the client sent them (the validated paras have numbers parsed and defaults filled).
    paras: redactParas((req.envelope.paras ?? {}) as Record<string, unknown>),
    requestId: req.envelope.request_id ?? null,
  } as const;
}

/** The paras a job is committed with: checked against the state (KcmError naming the field), then resolved. */
function validatedParas(def: JobDefinition, paras: Record<string, unknown>, state: MetaState): Record<string, unknown> {
  def.validate?.(paras, state);
  return def.resolve ? def.resolve(paras, state) : paras;
}

/** A job id never handed out, or one of a finished job dropped from the kept history. */
function missingJobMessage(state: MetaState, jobId: string): string {
  const issued = parseId(jobId).ok && Number(jobId) <= state.counters.job;
  return issued
    ? `job ${jobId} finished and is no longer kept: the job history keeps only the newest finished jobs (finishedJobsKept)`
    : `job ${jobId} does not exist`;
}

export function statusView(job: JobRecord): JobStatusView {
  const base = { status: job.status, sentJobType: job.sentJobType };
  if (job.result) {
    // Written by the job's result(), which the registry types as ResultOf<its job type>.
    const result = (job.result.attachment ?? {}) as JobResults[keyof JobResults];
    return { ...base, errorCode: job.result.errorCode, errorInfo: job.result.errorInfo, attachment: job.result.ok ? result : null };
  }
  if (job.status === 'started' || job.stepNames.length === 0) return { ...base, errorCode: 0, errorInfo: '', attachment: null };
  const step = Object.keys(job.stepOutputs).length; // steps finish in order
  const progress: JobProgressAttachment['progress'] = { step: Math.min(step + 1, job.stepNames.length), steps: job.stepNames.length, step_name: job.stepNames[step] ?? '' };
  if (job.progress && job.progress.step === step) {
    progress.done = job.progress.unitsDone;
    progress.total = job.progress.unitsTotal;
  }
  return { ...base, errorCode: 0, errorInfo: '', attachment: { progress } };
}
