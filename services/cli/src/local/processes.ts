// Processes seen through /proc, and stopping them safely. The one safety rule of
// `kcm local`: a pid is signalled only while /proc/<pid>/cmdline shows the process we
// started (pids are reused; a stale record must never kill someone else's program).

import { readFile } from 'node:fs/promises';
import path from 'node:path';

/** /proc/<pid>/cmdline as an argv array (NUL-separated, NUL-terminated). */
export function parseCmdline(raw: string): string[] {
  const parts = raw.split('\0');
  if (parts.length > 0 && parts[parts.length - 1] === '') parts.pop();
  return parts;
}

/** The argv of a live process; undefined when there is no such process (or it is a zombie: empty cmdline). */
export async function readCmdline(pid: number): Promise<string[] | undefined> {
  try {
    const argv = parseCmdline(await readFile(`/proc/${pid}/cmdline`, 'utf8'));
    return argv.length > 0 ? argv : undefined;
  } catch {
    return undefined;
  }
}

export function sameArgv(expected: readonly string[], actual: readonly string[]): boolean {
  return expected.length === actual.length && expected.every((arg, i) => arg === actual[i]);
}

/**
 * True when some argument names dir or a path inside it, alone or as the value of an
 * `--option=value` (postgres `-D <datadir>`, mariadbd `--defaults-file=<instance>/my.cnf`).
 */
export function argvMentionsDir(argv: readonly string[], dir: string): boolean {
  const root = path.resolve(dir);
  return argv.some((arg) => {
    const value = arg.startsWith('-') && arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : arg;
    if (!path.isAbsolute(value)) return false;
    const resolved = path.resolve(value);
    return resolved === root || resolved.startsWith(`${root}${path.sep}`);
  });
}

/**
 * The pid in a pid file: its first line (mariadbd writes only the pid; postgres's
 * postmaster.pid has the pid on line 1 and more after). Undefined when it holds no pid.
 */
export function parsePidFile(text: string): number | undefined {
  const first = text.split('\n', 1)[0].trim();
  if (!/^[0-9]+$/.test(first)) return undefined;
  const pid = Number(first);
  return Number.isSafeInteger(pid) && pid > 1 ? pid : undefined;
}

/** A process `kcm local` may signal, and how to recognise it is still the one we mean. */
export interface OwnedProcess {
  /** For messages: "manager 127.0.1.1:58000", "mariadbd 57001". */
  label: string;
  pid: number;
  /** Decides from the live argv whether this pid is still ours. */
  isOurs(argv: readonly string[]): boolean;
  /** The polite stop signal (postgres shuts down fast on SIGINT; SIGTERM waits for clients). */
  stopSignal: NodeJS.Signals;
}

export type ProcessState = 'running' | 'gone' | 'replaced';

/** running: alive and ours; gone: no such process; replaced: the pid now belongs to another program. */
export async function processState(proc: Pick<OwnedProcess, 'pid' | 'isOurs'>): Promise<ProcessState> {
  const argv = await readCmdline(proc.pid);
  if (argv === undefined) return 'gone';
  return proc.isOurs(argv) ? 'running' : 'replaced';
}

/** Process group of a pid (field 5 of /proc/<pid>/stat), or undefined when it is gone. */
async function processGroup(pid: number): Promise<number | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[2]);
  } catch {
    return undefined;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

export interface StopOutcome {
  label: string;
  pid: number;
  /** stopped: ended after the polite signal; killed: needed SIGKILL; not-running: already gone or pid reused (left alone). */
  result: 'stopped' | 'killed' | 'not-running' | 'still-running';
}

export interface StopOptions {
  /** How long the polite signal gets before SIGKILL. */
  graceMs: number;
  pollMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Stops a set of processes together: the polite signal to each one that is still ours, a
 * shared grace period, then SIGKILL to the stragglers, each re-verified just before. A
 * straggler that leads its own process group (we start everything detached) is killed
 * with its group, so a postmaster's backends do not outlive it.
 */
export async function stopProcesses(procs: readonly OwnedProcess[], options: StopOptions): Promise<StopOutcome[]> {
  const sleep = options.sleep ?? defaultSleep;
  const pollMs = options.pollMs ?? 100;
  const outcomes = new Map<OwnedProcess, StopOutcome>();
  const signalled: OwnedProcess[] = [];
  for (const proc of procs) {
    if ((await processState(proc)) !== 'running') {
      outcomes.set(proc, { label: proc.label, pid: proc.pid, result: 'not-running' });
      continue;
    }
    signal(proc.pid, proc.stopSignal);
    signalled.push(proc);
  }
  let waiting = signalled;
  const deadline = Date.now() + options.graceMs;
  while (waiting.length > 0) {
    const still: OwnedProcess[] = [];
    for (const proc of waiting) {
      if ((await processState(proc)) === 'running') still.push(proc);
      else outcomes.set(proc, { label: proc.label, pid: proc.pid, result: 'stopped' });
    }
    waiting = still;
    if (waiting.length === 0 || Date.now() >= deadline) break;
    await sleep(pollMs);
  }
  for (const proc of waiting) {
    if ((await processState(proc)) !== 'running') {
      outcomes.set(proc, { label: proc.label, pid: proc.pid, result: 'stopped' });
      continue;
    }
    const group = await processGroup(proc.pid);
    signal(group === proc.pid ? -proc.pid : proc.pid, 'SIGKILL');
  }
  const killDeadline = Date.now() + 5_000;
  for (const proc of waiting) {
    if (outcomes.has(proc)) continue;
    while ((await processState(proc)) === 'running' && Date.now() < killDeadline) await sleep(pollMs);
    const alive = (await processState(proc)) === 'running';
    outcomes.set(proc, { label: proc.label, pid: proc.pid, result: alive ? 'still-running' : 'killed' });
  }
  return procs.map((proc) => outcomes.get(proc)!);
}
