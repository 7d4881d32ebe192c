// kcm emit <job_type> (--paras '<json>' | --file f.json) [--wait]: send any job.
// The request is validated with the gateway's own parseRequest before it is sent.

import { readFileSync } from 'node:fs';
import { JOB_MODES, canonicalJobType, unknownParas, type ReplyEnvelope } from '@kcm/protocol';
import { EXIT, UsageError, type CliIo } from '../io';
import { emitHelp, jobHelp } from '../help';
import { followJob } from './status';
import { newRequestId, submitWithRetries } from '../submit';
import {
  buildEnvelope,
  connect,
  CONNECTION_OPTIONS,
  parseFlags,
  printResult,
  reportReply,
  validateLocally,
  WAIT_OPTIONS,
  type Connection,
} from './shared';

const EMIT_OPTIONS = {
  ...CONNECTION_OPTIONS,
  ...WAIT_OPTIONS,
  paras: { type: 'string', short: 'p' },
  file: { type: 'string', short: 'f' },
  'job-id': { type: 'string' },
  'request-id': { type: 'string' },
  'dry-run': { type: 'boolean' },
} as const;

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function parseJsonFlag(text: string, what: string, command: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${what} is not valid JSON: ${(err as Error).message}`, `kcm ${command} --help`);
  }
}

/** --paras text as an object (it must be a JSON object). */
export function parasFlag(text: string | undefined, command: string): Record<string, unknown> {
  if (text === undefined) return {};
  const value = parseJsonFlag(text, '--paras', command);
  if (!isRecord(value)) throw new UsageError(`--paras must be a JSON object, e.g. '{"cluster_id":"1"}'`, `kcm ${command} --help`);
  return value;
}

/**
 * A --file holds either a whole request envelope (like test/fixtures/emit/*.json: its
 * job_type, job_id and paras are used, version/timestamp/user_name are made fresh) or
 * just the paras object.
 */
function readRequestFile(path: string): { jobType?: string; jobId?: string; paras: Record<string, unknown> } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read --file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, 'kcm emit --help');
  }
  const value = parseJsonFlag(text, `--file ${path}`, 'emit');
  if (!isRecord(value)) throw new UsageError(`--file ${path} must hold a JSON object (an envelope or paras)`, 'kcm emit --help');
  if (typeof value.job_type !== 'string') return { paras: value };
  return {
    jobType: value.job_type,
    jobId: typeof value.job_id === 'string' && value.job_id !== '' ? value.job_id : undefined,
    paras: isRecord(value.paras) ? value.paras : {},
  };
}

/** Validate, send, print the reply; follow an accepted async job when asked. Shared by emit and get. */
export async function sendJob(
  connection: Connection,
  io: CliIo,
  request: { jobType: string; paras: Record<string, unknown>; jobId?: string; requestId?: string },
  wait: { wait?: boolean; interval?: string; timeout?: string } = {},
): Promise<number> {
  // An async job always carries a request_id, so that sending it again never makes a second job.
  const canonical = canonicalJobType(request.jobType);
  const isSubmission = canonical !== undefined && JOB_MODES[canonical] === 'async';
  const requestId = request.requestId ?? (isSubmission ? newRequestId() : undefined);
  const envelope = buildEnvelope(request.jobType, request.paras, io, { jobId: request.jobId, requestId });
  const valid = validateLocally(envelope, io, connection.json);
  if (!valid) return EXIT.failed;
  for (const name of unknownParas(valid.jobType, request.paras).filter((n) => n !== 'dry_run')) {
    io.stderr.write(`kcm: warning: paras.${name} is not a parameter of ${valid.jobType}; the manager ignores it\n`);
  }
  const reply = isSubmission ? await submitWithRetries(connection.client, envelope, io) : (await connection.client.emit(envelope)).reply;
  if (reply.status === 'accept' && wait.wait) {
    if (!connection.json) io.stdout.write(`accepted: ${reply.job_type} job ${reply.job_id}\n`);
    return followJob(connection, reply.job_id, io, wait, 'emit');
  }
  return printReply(reply, io, connection.json);
}

function printReply(reply: ReplyEnvelope, io: CliIo, json: boolean): number {
  return reportReply(reply, io, json, () => {
    if (reply.status === 'accept') io.stdout.write(`accepted: ${reply.job_type} job ${reply.job_id}\nfollow it with: kcm status ${reply.job_id} --wait\n`);
    else printResult(reply, io);
  });
}

export async function emitCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(args, EMIT_OPTIONS, 'emit');
  if (positionals.length > 1) throw new UsageError(`emit takes one job type, got ${positionals.join(' ')} (quote --paras JSON)`, 'kcm emit --help');
  if (values.help) {
    io.stdout.write(positionals[0] ? jobHelp(positionals[0]) : emitHelp());
    return EXIT.ok;
  }
  if (values.paras !== undefined && values.file !== undefined) throw new UsageError('give --paras or --file, not both', 'kcm emit --help');
  const fromFile = values.file !== undefined ? readRequestFile(values.file) : undefined;
  const jobType = positionals[0] ?? fromFile?.jobType;
  if (jobType === undefined) throw new UsageError('emit needs a job type (or a --file holding an envelope)', 'kcm emit --help');
  if (fromFile?.jobType !== undefined && positionals[0] !== undefined && canonicalJobType(positionals[0]) !== canonicalJobType(fromFile.jobType)) {
    throw new UsageError(`the job type "${positionals[0]}" differs from the file's job_type "${fromFile.jobType}"`, 'kcm emit --help');
  }
  const connection = connect(values, io, 'emit');
  const canonical = canonicalJobType(jobType);
  // --dry-run: the managers validate the job against the live state and answer its plan; nothing is committed.
  const paras = { ...(fromFile?.paras ?? parasFlag(values.paras, 'emit')), ...(values['dry-run'] ? { dry_run: '1' } : {}) };
  if (values.wait && canonical !== undefined && JOB_MODES[canonical] === 'sync' && canonical !== 'get_status') {
    io.stderr.write(`kcm: note: ${jobType} is answered directly; --wait has nothing to wait for\n`);
  }
  const jobId = values['job-id'] ?? fromFile?.jobId;
  if (canonical === 'get_status' && values.wait && jobId) return followJob(connection, jobId, io, values, 'emit');
  return sendJob(connection, io, { jobType, paras, jobId, requestId: values['request-id'] }, values);
}
