// The postmaster as a process: started detached as the postgres OS user (never root),
// found again through its own postmaster.pid (so an agent restart loses nothing), stopped
// with PostgreSQL's shutdown signals.

import { chown, open, readFile, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { processAlive, spawnDetached, type RunAs } from '../../ops/exec';
import { descendantsOf, killAndWait, parentMap, processesNamed } from '../cgroup/processes';
import { AgentFailure } from '@kcm/agent-api';

export interface PostmasterStatus {
  pid: number;
  /** postmaster.pid's status line: "starting", "ready", "stopping" (empty for old formats). */
  state: string;
}

const LOG_FILE = 'postgres.log';

/** The running postmaster of a data directory, or undefined when none is (a stale pid file counts as none). */
export async function postmasterStatus(datadir: string): Promise<PostmasterStatus | undefined> {
  let text: string;
  try {
    text = await readFile(path.join(datadir, 'postmaster.pid'), 'utf8');
  } catch {
    return undefined;
  }
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !processAlive(pid)) return undefined;
  // A recycled pid belongs to some other program: the postmaster's argv names its data directory.
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (cmdline !== '' && !cmdline.split('\0').includes(datadir)) return undefined;
  return { pid, state: (lines[7] ?? '').trim() };
}

async function logTail(datadir: string): Promise<string> {
  const text = await readFile(path.join(datadir, LOG_FILE), 'utf8').catch(() => '');
  return text.trim().split('\n').slice(-5).join(' | ');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `postgres -D datadir` detached and waits until postmaster.pid says "ready".
 * The log file is created owned by postgres, inside the data directory.
 */
export async function startPostmaster(postgresBin: string, datadir: string, runAs: RunAs, timeoutMs = 60_000): Promise<number> {
  const logFile = path.join(datadir, LOG_FILE);
  await (await open(logFile, 'a', 0o600)).close();
  await chown(logFile, runAs.uid, runAs.gid);
  const pid = spawnDetached(postgresBin, ['-D', datadir], { runAs, logFile, cwd: datadir, env: { LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' } });
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const status = await postmasterStatus(datadir);
    if (status?.pid === pid && status.state === 'ready') return pid;
    if (!processAlive(pid)) throw new AgentFailure('instance_failed', `postgres in ${datadir} exited during startup: ${await logTail(datadir)}`);
    await sleep(100);
  }
  throw new AgentFailure('instance_failed', `postgres in ${datadir} was not ready after ${timeoutMs} ms: ${await logTail(datadir)}`);
}

async function waitGone(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!processAlive(pid)) return true;
    await sleep(50);
  }
  return !processAlive(pid);
}

/**
 * Fast shutdown (SIGINT: roll back sessions, checkpoint), then immediate shutdown
 * (SIGQUIT), then SIGKILL to the postmaster and every descendant (backends call setsid,
 * so a process-group kill would miss them).
 * Returns how it ended, for the reply's detail.
 */
export async function stopPostmaster(pid: number, fastTimeoutMs = 30_000): Promise<string> {
  const steps: [NodeJS.Signals, number, string][] = [
    ['SIGINT', fastTimeoutMs, 'fast shutdown'],
    ['SIGQUIT', 5_000, 'immediate shutdown'],
  ];
  for (const [signal, timeout, how] of steps) {
    try {
      process.kill(pid, signal);
    } catch {
      return 'already stopped';
    }
    if (await waitGone(pid, timeout)) return how;
  }
  for (const victim of descendantsOf(pid, await parentMap())) {
    try {
      process.kill(victim, 'SIGKILL');
    } catch {
      // exited meanwhile
    }
  }
  await waitGone(pid, 5_000);
  return 'killed';
}

/**
 * Kills what is left of a postmaster that died (SIGKILL, a crash): backends still working
 * from its data directory. A backend busy in a statement (a foreign-table call waiting on a
 * shard) notices its postmaster's death only when that call returns, and meanwhile holds
 * the old shared memory, so no new postmaster can start ("pre-existing shared memory block
 * is still in use"); the supervisor's backoff then stretched one crash into minutes. With no
 * postmaster they serve no one: a crash of the node would have taken them too. Call only
 * when postmasterStatus says none runs. Returns the pids killed.
 */
export async function killOrphanedBackends(datadir: string): Promise<number[]> {
  // A backend's working directory is its data directory (the postmaster changes into it), as the kernel resolves it.
  const dir = await realpath(datadir).catch(() => datadir);
  const orphans = await processesNamed('postgres', async (pid) => (await readlink(`/proc/${pid}/cwd`).catch(() => '')) === dir);
  await killAndWait(orphans);
  return orphans;
}
