// One way to make a logger: pino, JSON lines, with the component name on every line.
// Every service builds its root logger here and hands children to the parts it wires,
// so log lines from a manager, its gateway and its runner share one shape.

import { pino, type DestinationStream, type Logger, type LevelWithSilent } from 'pino';

export type { Logger } from 'pino';

export interface LoggerOptions {
  /** Component name, written as `name` on every line (e.g. "manager", "gateway"). */
  name: string;
  /** Minimum level; defaults to $KCM_LOG_LEVEL, else "info". */
  level?: LevelWithSilent;
  /** Where lines go; defaults to stdout. Tests pass a stream to capture lines. */
  destination?: DestinationStream;
  /** Fields added to every line (e.g. { member: "127.0.1.1:58000" }). */
  base?: Record<string, unknown>;
}

/**
 * Lines are buffered and written in blocks: one write(2) per line cost a member about a
 * tenth of its CPU under load (bench/emit). A block goes out at 4 KiB, every 100 ms, on
 * flushLog() and when the process exits; a SIGKILL loses at most the last 100 ms of
 * lines, so a line that must survive a kill (a job step about to act) is followed by
 * flushLog(). Writes are synchronous: a flush is on disk (in the page cache) when it
 * returns, and a block never overtakes another.
 */
const BLOCK_BYTES = 4096;
const FLUSH_EVERY_MS = 100;
type Destination = ReturnType<typeof pino.destination>;
const stdoutBlocks = new Set<Destination>();

function bufferedStdout(): Destination {
  const dest = pino.destination({ dest: 1, sync: true, minLength: BLOCK_BYTES, periodicFlush: FLUSH_EVERY_MS });
  if (stdoutBlocks.size === 0) process.once('exit', () => stdoutBlocks.forEach((d) => d.flushSync()));
  stdoutBlocks.add(dest);
  return dest;
}

/**
 * Writes out every line buffered for stdout (see BLOCK_BYTES), synchronously. Neither
 * logger.flush() nor the destination's flushSync(): both also fsync, which cost the
 * leader a third of its CPU under load (bench/emit) and no log line is worth.
 */
export function flushLog(): void {
  for (const dest of stdoutBlocks) dest.flush(); // sync destination, no callback: write(2) only
}

let pendingFlush: Promise<void> | null = null;

/**
 * flushLog() for many callers at once: resolves once the lines logged so far are written,
 * by one write for every call made before the microtasks run (e.g. each job a runner
 * starts in one pass logs its 'step started' line, and all wait for the same write).
 */
export function flushLogSoon(): Promise<void> {
  pendingFlush ??= Promise.resolve().then(() => {
    pendingFlush = null;
    flushLog();
  });
  return pendingFlush;
}

const LEVELS: readonly LevelWithSilent[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function isLogLevel(value: string | undefined): value is LevelWithSilent {
  return value !== undefined && (LEVELS as readonly string[]).includes(value);
}

export function createLogger(options: LoggerOptions): Logger {
  const envLevel = process.env.KCM_LOG_LEVEL;
  const level = options.level ?? (isLogLevel(envLevel) ? envLevel : 'info');
  return pino(
    {
      name: options.name,
      level,
      base: { pid: process.pid, ...options.base },
      timestamp: pino.stdTimeFunctions.isoTime,
      // Auth headers must never reach a log line, whichever object carries them.
      redact: { paths: ['req.headers.authorization', 'headers.authorization', 'token'], censor: '[redacted]' },
    },
    options.destination ?? bufferedStdout(),
  );
}

/** A logger that drops everything: for tests and for callers that pass no logger. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
