/**
 * The request envelope (spec 2.1) and the one validation path used by gateway and CLI:
 * envelope first, then the paras of its job type.
 */
import { z } from 'zod';
import { KcmError } from './errors';
import { parseText } from './formats';
import { formatIssues, safeParseWire } from './issues';
import { canonicalJobType, JOB_MODES, PROTOCOL_VERSION, type JobType } from './job-types';
import { PARAS_SCHEMAS, type ParasOf } from './paras';
import { objectShapeOf } from './schema-walk';

export interface RequestEnvelope {
  version: string;
  /** Empty or absent when issuing a job; the job asked about for get_status. */
  job_id?: string;
  job_type: string;
  /** Unix seconds, decimal digits. */
  timestamp: string;
  user_name?: string;
  /** `{}` when the job has none. */
  paras?: Record<string, unknown>;
  /** kcm extension: idempotency key. A retried request with the same key gets the same job. */
  request_id?: string;
}

export interface ValidRequest<T extends JobType = JobType> {
  /** Canonical job type. */
  jobType: T;
  /** The spelling the client sent (an alias or the canonical name); replies echo it. */
  sentJobType: string;
  /** The envelope's known fields as sent, with `paras` defaulted to `{}`. */
  envelope: RequestEnvelope;
  paras: ParasOf<T>;
  /** `"dry_run": "1"` in an async job's paras: validate and answer the plan, commit nothing. */
  dryRun?: boolean;
}

/** A ValidRequest narrowed by `jobType`: `if (r.jobType === 'create_cluster') r.paras.nodes`. */
export type AnyValidRequest = { [K in JobType]: ValidRequest<K> }[JobType];

export type ParseResult = { ok: true; request: AnyValidRequest } | { ok: false; error: KcmError };

const MAX_USER_NAME = 128;

const envelopeSchema = z.object({
  version: z.string().refine((v) => v === PROTOCOL_VERSION, `must be "${PROTOCOL_VERSION}" (the protocol version kcm speaks)`),
  job_id: z.string().max(128, 'must be at most 128 characters').optional(),
  job_type: z.string().min(1, 'must not be empty'),
  timestamp: z.string().regex(/^[0-9]{1,12}$/, 'must be Unix seconds in decimal digits'),
  user_name: z
    .string()
    .superRefine((s, ctx) => {
      const r = s === '' ? undefined : parseText(s, MAX_USER_NAME);
      if (r && !r.ok) ctx.addIssue({ code: 'custom', message: r.rule, input: s });
    })
    .optional(),
  paras: z.looseObject({}).optional(),
  request_id: z
    .string()
    .regex(/^[\x21-\x7e]{1,128}$/, 'must be 1..128 printable ASCII characters without spaces')
    .optional(),
});

const ENVELOPE_FIELDS = Object.keys(envelopeSchema.shape);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** For a body read as text (the CLI's files, or a gateway without its own JSON parser). */
export function parseRequestJson(text: string): ParseResult {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause);
    return { ok: false, error: KcmError.of('BAD_JSON', `body: is not valid JSON (${why})`, { field: 'body', cause }) };
  }
  return parseRequest(body);
}

export function parseRequest(body: unknown): ParseResult {
  if (!isPlainObject(body)) {
    const got = Array.isArray(body) ? 'an array' : body === null ? 'null' : `a ${typeof body}`;
    return { ok: false, error: KcmError.of('BAD_ENVELOPE', `body: must be a JSON object (the request envelope), got ${got}`, { field: 'body' }) };
  }
  const parsed = safeParseWire(envelopeSchema, body);
  if (!parsed.success) {
    const { message, field } = formatIssues('', parsed.error.issues, ENVELOPE_FIELDS);
    return { ok: false, error: KcmError.of('BAD_ENVELOPE', message, { field }) };
  }
  const fields = parsed.data;
  const jobType = canonicalJobType(fields.job_type);
  if (jobType === undefined) {
    return {
      ok: false,
      error: KcmError.of('UNKNOWN_JOB_TYPE', `job_type: is not a known job type, got ${JSON.stringify(fields.job_type)}`, { field: 'job_type' }),
    };
  }
  if (jobType === 'get_status' && !fields.job_id) {
    return { ok: false, error: KcmError.of('BAD_ENVELOPE', 'job_id: is required for get_status (the job to query)', { field: 'job_id' }) };
  }
  const envelope: RequestEnvelope = { ...fields, paras: fields.paras ?? {} };
  const paras = validateParas(jobType, envelope.paras);
  if (!paras.ok) return paras;
  const dryRun = dryRunOf(jobType, envelope.paras ?? {});
  if (dryRun instanceof KcmError) return { ok: false, error: dryRun };
  const request = { jobType, sentJobType: fields.job_type, envelope, paras: paras.paras, ...(dryRun ? { dryRun } : {}) } as AnyValidRequest;
  return { ok: true, request };
}

/** The dry_run para of an async job ("0" or "1"; absent = no); sync jobs change nothing anyway and ignore it. */
function dryRunOf(jobType: JobType, paras: Record<string, unknown>): boolean | KcmError {
  if (JOB_MODES[jobType] !== 'async' || !Object.hasOwn(paras, 'dry_run')) return false;
  const value = paras.dry_run;
  if (value === '1' || value === 1) return true;
  if (value === '0' || value === 0) return false;
  return KcmError.of('INVALID_PARAS', `paras.dry_run: must be "0" or "1", got ${JSON.stringify(value)?.slice(0, 40)}`, { field: 'paras.dry_run' });
}

/**
 * Validates and normalises one job type's paras: numbers parsed, flags as booleans,
 * defaults filled, unknown paras dropped (accepted for forward compatibility; see
 * `unknownParas` to warn about them).
 */
export function validateParas<T extends JobType>(jobType: T, paras: unknown): { ok: true; paras: ParasOf<T> } | { ok: false; error: KcmError } {
  if (!isPlainObject(paras)) {
    return { ok: false, error: KcmError.of('INVALID_PARAS', `paras: must be an object, got ${paras === null ? 'null' : Array.isArray(paras) ? 'an array' : `a ${typeof paras}`}`, { field: 'paras' }) };
  }
  const schema = PARAS_SCHEMAS[jobType] as z.ZodType;
  const parsed = safeParseWire(schema, paras);
  if (!parsed.success) {
    const order = Object.keys(objectShapeOf(schema) ?? {});
    const { message, field } = formatIssues('paras', parsed.error.issues, order);
    return { ok: false, error: KcmError.of('INVALID_PARAS', message, { field }) };
  }
  return { ok: true, paras: parsed.data as ParasOf<T> };
}

/** Top-level paras the job type does not define: ignored by validation, worth a warning in a client. */
export function unknownParas(jobType: JobType, paras: Record<string, unknown>): string[] {
  const known = objectShapeOf(PARAS_SCHEMAS[jobType]) ?? {};
  return Object.keys(paras).filter((key) => !Object.hasOwn(known, key));
}
