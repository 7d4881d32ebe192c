// What an S3 call failed with, for messages and for the retry decision: the HTTP status and
// S3 error code when the server answered, else the socket error (a cut connection).

import type { AgentFailureKind } from '@kcm/agent-api';

interface SdkError {
  name?: string;
  message?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number };
}

export function describeS3Error(err: unknown): { kind: AgentFailureKind; text: string; retryable: boolean } {
  const e = (err ?? {}) as SdkError;
  const status = e.$metadata?.httpStatusCode;
  const text = `${status ? `HTTP ${status} ` : ''}${e.name ?? 'Error'}${e.code && e.code !== e.name ? ` (${e.code})` : ''}: ${e.message ?? String(err)}`;
  if (status === undefined || status >= 500 || status === 408 || status === 429) return { kind: 'unavailable', text, retryable: true };
  if (status === 404) return { kind: 'not_found', text, retryable: false };
  return { kind: 'failed_precondition', text, retryable: false };
}
