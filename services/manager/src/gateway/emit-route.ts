// POST /HttpService/Emit: one validation path (parseRequest from @kcm/protocol), then one
// JobService call chosen by the job's mode. An async job that a follower only passes on to
// its leader is validated there, by this same path, and not here as well. Every answer is
// a reply envelope; HTTP status: 200 for every well-formed protocol reply (the spec's
// clients read the outcome from error_code), the catalog's status for envelope, auth, size and availability errors
// (400, 401/403, 413, 503).

import {
  JOB_MODES,
  KcmError,
  acceptReply,
  canonicalJobType,
  doneReply,
  errorReply,
  forbiddenReason,
  parseRequest,
  statusReply,
  type AnyValidRequest,
  type ReplyEnvelope,
} from '@kcm/protocol';
import type { JobService, SubmitContext } from './job-service';
import { issueTokenIfAsked, randomTokens, type TokenMinter } from './token-issue';
import type { EmitRecord } from './request-log';

export interface EmitAnswer {
  httpStatus: number;
  reply: ReplyEnvelope;
  record: EmitRecord;
}

/** The job_type and job_id a body carries, read defensively for echoing in error replies. */
export function echoFields(body: unknown): { sentJobType: string; jobId: string } {
  const fields = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  return {
    sentJobType: typeof fields.job_type === 'string' ? fields.job_type : '',
    jobId: typeof fields.job_id === 'string' ? fields.job_id : '',
  };
}

export function jobTypeLabel(sentJobType: string): string {
  return canonicalJobType(sentJobType) ?? 'unknown';
}

/** A thrown value as a KcmError; anything that is not one is INTERNAL, its detail kept out of the reply. */
export function asKcmError(err: unknown, requestId: string): KcmError {
  if (err instanceof KcmError) return err;
  return KcmError.of('INTERNAL', `internal error; the manager log has the details under request id ${requestId}`, { cause: err });
}

export function errorAnswer(err: KcmError, sentJobType: string, jobId: string): EmitAnswer {
  return {
    httpStatus: err.httpStatus,
    reply: errorReply(err, sentJobType, jobId),
    record: {
      jobTypeLabel: jobTypeLabel(sentJobType),
      sentJobType,
      outcome: err.errorName.toLowerCase(),
      errorCode: String(err.code),
      errorInfo: err.message,
      jobId,
    },
  };
}

function okAnswer(reply: ReplyEnvelope, sentJobType: string): EmitAnswer {
  return {
    httpStatus: 200,
    reply,
    record: { jobTypeLabel: jobTypeLabel(sentJobType), sentJobType, outcome: 'ok', errorCode: reply.error_code, errorInfo: reply.error_info, jobId: reply.job_id },
  };
}

/** An async job's submission the service passes on unvalidated to the member that answers it (see JobService.relaySubmission), or null. */
function relayedSubmission(body: unknown, sentJobType: string, service: JobService, context: SubmitContext): Promise<{ jobId: string }> | null {
  if (!service.relaySubmission || typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const jobType = canonicalJobType(sentJobType);
  if (jobType === undefined || JOB_MODES[jobType] !== 'async') return null;
  // A dry run is answered here (validation reads the state through ReadIndex): relaying
  // expects a job id back, and a dry run makes none.
  const paras = (body as { paras?: unknown }).paras;
  if (typeof paras === 'object' && paras !== null && Object.hasOwn(paras, 'dry_run')) return null;
  return service.relaySubmission(body as Record<string, unknown>, context);
}

/**
 * Answer one Emit body. Never throws: service errors become error envelopes. `onInternal`
 * receives errors that are not KcmErrors (for the log) before they are masked.
 */
export async function answerEmit(
  body: unknown,
  service: JobService,
  requestId: string,
  onInternal: (err: unknown) => void,
  context: SubmitContext = {},
  mintToken: TokenMinter = randomTokens,
): Promise<EmitAnswer> {
  // No body at all (no Content-Type, no length) never reaches the JSON parser.
  if (body === undefined) return errorAnswer(KcmError.of('BAD_JSON', 'body is empty; send a JSON request envelope'), '', '');
  const echo = echoFields(body);
  // Authorization comes before validation: a caller without the role learns nothing about its paras.
  if (context.identity === undefined) return errorAnswer(KcmError.of('UNAUTHENTICATED', 'the request carries no authenticated identity'), echo.sentJobType, echo.jobId);
  const knownType = canonicalJobType(echo.sentJobType);
  const forbidden = knownType === undefined ? null : forbiddenReason(context.identity, knownType);
  if (forbidden !== null) return errorAnswer(KcmError.of('FORBIDDEN', forbidden, { field: 'job_type' }), echo.sentJobType, echo.jobId);
  // The service's answer, or its error as an envelope; a non-KcmError is logged, then masked.
  const answered = async (work: Promise<EmitAnswer>): Promise<EmitAnswer> => {
    try {
      return await work;
    } catch (err) {
      if (!(err instanceof KcmError)) onInternal(err);
      return errorAnswer(asKcmError(err, requestId), echo.sentJobType, echo.jobId);
    }
  };
  const issued = issueTokenIfAsked(body, echo.sentJobType, context.identity.name, mintToken);
  const submitted = issued?.body ?? body;
  const answer = await answerValid(submitted, echo, service, context, answered);
  // create_token: the token goes back in the acknowledgement only, and to a retry by its
  // submitter with the same request_id (token-issue.ts).
  if (issued?.token !== undefined && answer.reply.status === 'accept') {
    const paras = (issued.body as { paras: { name?: unknown; role?: unknown } }).paras;
    answer.reply.attachment = { name: paras.name, role: paras.role, token: issued.token, note: 'shown once: kcm keeps only its SHA-256' };
  }
  return answer;
}

async function answerValid(
  body: unknown,
  echo: { sentJobType: string; jobId: string },
  service: JobService,
  context: SubmitContext,
  answered: (work: Promise<EmitAnswer>) => Promise<EmitAnswer>,
): Promise<EmitAnswer> {
  const relayed = relayedSubmission(body, echo.sentJobType, service, context);
  if (relayed) return answered(relayed.then(({ jobId }) => okAnswer(acceptReply(jobId, echo.sentJobType), echo.sentJobType)));
  const parsed = parseRequest(body);
  if (!parsed.ok) return errorAnswer(parsed.error, echo.sentJobType, echo.jobId);
  return answered(serveRequest(parsed.request, service, context));
}

/** A validated request, served by the JobService call its mode calls for. */
async function serveRequest(request: AnyValidRequest, service: JobService, context: SubmitContext): Promise<EmitAnswer> {
  if (request.jobType === 'get_status') {
    const jobId = request.envelope.job_id ?? '';
    const job = await service.getStatus(jobId, context);
    // The reply names the job's own type (as it was submitted), so a poller sees what it waits for.
    return okAnswer(statusReply({ jobId, ...job }), request.sentJobType);
  }
  if (JOB_MODES[request.jobType] === 'sync') {
    return okAnswer(doneReply(request.sentJobType, await service.runQuery(request, context)), request.sentJobType);
  }
  if (request.dryRun) {
    if (!service.planJob) throw KcmError.of('UNSUPPORTED', 'paras.dry_run: this member does not answer dry runs', { field: 'paras.dry_run' });
    return okAnswer(doneReply(request.sentJobType, await service.planJob(request)), request.sentJobType);
  }
  const { jobId } = await service.submitJob(request, context);
  return okAnswer(acceptReply(jobId, request.sentJobType), request.sentJobType);
}
