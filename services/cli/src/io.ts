// What the CLI touches outside itself, injected so that tests can run main() in-process
// with captured output, a chosen environment and no real TTY.

export interface CliOutput {
  write(text: string): unknown;
  /** True when a person is watching: progress bars redraw one line instead of printing many. */
  isTTY?: boolean;
  columns?: number;
}

export interface CliIo {
  stdout: CliOutput;
  stderr: CliOutput;
  env: Readonly<Record<string, string | undefined>>;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** Defaults to a timer; tests may shorten waits. */
  sleep?: (ms: number) => Promise<void>;
  /** Defaults to Date.now. */
  now?: () => number;
}

/** Exit codes, listed in `kcm --help`. */
export const EXIT = {
  ok: 0,
  /** The manager (or local validation) rejected the request, or the job failed. */
  failed: 1,
  /** Bad command line: unknown subcommand or flag, missing argument, not implemented. */
  usage: 2,
  /** The manager could not be reached or did not answer with an envelope. */
  unreachable: 3,
  /** --wait gave up after --timeout seconds; the job may still finish. */
  timedOut: 4,
} as const;

export const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env };
}

/** A usage mistake: printed with a hint to --help, exit code 2. */
export class UsageError extends Error {
  constructor(message: string, readonly helpHint = 'kcm --help') {
    super(message);
    this.name = 'UsageError';
  }
}
