// The only place in the agent that starts processes. Every external tool runs from an
// argument array (never a shell string), with a timeout and an abort signal; secrets go
// through stdin or files with mode 0600, never through argv or the environment of a
// logged command line.

import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { openSync, closeSync, readFileSync } from 'node:fs';

export class ExecError extends Error {
  constructor(
    readonly file: string,
    readonly args: readonly string[],
    readonly code: number | null,
    readonly signal: NodeJS.Signals | null,
    readonly stderr: string,
    reason?: string,
  ) {
    const tail = stderr.trim().split('\n').slice(-5).join(' | ');
    super(`${file} ${reason ?? (signal ? `killed by ${signal}` : `exited with ${code}`)}${tail ? `: ${tail}` : ''}`);
    this.name = 'ExecError';
  }
}

export interface RunAs {
  uid: number;
  gid: number;
}

export interface ExecOptions {
  /** Kill the process (SIGKILL) and reject after this long. Default 120 s. */
  timeoutMs?: number;
  signal?: AbortSignal;
  cwd?: string;
  /** Replaces the environment (PATH is kept unless given). */
  env?: Record<string, string>;
  /** Written to stdin, then stdin is closed: the way to hand a tool a password or SQL. */
  input?: string | Buffer;
  runAs?: RunAs;
  /** Non-zero exit codes that are not failures (e.g. `pg_ctl status` returns 3 when stopped). */
  okCodes?: number[];
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

const MAX_CAPTURE = 4 * 1024 * 1024;

export function exec(file: string, args: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: opts.cwd,
      env: opts.env ? { PATH: process.env.PATH ?? '/usr/bin:/bin', ...opts.env } : process.env,
      uid: opts.runAs?.uid,
      gid: opts.runAs?.gid,
      stdio: ['pipe', 'pipe', 'pipe'],
      signal: opts.signal,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      if (stdout.length < MAX_CAPTURE) stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      if (stderr.length < MAX_CAPTURE) stderr += d.toString();
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new ExecError(file, args, null, 'SIGKILL', stderr, `timed out after ${opts.timeoutMs ?? 120_000} ms`));
    }, opts.timeoutMs ?? 120_000);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new ExecError(file, args, null, null, stderr, err.message));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0 || (code !== null && opts.okCodes?.includes(code))) resolve({ code: code ?? 0, stdout, stderr });
      else reject(new ExecError(file, args, code, signal, stderr));
    });
    child.stdin.on('error', () => {}); // a tool that exits without reading stdin is not our error
    child.stdin.end(opts.input ?? '');
  });
}

export interface DetachedOptions {
  cwd?: string;
  env?: Record<string, string>;
  runAs?: RunAs;
  /** stdout and stderr of the process are appended here. */
  logFile: string;
}

/**
 * Starts a long-lived server process detached from the agent (its own process group, no
 * pipes to us), so it survives an agent restart. Returns its pid; callers track it with a
 * pid file (the engines write their own).
 */
export function spawnDetached(file: string, args: readonly string[], opts: DetachedOptions): number {
  const out = openSync(opts.logFile, 'a');
  try {
    const child = spawn(file, args, {
      cwd: opts.cwd,
      env: opts.env ? { PATH: process.env.PATH ?? '/usr/bin:/bin', ...opts.env } : process.env,
      uid: opts.runAs?.uid,
      gid: opts.runAs?.gid,
      detached: true,
      stdio: ['ignore', out, out],
    });
    if (child.pid === undefined) throw new ExecError(file, args, null, null, '', 'could not be started');
    child.unref();
    return child.pid;
  } finally {
    closeSync(out);
  }
}

/** uid/gid of a local OS user (e.g. `postgres`), read from /etc/passwd. */
export function osUser(name: string): RunAs {
  for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
    const f = line.split(':');
    if (f[0] === name) return { uid: Number(f[2]), gid: Number(f[3]) };
  }
  throw new Error(`OS user ${name} does not exist`);
}

/** True when a process with this pid exists (signal 0 probes without touching it). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

// Streaming variant for pipelines that move gigabytes (mariabackup --stream | mbstream -x):
// stdout/stdin stay streams instead of buffered strings. Same rules as exec().

export interface PipedProcess {
  /** The process's stdout when spawned with `output: 'pipe'` (absent otherwise). */
  stdout: Readable;
  /** The process's stdin when spawned with `input: 'pipe'`. */
  stdin: Writable;
  pid: number;
  /** Resolves with stderr on exit 0; rejects with ExecError otherwise (or on timeout/abort). */
  done: Promise<string>;
  kill(): void;
}

export interface PipedOptions {
  input: 'pipe' | 'ignore';
  /**
   * A Writable here is the write end of another child's stdin pipe: this process writes
   * into it directly (an OS pipe between the two, no byte through the agent), and the
   * caller closes its own end once both are spawned so the reader sees EOF.
   */
  output: 'pipe' | 'ignore' | Writable;
  timeoutMs: number;
  signal?: AbortSignal;
  cwd?: string;
  runAs?: RunAs;
}

export function spawnPiped(file: string, args: readonly string[], opts: PipedOptions): PipedProcess {
  const child: ChildProcess = spawn(file, args, {
    cwd: opts.cwd,
    uid: opts.runAs?.uid,
    gid: opts.runAs?.gid,
    stdio: [opts.input, opts.output, 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    if (stderr.length < MAX_CAPTURE) stderr += d.toString();
  });
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  const done = new Promise<string>((resolve, reject) => {
    let reason: string | undefined;
    const timer = setTimeout(() => {
      reason = `timed out after ${opts.timeoutMs} ms`;
      kill();
    }, opts.timeoutMs);
    const onAbort = () => {
      reason = 'aborted';
      kill();
    };
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new ExecError(file, args, null, null, stderr, err.message));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      if (code === 0 && !reason) resolve(stderr);
      else reject(new ExecError(file, args, code, signal, stderr, reason));
    });
  });
  done.catch(() => {}); // callers await it; an early failure must not be an unhandled rejection
  child.stdin?.on('error', () => {}); // EPIPE when the tool dies first: `done` reports why
  return { stdout: child.stdout!, stdin: child.stdin!, pid: child.pid ?? -1, done, kill };
}
