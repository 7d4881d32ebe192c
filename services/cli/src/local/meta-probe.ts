// Asking each manager get_meta_mode: while the group elects a leader members answer
// NO_LEADER (HTTP 503, with an envelope); once one is elected every member answers
// error_code "0" with the group's members.

import { PROTOCOL_VERSION, type ReplyEnvelope, type RequestEnvelope } from '@kcm/protocol';
import { createEmitClient } from '../http-client';

export interface MetaAnswer {
  url: string;
  /** ok: answered error_code "0"; error: answered an error envelope; unreachable: no envelope. */
  state: 'ok' | 'error' | 'unreachable';
  mode?: string;
  members?: string[];
  learners?: string[];
  /** Present when the manager reports which member leads. */
  leader?: string;
  /** The error envelope's info, or why the manager could not be reached. */
  problem?: string;
}

export function metaModeEnvelope(now: number): RequestEnvelope {
  return { version: PROTOCOL_VERSION, job_id: '', job_type: 'get_meta_mode', timestamp: String(Math.floor(now / 1000)), user_name: 'local', paras: {} };
}

const strings = (value: unknown): string[] | undefined =>
  Array.isArray(value) && value.every((v) => typeof v === 'string') ? (value as string[]) : undefined;

export function metaAnswerOf(url: string, reply: ReplyEnvelope): MetaAnswer {
  if (reply.error_code !== '0') return { url, state: 'error', problem: `${reply.error_code}: ${reply.error_info}` };
  const attachment = (reply.attachment ?? {}) as Record<string, unknown>;
  return {
    url,
    state: 'ok',
    mode: typeof attachment.mode === 'string' ? attachment.mode : undefined,
    members: strings(attachment.members),
    learners: strings(attachment.learners),
    leader: typeof attachment.leader === 'string' && attachment.leader !== '' ? attachment.leader : undefined,
  };
}

export interface AskOptions {
  fetch?: typeof fetch;
  timeoutMs?: number;
  now?: () => number;
  /** The bearer token to send (the deployment's admin token). */
  token?: string;
  /** PEM of the CA of the managers' HTTPS certificates (kcm deploy's). */
  ca?: string | Buffer;
}

export async function askMetaMode(url: string, options: AskOptions = {}): Promise<MetaAnswer> {
  const client = createEmitClient({ url, fetch: options.fetch, ca: options.ca, timeoutMs: options.timeoutMs ?? 3_000, token: options.token });
  try {
    const { reply } = await client.emit(metaModeEnvelope((options.now ?? Date.now)()));
    return metaAnswerOf(url, reply);
  } catch (err) {
    // The fetch failure's own code (ECONNREFUSED while a member is still loading) says enough.
    // (node:http(s) puts it on the TransportError's cause, fetch one level deeper.)
    const cause = (err as { cause?: { code?: string; cause?: { code?: string } } }).cause;
    const code = cause?.code ?? cause?.cause?.code;
    return { url, state: 'unreachable', problem: code ?? (err as Error).message };
  }
}

export async function askAll(urls: readonly string[], options: AskOptions = {}): Promise<MetaAnswer[]> {
  return Promise.all(urls.map((url) => askMetaMode(url, options)));
}

export interface LeaderWait {
  urls: readonly string[];
  timeoutMs: number;
  pollMs?: number;
  fetch?: typeof fetch;
  token?: string;
  ca?: string | Buffer;
  sleep?: (ms: number) => Promise<void>;
  /** Checked between polls: a reason to give up early (a manager process exited). */
  abortReason?: () => Promise<string | undefined>;
}

export type LeaderWaitResult =
  | { ok: true; answer: MetaAnswer; elapsedMs: number }
  | { ok: false; reason: string; last: MetaAnswer[] };

/** Polls every manager until one answers get_meta_mode with error_code "0". */
export async function waitForLeader(wait: LeaderWait): Promise<LeaderWaitResult> {
  const sleep = wait.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const started = Date.now();
  let last: MetaAnswer[] = [];
  for (;;) {
    last = await askAll(wait.urls, { fetch: wait.fetch, ca: wait.ca, timeoutMs: 2_000, token: wait.token });
    const answered = last.find((a) => a.state === 'ok');
    if (answered) return { ok: true, answer: answered, elapsedMs: Date.now() - started };
    const abort = await wait.abortReason?.();
    if (abort) return { ok: false, reason: abort, last };
    if (Date.now() - started >= wait.timeoutMs) {
      return { ok: false, reason: `no leader was elected within ${Math.round(wait.timeoutMs / 1000)} s`, last };
    }
    await sleep(wait.pollMs ?? 250);
  }
}
