/**
 * The error catalog: every error kcm can report on the wire, defined once.
 *
 * Contract:
 * - `code` is what goes into the reply's `error_code` (as a decimal string); `0` is success.
 *   Codes are grouped: 1xxx the request is wrong, 2xxx the job failed while running,
 *   3xxx authentication, 4xxx the manager group cannot take the request now, 5xxx a kcm bug.
 * - `httpStatus` is the HTTP status of a reply that carries this error *as the answer to
 *   the Emit call itself* (200 for every well-formed protocol reply, as the spec's clients expect;
 *   400 for a body that is not a JSON envelope, 401/403 for auth, 503 without a leader).
 *   A job that fails later is reported by get_status, which itself answers 200.
 * - Codes and names are append-only: clients match on them. docs/errors.md is generated
 *   from this table (libs/protocol/scripts/error-table.ts) and a test keeps them in step.
 */
export const ERROR_CATALOG = [
  { code: 0, name: 'OK', httpStatus: 200, meaning: 'Success. For an async job: accepted; the final result comes from get_status.' },
  { code: 1000, name: 'BAD_JSON', httpStatus: 400, meaning: 'The body is not valid JSON.' },
  { code: 1001, name: 'BAD_ENVELOPE', httpStatus: 400, meaning: 'The body is JSON but not a request envelope: not an object, or version, job_type, timestamp, job_id, user_name, request_id or paras missing or malformed. The message names the field.' },
  { code: 1002, name: 'BODY_TOO_LARGE', httpStatus: 413, meaning: 'The body exceeds the configured size limit.' },
  { code: 1003, name: 'UNKNOWN_JOB_TYPE', httpStatus: 200, meaning: 'job_type is not a job kcm knows (canonical names and accepted aliases are listed in the README).' },
  { code: 1004, name: 'INVALID_PARAS', httpStatus: 200, meaning: 'A field of paras is missing, of the wrong type, out of range, malformed, or inconsistent with another field. The message names each field, the rule and the value sent.' },
  { code: 1005, name: 'NOT_FOUND', httpStatus: 200, meaning: 'A referenced object (job, machine, cluster, shard, node, backup) does not exist.' },
  { code: 1006, name: 'CONFLICT', httpStatus: 200, meaning: 'The request contradicts current state: already exists, still in use, wrong state for this job, or an idempotency key reused with a different body.' },
  { code: 1007, name: 'NO_RESOURCES', httpStatus: 200, meaning: 'Not enough running machines, free ports, memory, cores or disk to place what was asked.' },
  { code: 1008, name: 'UNSUPPORTED', httpStatus: 200, meaning: 'A valid request that this kcm does not implement (e.g. ha_mode mgr, install_proxysql 1).' },
  { code: 1009, name: 'HEADERS_TOO_LARGE', httpStatus: 431, meaning: 'The HTTP request headers exceed the server\'s header size limit; the request was not read.' },
  { code: 2000, name: 'AGENT_UNREACHABLE', httpStatus: 200, meaning: 'The agent of a machine did not answer at <hostaddr>:<agent_port>.' },
  { code: 2001, name: 'INSTANCE_FAILED', httpStatus: 200, meaning: 'A database instance or tool (mariadbd, postgres, mariabackup, ...) failed; the message carries its error.' },
  { code: 2002, name: 'TIMEOUT', httpStatus: 200, meaning: 'A step did not finish within its time limit.' },
  { code: 2003, name: 'DATA_CHECK_FAILED', httpStatus: 200, meaning: 'Source and target data disagree (row count, checksum, structure or constraint check) during a data move or restore.' },
  { code: 2004, name: 'CANCELED', httpStatus: 200, meaning: 'The job was canceled before it finished.' },
  { code: 3000, name: 'UNAUTHENTICATED', httpStatus: 401, meaning: 'No valid bearer token was presented and the manager requires one.' },
  { code: 3001, name: 'FORBIDDEN', httpStatus: 403, meaning: 'The token is valid but not allowed to run this job.' },
  { code: 4000, name: 'NO_LEADER', httpStatus: 503, meaning: 'The manager group has no known leader right now (election in progress or quorum lost); retry later.' },
  { code: 4001, name: 'OVERLOADED', httpStatus: 429, meaning: 'Too many requests or jobs in flight; retry later.' },
  { code: 5000, name: 'INTERNAL', httpStatus: 500, meaning: 'An unexpected error inside kcm (a bug); the message says where.' },
] as const;

export type ErrorName = (typeof ERROR_CATALOG)[number]['name'];
export type ErrorEntry = (typeof ERROR_CATALOG)[number];

const ENTRY_BY_NAME = new Map<string, ErrorEntry>(ERROR_CATALOG.map((e) => [e.name, e]));
const ENTRY_BY_CODE = new Map<number, ErrorEntry>(ERROR_CATALOG.map((e) => [e.code, e]));

export function errorEntry(name: ErrorName): ErrorEntry {
  const entry = ENTRY_BY_NAME.get(name);
  if (!entry) throw new Error(`error name ${name} is not in ERROR_CATALOG`);
  return entry;
}

/** The catalog entry for a wire code, e.g. to name the error a get_status reply carries. */
export function errorEntryByCode(code: number): ErrorEntry | undefined {
  return ENTRY_BY_CODE.get(code);
}

/**
 * An error that maps onto the wire: code and HTTP status come from the catalog by name.
 * `field` is the first offending field path (e.g. `paras.nodes`, `job_type`) when the
 * error is about the request.
 */
export class KcmError extends Error {
  override readonly name = 'KcmError';
  readonly code: number;
  readonly errorName: ErrorName;
  readonly httpStatus: number;
  readonly field?: string;

  constructor(errorName: ErrorName, message: string, opts: { field?: string; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    const entry = errorEntry(errorName);
    this.errorName = errorName;
    this.code = entry.code;
    this.httpStatus = entry.httpStatus;
    if (opts.field !== undefined) this.field = opts.field;
  }

  static of(name: ErrorName, message: string, opts?: { field?: string; cause?: unknown }): KcmError {
    return new KcmError(name, message, opts);
  }

  static is(value: unknown, name?: ErrorName): value is KcmError {
    return value instanceof KcmError && (name === undefined || value.errorName === name);
  }
}
