// Free disk space around the work that fills it (issue 35): an install, rebuild, restore or
// backup into a full directory failed as `write EPIPE`, `mariadb-install-db exited with 1` or
// InnoDB's `Generic error`, none naming the disk. Work that writes a directory checks its
// free space before it starts (requireFreeSpace), and a failure while a directory is full is
// reported as that (namingFullDisk): AgentFailure 'no_space', which the manager reports as
// NO_RESOURCES, naming the directory, the host and the free bytes.

import { stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { AgentFailure, diskFullMessage, formatBytes } from '@kcm/agent-api';

/** What a piece of work needs free in one directory: `what` names its role (datadir, wal_log_dir...). */
export interface DirNeed {
  what: string;
  dir: string;
  bytes: number;
}

/** Below this a directory counts as full after a failure whose own need is unknown. */
export const NEARLY_FULL_BYTES = 16 * 2 ** 20;

/** The filesystem holding `dir` (or its nearest existing parent: a dir not created yet). */
async function filesystemOf(dir: string): Promise<{ dev: number; free: number }> {
  let probe = path.resolve(dir);
  for (;;) {
    try {
      const [st, fs] = await Promise.all([stat(probe), statfs(probe)]);
      return { dev: st.dev, free: fs.bavail * fs.bsize };
    } catch (err) {
      const parent = path.dirname(probe);
      if (parent === probe) throw err;
      probe = parent;
    }
  }
}

/** Free bytes of the filesystem holding dir; a dir not created yet is measured at its nearest existing parent. */
export async function freeBytes(dir: string): Promise<number> {
  return (await filesystemOf(dir)).free;
}

/**
 * Refuses (no_space) when a filesystem has less free space than the needs of the listed
 * directories on it together (a datadir and a wal_log_dir on one disk both take from it).
 */
export async function requireFreeSpace(hostaddr: string, needs: readonly DirNeed[]): Promise<void> {
  const byDevice = new Map<number, { free: number; needs: DirNeed[] }>();
  for (const need of needs) {
    const fs = await filesystemOf(need.dir);
    const entry = byDevice.get(fs.dev) ?? { free: fs.free, needs: [] };
    entry.needs.push(need);
    byDevice.set(fs.dev, entry);
  }
  for (const { free, needs: onDisk } of byDevice.values()) {
    const needed = onDisk.reduce((n, d) => n + d.bytes, 0);
    if (free >= needed) continue;
    const [first, ...others] = onDisk;
    const shared = others.length === 0 ? '' : ` (shared with ${others.map((d) => `${d.what} ${d.dir}`).join(', ')}: ${onDisk.map((d) => `${formatBytes(d.bytes)} for ${d.what}`).join(', ')})`;
    throw new AgentFailure('no_space', `${diskFullMessage(first.what, first.dir, hostaddr, free, needed)}${shared}`);
  }
}

const SAYS_FULL = /ENOSPC|No space left on device|errno:? ?28\b|Errcode: 28\b|disk (is )?full/i;

/** True when an error (or a cause of it) says the disk is full. */
function saysDiskFull(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if ((e as NodeJS.ErrnoException).code === 'ENOSPC' || SAYS_FULL.test(e.message)) return true;
  }
  return false;
}

/**
 * Runs `work`. When it fails and one of the directories is now below its need (a full disk
 * shows up as EPIPE, a tool's exit code or an engine's generic error), or the failure itself
 * says ENOSPC, the failure is rethrown as no_space naming the fullest directory; the original
 * error is its cause and its message is kept after the disk's.
 */
export async function namingFullDisk<T>(hostaddr: string, needs: readonly DirNeed[], work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof AgentFailure && err.kind === 'no_space') throw err;
    const measured = await Promise.all(needs.map(async (need) => ({ need, free: await freeBytes(need.dir).catch(() => Number.POSITIVE_INFINITY) })));
    const short = measured.filter((m) => m.free < Math.max(m.need.bytes, NEARLY_FULL_BYTES));
    const fullest = (short.length > 0 ? short : saysDiskFull(err) ? measured : []).sort((a, b) => a.free - b.free)[0];
    if (!fullest) throw err;
    const message = `${diskFullMessage(fullest.need.what, fullest.need.dir, hostaddr, fullest.free, fullest.need.bytes)}; ${err instanceof Error ? err.message : String(err)}`;
    throw new AgentFailure('no_space', message, { cause: err });
  }
}

/**
 * The error to throw for a failure of writes into `dir`: no_space naming it when the failure
 * says the disk is full (ENOSPC), the failure itself otherwise.
 */
export async function fullDiskOr(err: unknown, what: string, dir: string, hostaddr?: string): Promise<unknown> {
  if (!saysDiskFull(err) || (err instanceof AgentFailure && err.kind === 'no_space')) return err;
  const free = await freeBytes(dir).catch(() => 0);
  return new AgentFailure('no_space', `${diskFullMessage(what, dir, hostaddr, free)}; ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}
