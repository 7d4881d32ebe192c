// A body announced larger than the limit is refused BODY_TOO_LARGE (413). Answering at once
// and closing, as fastify does, races the client still sending it: the close resets the
// connection and the client may never read the reply (the fuzzer saw `write EPIPE` for 2
// of ~1,000 giant bodies). Up to DRAIN_LIMIT_BYTES the body is read and dropped first, so
// the client finishes sending and then reads the envelope; beyond it the connection is
// closed as before rather than read without bound.

import type { IncomingMessage } from 'node:http';

export const DRAIN_LIMIT_BYTES = 16 * 1024 * 1024;

/** The announced Content-Length when it exceeds `limit` (and may be drained), else undefined. */
export function oversizeToDrain(request: IncomingMessage, limit: number): number | undefined {
  const length = Number(request.headers['content-length']);
  return Number.isFinite(length) && length > limit && length <= DRAIN_LIMIT_BYTES ? length : undefined;
}

/** Reads and drops the rest of `request`, then calls `then` (also when the client goes away). */
export function drainThen(request: IncomingMessage, then: () => void): void {
  let called = false;
  const once = () => {
    if (!called) {
      called = true;
      then();
    }
  };
  request.on('end', once);
  request.on('error', once);
  request.on('close', once);
  request.resume();
}
