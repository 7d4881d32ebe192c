// The one interface the gateway calls. The gateway owns HTTP, parsing, auth, metrics and
// the reply envelope; a JobService owns what a job means. The real implementation is the
// Raft-backed manager (commit JobSubmitted, read state with ReadIndex); unit tests use a fake.

import type { Identity, JobStatus, StatusAttachment, ValidRequest } from '@kcm/protocol';

/** What get_status reports about one job. */
export interface JobStatusView {
  status: JobStatus;
  /** 0 while the job is fine; the catalog code of the error that failed it otherwise. */
  errorCode: number;
  errorInfo: string;
  /** The job's result when done (the protocol's ResultOf its job type); its progress while ongoing; null when none. */
  attachment: StatusAttachment;
  /** The job_type spelling the job was submitted with (replies echo it). */
  sentJobType: string;
}

/** Where a submission came from, beyond its body. */
export interface SubmitContext {
  /** The member that forwarded this submission to us (forward/), if any. */
  forwardedBy?: string;
  /** This request's id (x-request-id); a member forwarding it sends the same id along. */
  requestId?: string;
  /**
   * Who sent it, as the member that received it from the client authenticated it (a
   * forwarded request carries that member's finding). Without one, nothing is served.
   */
  identity?: Identity;
  /** The client's address as the receiving member saw it (audit trail). */
  clientAddress?: string;
  /** The member that received it from the client (audit trail). */
  receivedBy?: string;
}

/**
 * Contract for every method: a KcmError thrown (or rejected) becomes an error envelope with
 * the error's code and HTTP status (NO_LEADER -> 503, NOT_FOUND -> 200 with the code, ...);
 * any other error becomes INTERNAL, logged with the request id, with no detail sent back.
 * The request passed in has already been validated by parseRequest.
 */
export interface JobService {
  /** An async job. Resolves with the job id only once the submission is durable (committed). */
  submitJob(req: ValidRequest, context?: SubmitContext): Promise<{ jobId: string }>;
  /** get_status. Throws KcmError NOT_FOUND for an unknown job id. */
  getStatus(jobId: string, context?: SubmitContext): Promise<JobStatusView>;
  /** A sync query (JOB_MODES[jobType] === 'sync', except get_status): the reply attachment. */
  runQuery(req: ValidRequest, context?: SubmitContext): Promise<Record<string, unknown>>;
  /**
   * Optional. An async job's envelope, not validated yet, that another member is to answer
   * (a follower's leader): passed on as it came, the leader's answer relayed. The leader
   * validates every submission anyway (its schema decides during an upgrade), so a member
   * that only relays need not parse it a second time. Returns null, synchronously, when
   * this member answers the submission itself (it leads, or no leader is known: then bad
   * input still gets its validation error, not NO_LEADER).
   */
  relaySubmission?(envelope: Record<string, unknown>, context: SubmitContext): Promise<{ jobId: string }> | null;
}
