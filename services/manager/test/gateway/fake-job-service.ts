// An in-memory JobService for unit tests of the gateway and the CLI against the interface.
// Jobs advance one scripted status per get_status poll, so a poller sees started, then
// ongoing with progress, then a terminal status, deterministically.

import { KcmError, type JobType, type StatusAttachment, type ValidRequest } from '@kcm/protocol';
import type { JobService, JobStatusView } from '../../src/gateway/job-service';

export type Script = (request: ValidRequest) => Omit<JobStatusView, 'sentJobType'>[];

/** started -> three ongoing steps with progress -> done with a result naming the job type. */
export const progressingScript: Script = (request) => [
  { status: 'started', errorCode: 0, errorInfo: '', attachment: null },
  { status: 'ongoing', errorCode: 0, errorInfo: '', attachment: { progress: { step: 1, steps: 3, step_name: 'prepare' } } },
  { status: 'ongoing', errorCode: 0, errorInfo: '', attachment: { progress: { step: 2, steps: 3, step_name: 'copy_rows', done: 500, total: 1000, unit: 'rows' } } },
  { status: 'ongoing', errorCode: 0, errorInfo: '', attachment: { progress: { step: 3, steps: 3, step_name: 'verify' } } },
  // A marker no real job returns: the CLI tests see the attachment passed through as it came.
  { status: 'done', errorCode: 0, errorInfo: 'OK', attachment: { finished: request.jobType } as unknown as StatusAttachment },
];

/** started -> one ongoing step -> failed with INSTANCE_FAILED. */
export const failingScript: Script = () => [
  { status: 'started', errorCode: 0, errorInfo: '', attachment: null },
  { status: 'ongoing', errorCode: 0, errorInfo: '', attachment: { progress: { step: 1, steps: 2, step_name: 'install_instances' } } },
  { status: 'failed', errorCode: KcmError.of('INSTANCE_FAILED', 'x').code, errorInfo: 'mariadbd exited with status 1', attachment: null },
];

interface FakeJob {
  request: ValidRequest;
  timeline: Omit<JobStatusView, 'sentJobType'>[];
  polls: number;
}

export class FakeJobService implements JobService {
  readonly submitted: ValidRequest[] = [];
  readonly queries: ValidRequest[] = [];
  /** The next call of any method rejects with this, once. */
  nextError: unknown = undefined;
  /** Attachments returned by runQuery, per canonical job type; `{}` when absent. */
  queryAnswers: Partial<Record<JobType, Record<string, unknown>>> = {};
  script: Script = progressingScript;

  private readonly jobs = new Map<string, FakeJob>();
  private lastJobId = 0;

  private takeError(): void {
    if (this.nextError === undefined) return;
    const err = this.nextError;
    this.nextError = undefined;
    throw err;
  }

  async submitJob(request: ValidRequest): Promise<{ jobId: string }> {
    this.takeError();
    this.submitted.push(request);
    const jobId = String(++this.lastJobId);
    this.jobs.set(jobId, { request, timeline: this.script(request), polls: 0 });
    return { jobId };
  }

  async getStatus(jobId: string): Promise<JobStatusView> {
    this.takeError();
    const job = this.jobs.get(jobId);
    if (!job) throw KcmError.of('NOT_FOUND', `job ${jobId} does not exist`, { field: 'job_id' });
    const view = job.timeline[Math.min(job.polls, job.timeline.length - 1)];
    job.polls++;
    return { ...view, sentJobType: job.request.sentJobType };
  }

  async runQuery(request: ValidRequest): Promise<Record<string, unknown>> {
    this.takeError();
    this.queries.push(request);
    return this.queryAnswers[request.jobType] ?? {};
  }
}
