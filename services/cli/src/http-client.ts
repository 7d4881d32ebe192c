// POST an envelope to a manager's Emit endpoint and read the reply envelope back. Any reply
// that carries the envelope is returned whatever its HTTP status (the envelope says what
// happened); anything else is a TransportError.

import { randomUUID } from 'node:crypto';
import type { ReplyEnvelope, RequestEnvelope } from '@kcm/protocol';

export const DEFAULT_URL = 'http://127.0.1.1:58000';
export const EMIT_PATH = '/HttpService/Emit';

export class TransportError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TransportError';
  }
}

export interface EmitClientOptions {
  /** Base URL of any manager, e.g. http://127.0.1.1:58000 (followers forward to the leader). */
  url: string;
  token?: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export interface EmitClient {
  readonly url: string;
  emit(body: RequestEnvelope): Promise<{ httpStatus: number; reply: ReplyEnvelope }>;
}

function isReplyEnvelope(value: unknown): value is ReplyEnvelope {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.error_code === 'string' && typeof v.status === 'string' && typeof v.error_info === 'string';
}

export function createEmitClient(options: EmitClientOptions): EmitClient {
  const doFetch = options.fetch ?? fetch;
  const endpoint = `${options.url.replace(/\/+$/, '')}${EMIT_PATH}`;
  return {
    url: options.url,
    async emit(body) {
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
        throw new TransportError(`cannot reach the manager at ${options.url} (${why}); check --url or KCM_URL`, { cause: err });
      }
      const text = await response.text();
      let reply: unknown;
      try {
        reply = JSON.parse(text);
      } catch {
        reply = undefined;
      }
      if (!isReplyEnvelope(reply)) {
        throw new TransportError(`the manager at ${options.url} answered HTTP ${response.status} without a reply envelope: ${text.slice(0, 200)}`);
      }
      return { httpStatus: response.status, reply };
    },
  };
}
