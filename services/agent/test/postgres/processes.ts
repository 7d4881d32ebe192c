// Test helpers that look at processes through /proc: which ones belong to a folder, and
// killing them as a last resort so a failed test leaves nothing running.

import { readdir, readFile } from 'node:fs/promises';

/** Pids whose command line mentions `needle` (e.g. a test's temp folder). */
export async function pidsMentioning(needle: string): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(needle)) pids.push(Number(name));
  }
  return pids;
}

async function statOf(pid: number): Promise<{ comm: string; ppid: number } | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  if (!stat) return undefined;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), ppid: Number(fields[1]) };
}

/**
 * The postmaster of `datadir` (its argv names the data dir) and its children (each of
 * which calls setsid, so they are found by parent, not by process group).
 */
export async function postgresProcessesOf(datadir: string): Promise<number[]> {
  const leaders = new Set<number>();
  for (const pid of await pidsMentioning(datadir)) if ((await statOf(pid))?.comm === 'postgres') leaders.add(pid);
  const found: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const st = await statOf(Number(name));
    if (st?.comm === 'postgres' && (leaders.has(Number(name)) || leaders.has(st.ppid))) found.push(Number(name));
  }
  return found;
}

export function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
