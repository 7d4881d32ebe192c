// Agent.Watch, the serving side, shared by the agent and the hollow fleet so both beat alike:
// a HealthReply at once and then every interval, until the caller cancels or goes away.

import * as grpc from '@grpc/grpc-js';
import type { HealthReply, WatchRequest } from './contract/agent';

export const WATCH_INTERVAL_DEFAULT_MS = 2000;
const WATCH_INTERVAL_MIN_MS = 100;
const WATCH_INTERVAL_MAX_MS = 60_000;

/** The beat interval a Watch request asks for, within bounds (a caller cannot make an agent spin). */
export function watchIntervalOf(req: Partial<WatchRequest>): number {
  const asked = Number(req.interval_ms) || WATCH_INTERVAL_DEFAULT_MS;
  return Math.min(WATCH_INTERVAL_MAX_MS, Math.max(WATCH_INTERVAL_MIN_MS, asked));
}

/**
 * Serves one Watch call. `beat` gives each reply; undefined skips that beat (a simulated hung
 * host), and a thrown error ends the stream with it as the status (`code` on the error, else
 * UNAVAILABLE). A caller that does not read is not buffered for: beats are skipped until the
 * stream drains.
 */
export function serveHealthBeats(call: grpc.ServerWritableStream<WatchRequest, HealthReply>, beat: () => HealthReply | undefined): void {
  let blocked = false;
  let timer: NodeJS.Timeout | undefined;
  const stop = () => clearInterval(timer);
  const send = () => {
    if (blocked) return;
    let reply: HealthReply | undefined;
    try {
      reply = beat();
    } catch (err) {
      stop();
      const code = (err as { code?: unknown }).code;
      call.emit('error', { code: typeof code === 'number' ? code : grpc.status.UNAVAILABLE, details: err instanceof Error ? err.message : String(err) });
      return;
    }
    if (reply) blocked = !call.write(reply);
  };
  call.on('drain', () => {
    blocked = false;
  });
  call.on('cancelled', stop);
  call.on('close', stop);
  call.on('error', stop);
  timer = setInterval(send, watchIntervalOf(call.request));
  send();
}
