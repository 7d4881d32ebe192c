// POST an envelope to a manager's Emit endpoint and read the reply envelope back. Any reply
// that carries the envelope is returned whatever its HTTP status (the envelope says what
// happened); anything else is a TransportError.

import { randomUUID } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { ReplyEnvelope, RequestEnvelope } from '@kcm/protocol';

/**
 * `make run`'s three managers: a command goes to the next when one is down or restarting
 * (rolling upgrades). HTTPS, with the local deployment's CA (commands/shared.ts connect).
 */
export const DEFAULT_URL = 'https://127.0.1.1:58000,https://127.0.1.2:58000,https://127.0.1.3:58000';
export const EMIT_PATH = '/HttpService/Emit';

export class TransportError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TransportError';
  }
}

export interface EmitClientOptions {
  /**
   * Base URL of any manager, e.g. http://127.0.1.1:58000 (followers forward to the leader);
   * or several, comma-separated: a manager that cannot be reached (restarting, in a rolling
   * upgrade) is passed over for the next (docs/upgrade.md).
   */
  url: string;
  token?: string;
  timeoutMs?: number;
  /**
   * PEM of the CA(s) that sign the managers' HTTPS certificates (--ca, a context's `ca`).
   * Absent: the system's trusted CAs.
   */
  ca?: string | Buffer;
  /** A fetch to send with instead of node:http(s) (tests). */
  fetch?: typeof fetch;
}

/** One POST's answer: status and body text. */
interface PostAnswer {
  status: number;
  text: string;
}

type Post = (endpoint: string, headers: Record<string, string>, body: string, timeoutMs: number) => Promise<PostAnswer>;

function fetchPost(doFetch: typeof fetch): Post {
  return async (endpoint, headers, body, timeoutMs) => {
    const response = await doFetch(endpoint, { method: 'POST', headers, body, signal: AbortSignal.timeout(timeoutMs) });
    return { status: response.status, text: await response.text() };
  };
}

/**
 * POSTs with node:http / node:https. Not the global fetch: it cannot be given a CA (only an
 * undici dispatcher can, and undici is not a run-time dependency of kcm), while node:https
 * takes the CA bundle as an option. The agents keep connections alive across a --wait's polls.
 */
function nodePost(ca: string | Buffer | undefined): Post {
  const httpAgent = new HttpAgent({ keepAlive: true });
  const httpsAgent = new HttpsAgent({ keepAlive: true, ...(ca !== undefined ? { ca } : {}) });
  return (endpoint, headers, body, timeoutMs) =>
    new Promise<PostAnswer>((resolve, reject) => {
      const url = new URL(endpoint);
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
      const req = send(url, { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, agent: url.protocol === 'https:' ? httpsAgent : httpAgent, timeout: timeoutMs }, (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (err) => reject(new Error(err.message, { cause: err })));
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'TIMEOUT' })));
      // Failures keep fetch's shape (the system error as the cause), which callers read the code from.
      req.on('error', (err) => reject(new Error(err.message, { cause: err })));
      req.end(body);
    });
}

/** Certificate failures that no other endpoint will fix, said the way an operator can act on. */
const CERTIFICATE_ERRORS = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

function transportCause(err: unknown): string {
  const failure = err as { message?: string; cause?: { code?: string; message?: string } };
  const code = failure.cause?.code;
  if (code && CERTIFICATE_ERRORS.has(code)) return `${code}: the manager's HTTPS certificate is not trusted; give its CA with --ca <file> or the context's "ca"`;
  if (code === 'EPROTO' && /wrong version number|packet length too long/i.test(failure.cause?.message ?? '')) return `${code}: it does not speak HTTPS there; is the URL http://?`;
  return code ?? (err as Error).message;
}

export interface EmitClient {
  readonly url: string;
  emit(body: RequestEnvelope): Promise<{ httpStatus: number; reply: ReplyEnvelope }>;
  /** Sends the next emit to the next manager first (after an answer worth asking another about, e.g. NO_LEADER). */
  preferNext?(): void;
}

/** The managers' base URLs of a `--url` value: one, or several comma-separated. */
export function managerUrls(url: string): string[] {
  return url.split(',').map((u) => u.trim().replace(/\/+$/, '')).filter((u) => u.length > 0);
}

function isReplyEnvelope(value: unknown): value is ReplyEnvelope {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.error_code === 'string' && typeof v.status === 'string' && typeof v.error_info === 'string';
}

export function createEmitClient(options: EmitClientOptions): EmitClient {
  const post = options.fetch ? fetchPost(options.fetch) : nodePost(options.ca);
  const listed = managerUrls(options.url);
  const urls = listed.length > 0 ? listed : [options.url];
  let first = 0;
  /** One POST to one manager. */
  const emitTo = async (url: string, body: RequestEnvelope): Promise<{ httpStatus: number; reply: ReplyEnvelope }> => {
    const endpoint = `${url}${EMIT_PATH}`;
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': `kcm-cli-${randomUUID()}` };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let response: PostAnswer;
    try {
      response = await post(endpoint, headers, JSON.stringify(body), options.timeoutMs ?? 30_000);
    } catch (err) {
      throw new TransportError(`cannot reach the manager at ${url} (${transportCause(err)}); check --url, KCM_URL or the context`, { cause: err });
    }
    const { text } = response;
    let reply: unknown;
    try {
      reply = JSON.parse(text);
    } catch {
      reply = undefined;
    }
    if (!isReplyEnvelope(reply)) {
      throw new TransportError(`the manager at ${url} answered HTTP ${response.status} without a reply envelope: ${text.slice(0, 200)}`);
    }
    return { httpStatus: response.status, reply };
  };
  return {
    url: options.url,
    // Each manager in turn from the preferred one, until one answers; the one that answered
    // stays preferred. A request_id makes sending an async job to a second manager safe.
    async emit(body) {
      let last: unknown;
      for (let i = 0; i < urls.length; i++) {
        const at = (first + i) % urls.length;
        try {
          const answer = await emitTo(urls[at], body);
          first = at;
          return answer;
        } catch (err) {
          if (!(err instanceof TransportError)) throw err;
          last = err;
        }
      }
      throw last;
    },
    preferNext() {
      first = (first + 1) % urls.length;
    },
  };
}
