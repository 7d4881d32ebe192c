// A small Emit client for tests, soaks and benchmarks: one POST per call, the reply
// envelope as the member sent it, and the few retry loops every caller needs.

import { setTimeout as sleep } from 'node:timers/promises';
import type { ReplyEnvelope } from '@kcm/protocol';
import { authHeader } from './tokens';

/** The catalog names a caller may retry (the request did not take effect, or is idempotent by request_id). */
const RETRYABLE_CODES = new Set(['4000', '4001', '2002']); // NO_LEADER, OVERLOADED, TIMEOUT

export class EmitError extends Error {
  constructor(readonly member: string, readonly reply: ReplyEnvelope | null, message: string) {
    super(message);
    this.name = 'EmitError';
  }

  /** NO_LEADER, OVERLOADED, TIMEOUT, or no reply at all (member down or stopped). */
  get retryable(): boolean {
    return this.reply === null || RETRYABLE_CODES.has(this.reply.error_code);
  }
}

export interface EmitOptions {
  jobId?: string;
  requestId?: string;
  timeoutMs?: number;
  /** The Authorization header to send: the test admin token's by default, none with null. */
  authorization?: string | null;
}

/** The request envelope emitRaw sends. */
export function requestEnvelope(jobType: string, paras: Record<string, unknown> = {}, opts: EmitOptions = {}): Record<string, unknown> {
  const envelope: Record<string, unknown> = {
    version: '1.0',
    job_id: opts.jobId ?? '',
    job_type: jobType,
    timestamp: String(Math.floor(Date.now() / 1000)),
    user_name: 'kcm_test',
    paras,
  };
  if (opts.requestId) envelope.request_id = opts.requestId;
  return envelope;
}

/** POSTs one envelope; resolves with whatever envelope the member answered (success or error). */
export async function emitRaw(member: string, jobType: string, paras: Record<string, unknown> = {}, opts: EmitOptions = {}): Promise<ReplyEnvelope> {
  const envelope = requestEnvelope(jobType, paras, opts);
  let res: Response;
  try {
    res = await fetch(`http://${member}/HttpService/Emit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...authorizationHeader(opts) },
      body: JSON.stringify(envelope),
      signal: AbortSignal.timeout(opts.timeoutMs ?? 15_000),
    });
  } catch (err) {
    throw new EmitError(member, null, `${jobType} to ${member}: no reply (${(err as Error).message})`);
  }
  return (await res.json()) as ReplyEnvelope;
}

function authorizationHeader(opts: EmitOptions): Record<string, string> {
  if (opts.authorization === null) return {};
  return { authorization: opts.authorization ?? authHeader().authorization };
}

/** Like emitRaw, but an error reply throws EmitError. */
export async function emit(member: string, jobType: string, paras: Record<string, unknown> = {}, opts: EmitOptions = {}): Promise<ReplyEnvelope> {
  const reply = await emitRaw(member, jobType, paras, opts);
  if (reply.error_code !== '0') throw new EmitError(member, reply, `${jobType} to ${member}: error ${reply.error_code}: ${reply.error_info}`);
  return reply;
}

/**
 * Submits an async job until some member acknowledges it. Every attempt carries the same
 * request_id, so a submission that committed but whose reply was lost yields the same job
 * id on retry, never a second job. Non-retryable errors (validation, conflict) throw.
 */
export async function submitJob(
  members: readonly string[] | (() => readonly string[]),
  jobType: string,
  paras: Record<string, unknown>,
  opts: { requestId: string; timeoutMs?: number; onRetry?: (err: EmitError) => void },
): Promise<{ jobId: string; attempts: number; member: string }> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  for (let attempt = 1; ; attempt++) {
    const list = typeof members === 'function' ? members() : members;
    const member = list[(attempt - 1) % list.length];
    try {
      const reply = await emit(member, jobType, paras, { requestId: opts.requestId, timeoutMs: 15_000 });
      return { jobId: reply.job_id, attempts: attempt, member };
    } catch (err) {
      if (!(err instanceof EmitError) || !err.retryable || Date.now() > deadline) throw err;
      opts.onRetry?.(err);
      await sleep(Math.min(100 * attempt, 500));
    }
  }
}

/**
 * get_status from one member: the job's status, a failed job included (its error_code is the
 * job's). A reply about the get_status request itself (NO_LEADER, NOT_FOUND, a read TIMEOUT)
 * names job_type `get_status` instead of the job's own type, and throws EmitError.
 */
export async function jobStatus(member: string, jobId: string, timeoutMs = 10_000): Promise<ReplyEnvelope> {
  const reply = await emitRaw(member, 'get_status', {}, { jobId, timeoutMs });
  if (reply.job_type === 'get_status' && reply.error_code !== '0') {
    throw new EmitError(member, reply, `get_status ${jobId} from ${member}: error ${reply.error_code}: ${reply.error_info}`);
  }
  return reply;
}

/** Polls get_status (any member that answers) until the job is done or failed. */
export async function waitForJobEnd(members: readonly string[] | (() => readonly string[]), jobId: string, timeoutMs = 60_000): Promise<ReplyEnvelope> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (let i = 0; Date.now() < deadline; i++) {
    const list = typeof members === 'function' ? members() : members;
    try {
      const reply = await jobStatus(list[i % list.length], jobId, 5_000);
      if (reply.status === 'done' || reply.status === 'failed') return reply;
      last = reply;
    } catch (err) {
      last = err;
    }
    await sleep(200);
  }
  throw new Error(`job ${jobId} did not end within ${timeoutMs} ms; last answer: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
}

/** A member's /metrics as name{labels} -> value (Prometheus text format, samples only). */
export async function metrics(member: string): Promise<Map<string, number>> {
  const res = await fetch(`http://${member}/metrics`, { signal: AbortSignal.timeout(5_000) });
  const values = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) ([-0-9.e+]+|NaN)$/.exec(line);
    if (m) values.set(m[1], Number(m[2]));
  }
  return values;
}

/** True when the member's kcm_raft_is_leader gauge says it leads. */
export async function isLeader(member: string): Promise<boolean> {
  return (await metrics(member)).get('kcm_raft_is_leader') === 1;
}

/** The one member among `members` whose metrics say it leads; undefined if none or several. */
export async function findLeader(members: readonly string[]): Promise<string | undefined> {
  const flags = await Promise.all(members.map((m) => isLeader(m).catch(() => false)));
  const leaders = members.filter((_, i) => flags[i]);
  return leaders.length === 1 ? leaders[0] : undefined;
}
