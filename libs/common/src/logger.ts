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
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
}

/** A logger that drops everything: for tests and for callers that pass no logger. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
