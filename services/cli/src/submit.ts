// Sending an async job. Every submission carries a request_id (the user's --request-id, or
// one made here), so the CLI can send it again when the manager could not say whether the
// job was created (no leader answered, the commit timed out, the connection broke): the
// manager returns the job already recorded for that request_id and never makes a second
// one. When the last attempt fails too, the user is told the key to retry with.

import { randomUUID } from 'node:crypto';
import { errorEntry, type ReplyEnvelope, type RequestEnvelope } from '@kcm/protocol';
import { TransportError, type EmitClient } from './http-client';
import { defaultSleep, type CliIo } from './io';

/** Answers after which the job may or may not exist, or nothing was done yet: safe to send again with the same key. */
const SEND_AGAIN_CODES = new Set([String(errorEntry('NO_LEADER').code), String(errorEntry('OVERLOADED').code), String(errorEntry('TIMEOUT').code)]);

/** Pauses before each further attempt. */
export const SUBMIT_RETRY_PAUSES_MS = [250, 500, 1_000, 2_000];

export function newRequestId(): string {
  return `kcm-cli-${randomUUID()}`;
}

/**
 * Sends `envelope` (which has a request_id) until the manager answers something other
 * than a retryable failure, or the pauses run out. Throws the last TransportError.
 */
export async function submitWithRetries(client: EmitClient, envelope: RequestEnvelope, io: CliIo): Promise<ReplyEnvelope> {
  const sleep = io.sleep ?? defaultSleep;
  const key = envelope.request_id ?? '';
  for (let attempt = 0; ; attempt++) {
    let failure: string;
    let last: ReplyEnvelope | TransportError;
    try {
      const { reply } = await client.emit(envelope);
      if (reply.status !== 'failed' || !SEND_AGAIN_CODES.has(reply.error_code)) return reply;
      failure = reply.error_info;
      last = reply;
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
      failure = err.message;
      last = err;
    }
    if (attempt >= SUBMIT_RETRY_PAUSES_MS.length) {
      io.stderr.write(
        `kcm: the job may or may not have been created; run the command again with --request-id ${key} ` +
          `to find out: the manager answers with the job of that request_id and never creates a second one\n`,
      );
      if (last instanceof TransportError) throw last;
      return last;
    }
    io.stderr.write(`kcm: ${failure}; sending again with the same request_id ${key}\n`);
    // With several --url managers, the next attempt asks another one first (this one may be restarting).
    client.preferNext?.();
    await sleep(SUBMIT_RETRY_PAUSES_MS[attempt]);
  }
}
