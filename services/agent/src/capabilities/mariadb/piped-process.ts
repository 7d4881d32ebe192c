// Streaming counterpart of ops/exec.ts for the backup pipeline: `mariabackup --stream`
// writes gigabytes to stdout and `mbstream -x` reads them from stdin, which exec() (that
// buffers output and takes stdin as one string) cannot carry. Same rules as exec.ts:
// an argument array, never a shell; a timeout; kill on abort; no secrets in argv.
// (Belongs in ops/exec.ts as `spawnPiped`; kept here because that file has another owner.)

import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { ExecError, type RunAs } from '../../ops/exec';

export interface PipedProcess {
  /** The process's stdout when spawned with `output: 'pipe'`. */
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
  output: 'pipe' | 'ignore';
  timeoutMs: number;
  signal?: AbortSignal;
  cwd?: string;
  runAs?: RunAs;
}

const MAX_STDERR = 1024 * 1024;

export function spawnPiped(file: string, args: readonly string[], opts: PipedOptions): PipedProcess {
  const child: ChildProcess = spawn(file, args, {
    cwd: opts.cwd,
    uid: opts.runAs?.uid,
    gid: opts.runAs?.gid,
    stdio: [opts.input, opts.output, 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    if (stderr.length < MAX_STDERR) stderr += d.toString();
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

/**
 * Yields the source's bytes at no more than `bytesPerSecond` (0 = unlimited), in pieces of
 * at most `pieceBytes`, like `pv -L`: it sleeps whenever it is ahead of the allowed rate.
 * Pausing the reader pauses the producer through stream backpressure.
 */
export async function* rateLimited(source: AsyncIterable<Buffer>, bytesPerSecond: number, pieceBytes = 64 * 1024): AsyncGenerator<Buffer> {
  const started = performance.now();
  let sent = 0;
  for await (const chunk of source) {
    for (let at = 0; at < chunk.length; at += pieceBytes) {
      const piece = chunk.subarray(at, Math.min(chunk.length, at + pieceBytes));
      if (bytesPerSecond > 0) {
        const dueMs = ((sent + piece.length) / bytesPerSecond) * 1000;
        const aheadMs = dueMs - (performance.now() - started);
        if (aheadMs > 1) await new Promise((r) => setTimeout(r, aheadMs));
      }
      sent += piece.length;
      yield piece;
    }
  }
}
