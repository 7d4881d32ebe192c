// list_jobs (beyond the spec, issue 19): the job history as the web console and
// `kcm get list_jobs` show it, newest first. It answers what get_status answers for each
// job (status, step k of n, units, error), so a viewer can watch every job without
// knowing its id; numbers travel as decimal strings, as everywhere in the protocol.

import type { ParasOf } from '@kcm/protocol';
import { statusView, type QueryHandler } from '../submit/manager-service';
import type { JobRecord } from '../meta/state';

export const DEFAULT_JOBS_LISTED = 50;

export interface ListedJob {
  job_id: string;
  job_type: string;
  status: string;
  /** Unix seconds of the submission; finished_at is '' until the job ends. */
  submitted_at: string;
  finished_at: string;
  /** From submission to the end, or to now (the manager's clock) while it has not ended. */
  elapsed_ms: string;
  submitted_by: string;
  /** The cluster the job works on, when its paras or its result name one; else ''. */
  cluster_id: string;
  /** The step running now (ongoing), the step that failed (failed), or the last one (done): 1-based; '0' while queued. */
  step: string;
  steps: string;
  step_name: string;
  /** Units of the running step done out of total, when the step reports them; else ''. */
  done: string;
  total: string;
  error_code: string;
  error_info: string;
}

export function listJobs(now: () => number): QueryHandler {
  return (req, state) => {
    const paras = req.paras as ParasOf<'list_jobs'>;
    const limit = paras.limit === undefined ? DEFAULT_JOBS_LISTED : Number(paras.limit);
    const newestFirst = Object.values(state.jobs).sort((a, b) => Number(b.id) - Number(a.id)).slice(0, limit);
    const at = now();
    // A create_cluster names its cluster only in its result: while it runs, the cluster it placed says which.
    const createdBy = new Map(Object.values(state.clusters).map((c) => [c.createdByJob, c.id]));
    return { total_jobs: String(Object.keys(state.jobs).length), list_job: newestFirst.map((job) => listedJob(job, at, createdBy.get(job.id))) };
  };
}

function listedJob(job: JobRecord, now: number, createdCluster: string | undefined): ListedJob {
  const view = statusView(job);
  const progress = view.attachment && 'progress' in view.attachment ? (view.attachment.progress as { step: number; steps: number; step_name: string; done?: number; total?: number }) : undefined;
  const finishedSteps = Object.keys(job.stepOutputs).length;
  const steps = job.stepNames.length;
  // A failed job stopped in the step after its last finished one; a done job finished them all.
  const step = progress?.step ?? (job.status === 'done' ? steps : job.status === 'failed' ? Math.min(finishedSteps + 1, steps) : 0);
  return {
    job_id: job.id,
    job_type: job.sentJobType,
    status: job.status,
    submitted_at: String(Math.floor(job.submittedAt / 1000)),
    finished_at: job.finishedAt === null ? '' : String(Math.floor(job.finishedAt / 1000)),
    elapsed_ms: String(Math.max(0, (job.finishedAt ?? now) - job.submittedAt)),
    submitted_by: job.submittedBy ?? '',
    cluster_id: createdCluster ?? clusterOf(job),
    step: String(step),
    steps: String(steps),
    step_name: progress?.step_name ?? (step > 0 ? (job.stepNames[step - 1] ?? '') : ''),
    done: progress?.done === undefined ? '' : String(progress.done),
    total: progress?.total === undefined ? '' : String(progress.total),
    error_code: String(view.errorCode),
    error_info: view.errorInfo,
  };
}

function clusterOf(job: JobRecord): string {
  const fromParas = job.paras.cluster_id;
  if (typeof fromParas === 'string' || typeof fromParas === 'number') return String(fromParas);
  const fromResult = job.result?.attachment?.cluster_id;
  return typeof fromResult === 'string' ? fromResult : '';
}
