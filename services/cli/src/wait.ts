// Polling get_status until a job is done or failed. A manager failover while waiting is
// normal in a Raft group: unreachable managers and NO_LEADER/OVERLOADED answers are retried
// until --timeout, with a note, rather than ending the wait.

import { errorEntry, type ReplyEnvelope } from '@kcm/protocol';
import { TransportError, type EmitClient } from './http-client';
import { defaultSleep, type CliIo } from './io';
import type { ProgressView } from './progress';
import { buildEnvelope } from './commands/shared';

const RETRYABLE_CODES = new Set([String(errorEntry('NO_LEADER').code), String(errorEntry('OVERLOADED').code), String(errorEntry('TIMEOUT').code)]);

/**
 * A failed get_status reply is about the job only when it names the job's own type; one
 * that says `get_status` is about the request itself (no leader, a read that timed out),
 * and those are worth retrying.
 */
function isRetryableRequestFailure(reply: ReplyEnvelope): boolean {
  return reply.status === 'failed' && reply.job_type === 'get_status' && RETRYABLE_CODES.has(reply.error_code);
}

export type WaitOutcome = { kind: 'finished'; reply: ReplyEnvelope } | { kind: 'timedOut'; last?: ReplyEnvelope };

export interface WaitOptions {
  intervalMs: number;
  /** 0 waits forever. */
  timeoutMs: number;
  view: ProgressView;
}

export async function waitForJob(client: EmitClient, jobId: string, io: CliIo, options: WaitOptions): Promise<WaitOutcome> {
  const now = io.now ?? Date.now;
  const sleep = io.sleep ?? defaultSleep;
  const deadline = options.timeoutMs > 0 ? now() + options.timeoutMs : Number.POSITIVE_INFINITY;
  let last: ReplyEnvelope | undefined;
  let lastNote = '';
  const note = (text: string) => {
    if (text !== lastNote) options.view.note(text);
    lastNote = text;
  };
  for (;;) {
    try {
      const { reply } = await client.emit(buildEnvelope('get_status', {}, io, { jobId }));
      if (isRetryableRequestFailure(reply)) {
        note(`kcm: the manager cannot answer yet (${reply.error_info}); retrying`);
      } else {
        lastNote = '';
        last = reply;
        if (reply.status === 'done' || reply.status === 'failed') {
          options.view.finish(reply);
          return { kind: 'finished', reply };
        }
        options.view.update(reply);
      }
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
      note(`kcm: ${err.message}; retrying`);
    }
    if (now() + options.intervalMs > deadline) return { kind: 'timedOut', last };
    await sleep(options.intervalMs);
  }
}
