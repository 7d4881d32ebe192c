// What every subcommand shares: flag parsing with usage errors, the connection flags
// (--url/KCM_URL, --ca, --context/KCM_CONTEXT, --token/KCM_TOKEN), building and locally
// validating an envelope, and printing a reply.

import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { PROTOCOL_VERSION, errorEntryByCode, errorReply, parseRequest, type ReplyEnvelope, type RequestEnvelope, type AnyValidRequest, type KcmError } from '@kcm/protocol';
import { createEmitClient, DEFAULT_URL, managerUrls, type EmitClient } from '../http-client';
import { EXIT, UsageError, type CliIo } from '../io';
import { renderAttachment } from '../tables';
import { readAdminToken } from '../local/admin-token';
import { readLocalCa } from '../local/topology';
import { localDeploymentDir as localContextDir } from '../local/context';
import { ContextFileError, contextFilePath, loadContext, type KcmContext } from '../context-file';

type Options = NonNullable<ParseArgsConfig['options']>;

export const CONNECTION_OPTIONS = {
  url: { type: 'string' },
  ca: { type: 'string' },
  context: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies Options;

export const WAIT_OPTIONS = {
  wait: { type: 'boolean', short: 'w' },
  interval: { type: 'string' },
  timeout: { type: 'string' },
} as const satisfies Options;

/** node:util parseArgs, with its errors turned into usage errors that point at the subcommand's help. */
export function parseFlags<T extends Options>(args: string[], options: T, command: string) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/\. To specify a positional argument.*$/s, ''), `kcm ${command} --help`);
  }
}

export interface Connection {
  client: EmitClient;
  json: boolean;
}

/**
 * Where to send and with what: --url (or KCM_URL) with --ca; else the context named by
 * --context (or KCM_CONTEXT); else the context file's current context; else make run's
 * managers (DEFAULT_URL). The token: --token, KCM_TOKEN, the context's token_file, else the
 * local deployment's admin token.
 */
export function connect(values: { url?: string; ca?: string; context?: string; token?: string; json?: boolean }, io: CliIo, command: string): Connection {
  const explicitUrl = values.url ?? (io.env.KCM_URL || undefined);
  const contextName = values.context ?? (io.env.KCM_CONTEXT || undefined);
  const contextFile = contextFilePath(io.env);
  // A named context is always read (a wrong name is an error); the current one only when no URL is given.
  const context = contextName !== undefined || explicitUrl === undefined ? loadContext(contextName, contextFile) : undefined;
  const url = explicitUrl ?? context?.endpoints.join(',') ?? DEFAULT_URL;
  // One manager's URL, or several comma-separated (each is tried in turn: http-client.ts).
  const urls = managerUrls(url);
  for (const one of urls.length > 0 ? urls : [url]) {
    try {
      const parsed = new URL(one);
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('not http');
    } catch {
      throw new UsageError(`--url must be an http:// or https:// URL (or several, comma-separated), got "${one}"`, `kcm ${command} --help`);
    }
  }
  // --ca, else the context's, else, for loopback managers only, the local deployment's CA (kcm local up's
  // managers serve HTTPS with it), as for the token below. Only loopback: a CA given to node:https
  // replaces the system's, so a public manager's certificate would stop verifying.
  const loopback = (urls.length > 0 ? urls : [url]).every((u) => /^127\.|^localhost$|^\[::1\]$/.test(new URL(u).hostname));
  const localCa = loopback ? readLocalCa(io.env.KCM_LOCAL_DIR || localContextDir()) : undefined;
  const ca = values.ca !== undefined ? readCaFlag(values.ca, command) : context?.caFile !== undefined ? readFileOfContext(context, 'ca', contextFile) : localCa;
  // --token, then KCM_TOKEN, then the context's token file, then the local deployment's admin token (kcm local up made it).
  const contextToken = context?.tokenFile !== undefined ? readFileOfContext(context, 'token_file', contextFile).trim() : undefined;
  const token = values.token ?? (io.env.KCM_TOKEN || undefined) ?? (contextToken || undefined) ?? readAdminToken(io.env.KCM_LOCAL_DIR || localContextDir());
  return { client: createEmitClient({ url, token, ca, fetch: io.fetch }), json: values.json === true };
}

const PEM_CERTIFICATE = '-----BEGIN CERTIFICATE-----';

function readCaFlag(file: string, command: string): string {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--ca ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`, `kcm ${command} --help`);
  }
  if (!pem.includes(PEM_CERTIFICATE)) throw new UsageError(`--ca ${file}: no PEM certificate in it`, `kcm ${command} --help`);
  return pem;
}

/** A file a context names (its CA bundle, its token): a failure names the context file and the field. */
function readFileOfContext(context: KcmContext, field: 'ca' | 'token_file', contextFile: string): string {
  const file = field === 'ca' ? context.caFile : context.tokenFile;
  let text: string;
  try {
    text = readFileSync(file ?? '', 'utf8');
  } catch (err) {
    throw new ContextFileError(`${contextFile}: contexts.${context.name}.${field}: ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  if (field === 'ca' && !text.includes(PEM_CERTIFICATE)) throw new ContextFileError(`${contextFile}: contexts.${context.name}.ca: no PEM certificate in ${file}`);
  return text;
}

/** Seconds from a flag as milliseconds; `fallback` when the flag is absent. */
export function secondsFlag(value: string | undefined, flag: string, fallbackMs: number, command: string): number {
  if (value === undefined) return fallbackMs;
  const seconds = Number(value);
  if (value.trim() === '' || !Number.isFinite(seconds) || seconds < 0) {
    throw new UsageError(`--${flag} must be a number of seconds >= 0, got "${value}"`, `kcm ${command} --help`);
  }
  return seconds * 1000;
}

/** A fresh request envelope: version 1.0, timestamp now, user_name from $USER. */
export function buildEnvelope(jobType: string, paras: Record<string, unknown>, io: CliIo, extra: { jobId?: string; requestId?: string } = {}): RequestEnvelope {
  const envelope: RequestEnvelope = {
    version: PROTOCOL_VERSION,
    job_id: extra.jobId ?? '',
    job_type: jobType,
    timestamp: String(Math.floor((io.now ?? Date.now)() / 1000)),
    user_name: io.env.USER ?? io.env.LOGNAME ?? '',
    paras,
  };
  if (extra.requestId !== undefined) envelope.request_id = extra.requestId;
  return envelope;
}

/** "1004 INVALID_PARAS" for a reply's error_code. */
export function errorLabel(errorCode: string): string {
  const entry = errorEntryByCode(Number(errorCode));
  return entry ? `${errorCode} ${entry.name}` : errorCode;
}

export function writeJson(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/**
 * The one validation path, run before anything is sent: the same parseRequest the gateway
 * runs, so a mistake is reported with exactly the message the manager would give.
 * Returns the valid request, or prints the failure and returns undefined.
 */
export function validateLocally(envelope: RequestEnvelope, io: CliIo, json: boolean): AnyValidRequest | undefined {
  const parsed = parseRequest(envelope);
  if (parsed.ok) return parsed.request;
  reportLocalFailure(parsed.error, envelope, io, json);
  return undefined;
}

function reportLocalFailure(error: KcmError, envelope: RequestEnvelope, io: CliIo, json: boolean): void {
  if (json) {
    writeJson(io, errorReply(error, envelope.job_type, envelope.job_id ?? ''));
    return;
  }
  io.stderr.write(`kcm: not sent, the request is invalid: error ${error.code} ${error.errorName}: ${error.message}\n`);
}

export function printFailure(reply: ReplyEnvelope, io: CliIo): void {
  const job = reply.job_id ? `job ${reply.job_id}${reply.job_type ? ` ${reply.job_type}` : ''} failed: ` : '';
  io.stderr.write(`kcm: ${job}error ${errorLabel(reply.error_code)}: ${reply.error_info}\n`);
}

/** A sync query's answer or a finished job's result, as readable text. */
export function printResult(reply: ReplyEnvelope, io: CliIo): void {
  io.stdout.write(`${renderAttachment(reply.attachment)}\n`);
}

/**
 * How every reply ends: with --json the envelope itself; a failure on stderr (exit 1);
 * otherwise `printSuccess` says what happened (exit 0).
 */
export function reportReply(reply: ReplyEnvelope, io: CliIo, json: boolean, printSuccess: () => void): number {
  if (json) {
    writeJson(io, reply);
    return reply.status === 'failed' ? EXIT.failed : EXIT.ok;
  }
  if (reply.status === 'failed') {
    printFailure(reply, io);
    return EXIT.failed;
  }
  printSuccess();
  return EXIT.ok;
}
