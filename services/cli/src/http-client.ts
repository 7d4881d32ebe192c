// POST an envelope to a manager's Emit endpoint and read the reply envelope back. Any reply
// that carries the envelope is returned whatever its HTTP status (the envelope says what
// happened); anything else is a TransportError.

import { randomUUID } from 'node:crypto';
import type { ReplyEnvelope, RequestEnvelope } from '@kcm/protocol';

/** `make run`'s three managers: a command goes to the next when one is down or restarting (rolling upgrades). */
export const DEFAULT_URL = 'http://127.0.1.1:58000,http://127.0.1.2:58000,http://127.0.1.3:58000';
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
  fetch?: typeof fetch;
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
  const doFetch = options.fetch ?? fetch;
  const listed = managerUrls(options.url);
  const urls = listed.length > 0 ? listed : [options.url];
  let first = 0;
  /** One POST to one manager. */
  const emitTo = async (url: string, body: RequestEnvelope): Promise<{ httpStatus: number; reply: ReplyEnvelope }> => {
    const endpoint = `${url}${EMIT_PATH}`;
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': `kcm-cli-${randomUUID()}` };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let response: Response;
    try {
      response = await doFetch(endpoint, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause;
      const why = cause?.code ?? (err as Error).message;
      throw new TransportError(`cannot reach the manager at ${url} (${why}); check --url or KCM_URL`, { cause: err });
    }
    const text = await response.text();
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
