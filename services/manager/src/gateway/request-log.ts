// Request ids and the one log line per Emit. A caller-supplied x-request-id is kept (so a
// CLI or proxy can follow its request through the logs) when it is a sane token; otherwise
// the gateway makes one. The id goes back in the x-request-id response header.

import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';

export const REQUEST_ID_HEADER = 'x-request-id';
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

export function requestIdFor(raw: IncomingMessage): string {
  const offered = raw.headers[REQUEST_ID_HEADER];
  return typeof offered === 'string' && SAFE_REQUEST_ID.test(offered) ? offered : randomUUID();
}

/** What one Emit ended as: filled in by the route or the error handler, read when the reply is sent. */
export interface EmitRecord {
  /** Canonical job type or "unknown": the bounded metrics label. */
  jobTypeLabel: string;
  /** The job_type string the client sent ("" when none could be read). */
  sentJobType: string;
  /** "ok" or the catalog error name, lower-cased. */
  outcome: string;
  errorCode: string;
  errorInfo: string;
  jobId: string;
}

const records = new WeakMap<FastifyRequest, EmitRecord>();

export function recordEmit(request: FastifyRequest, record: EmitRecord): void {
  records.set(request, record);
}

/** What the request recorded so far, if anything. */
export function findEmitRecord(request: FastifyRequest): EmitRecord | undefined {
  return records.get(request);
}

/** The request's record; a request that recorded nothing counts as an internal failure. */
export function emitRecordOf(request: FastifyRequest): EmitRecord {
  return (
    records.get(request) ?? {
      jobTypeLabel: 'unknown',
      sentJobType: '',
      outcome: 'internal',
      errorCode: '',
      errorInfo: 'no reply was recorded',
      jobId: '',
    }
  );
}

// A client controls these strings; keep log lines bounded whatever it sends.
export const clip = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max)}...(${text.length} chars)` : text);

/** One info line per Emit (a submission forwarded to the leader gets a debug line there, forward/). */
export function logEmit(request: FastifyRequest, reply: FastifyReply, record: EmitRecord, durationMs: number): void {
  const line = {
    request_id: request.id,
    job_type: clip(record.sentJobType, 64),
    outcome: record.outcome,
    error_code: record.errorCode,
    job_id: record.jobId,
    status_code: reply.statusCode,
    duration_ms: Math.round(durationMs * 1000) / 1000,
    ...(record.outcome === 'ok' ? {} : { error_info: clip(record.errorInfo, 300) }),
  };
  if (record.outcome === 'internal') request.log.error(line, 'emit');
  else request.log.info(line, 'emit');
}
