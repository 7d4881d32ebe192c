/**
 * Reply builders: every reply is the spec's envelope (2.2), built here and nowhere else.
 * `job_type` always echoes the spelling the client sent (an alias stays an alias), so a
 * client matching on its own spelling is never surprised.
 */
import type { KcmError } from './errors';
import { PROTOCOL_VERSION } from './job-types';
import type { StatusAttachment } from './results';

export type JobStatus = 'started' | 'ongoing' | 'done' | 'failed';
export const JOB_STATUSES: readonly JobStatus[] = ['started', 'ongoing', 'done', 'failed'];

export interface ReplyEnvelope {
  version: string;
  /** `'0'` on success, otherwise the catalog code as a decimal string. */
  error_code: string;
  error_info: string;
  /** `accept` acknowledges an async job; the others are job states (spec 3). */
  status: 'accept' | JobStatus;
  /** The async job's id; empty in replies to sync queries. */
  job_id: string;
  job_type: string;
  attachment: Record<string, unknown> | null;
}

/** Acknowledges an async job: status `accept`, the new job id, attachment null (spec 4). */
export function acceptReply(jobId: string, sentJobType: string): ReplyEnvelope {
  return { version: PROTOCOL_VERSION, error_code: '0', error_info: '', status: 'accept', job_id: jobId, job_type: sentJobType, attachment: null };
}

/** Answers a sync query directly: status `done`, no job id (spec 4.6). */
export function doneReply(sentJobType: string, attachment: Record<string, unknown>): ReplyEnvelope {
  return { version: PROTOCOL_VERSION, error_code: '0', error_info: 'OK', status: 'done', job_id: '', job_type: sentJobType, attachment };
}

/**
 * get_status's answer about one job. `sentJobType` is the spelling that job was submitted
 * with; `attachment` is its result (done), its progress (ongoing) or null.
 */
export function statusReply(job: {
  jobId: string;
  sentJobType: string;
  status: JobStatus;
  errorCode: number;
  errorInfo: string;
  attachment: StatusAttachment;
}): ReplyEnvelope {
  return {
    version: PROTOCOL_VERSION,
    error_code: String(job.errorCode),
    error_info: job.errorInfo,
    status: job.status,
    job_id: job.jobId,
    job_type: job.sentJobType,
    attachment: job.attachment,
  };
}

/** A request or job that failed: status `failed`, the catalog code, the message as error_info. */
export function errorReply(err: KcmError, sentJobType = '', jobId = ''): ReplyEnvelope {
  return { version: PROTOCOL_VERSION, error_code: String(err.code), error_info: err.message, status: 'failed', job_id: jobId, job_type: sentJobType, attachment: null };
}
