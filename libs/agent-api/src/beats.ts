// The serving side of the agents' watch streams (Agent.Watch, MariaDbHaAgent.WatchStatus),
// shared by the agent and the hollow fleet so both beat alike: a message at once and then
// every interval, until the caller cancels or goes away.

import * as grpc from '@grpc/grpc-js';

export const WATCH_INTERVAL_DEFAULT_MS = 2000;
const WATCH_INTERVAL_MIN_MS = 100;
const WATCH_INTERVAL_MAX_MS = 60_000;

/** The beat interval a watch request asks for, within bounds (a caller cannot make an agent spin). */
export function watchIntervalOf(req: { interval_ms?: number }): number {
  const asked = Number(req.interval_ms) || WATCH_INTERVAL_DEFAULT_MS;
  return Math.min(WATCH_INTERVAL_MAX_MS, Math.max(WATCH_INTERVAL_MIN_MS, asked));
}

/**
 * Serves one watch call at the interval its request asks for. `beat` gives each message (it
 * may measure: a beat still being measured when the next is due makes that one skipped);
 * undefined skips that beat (a simulated hung host), and a thrown error ends the stream with
 * it as the status (`code` on the error, else UNAVAILABLE). A caller that does not read is not
 * buffered for: beats are skipped until the stream drains.
 */
export function serveBeats<Req extends { interval_ms?: number }, Beat>(call: grpc.ServerWritableStream<Req, Beat>, beat: () => Beat | undefined | Promise<Beat | undefined>): void {
  let blocked = false;
  let measuring = false;
  let over = false;
  let timer: NodeJS.Timeout | undefined;
  const stop = () => {
    over = true;
    clearInterval(timer);
  };
  const send = async () => {
    if (blocked || measuring || over) return;
    measuring = true;
    try {
      const message = await beat();
      if (message !== undefined && !over) blocked = !call.write(message);
    } catch (err) {
      if (over) return;
      stop();
      const code = (err as { code?: unknown }).code;
      call.emit('error', { code: typeof code === 'number' ? code : grpc.status.UNAVAILABLE, details: err instanceof Error ? err.message : String(err) });
    } finally {
      measuring = false;
    }
  };
  call.on('drain', () => {
    blocked = false;
  });
  call.on('cancelled', stop);
  call.on('close', stop);
  call.on('error', stop);
  timer = setInterval(() => void send(), watchIntervalOf(call.request));
  void send();
}
