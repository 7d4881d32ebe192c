// Which processes make up an instance: its main process (given, or found as the owner of
// the listening socket on the instance's port) and all of that process's descendants
// (a postmaster's backends and workers). Read from /proc; nothing is spawned.

import { readdir, readFile, readlink } from 'node:fs/promises';

const LISTEN = '0A';

/** Inodes of TCP sockets listening on `port` (IPv4 and IPv6 tables). */
export function listeningInodes(procNetTcp: string, port: number): string[] {
  const inodes: string[] = [];
  for (const line of procNetTcp.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const localPort = parseInt(f[1].split(':')[1] ?? '', 16);
    if (localPort === port && f[3] === LISTEN && f[9] !== '0') inodes.push(f[9]);
  }
  return inodes;
}

async function readOr(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return '';
  }
}

async function numericEntries(dir: string): Promise<number[]> {
  return (await readdir(dir)).filter((n) => /^\d+$/.test(n)).map(Number);
}

/** pid -> parent pid, for every process visible in /proc. */
export async function parentMap(): Promise<Map<number, number>> {
  const parents = new Map<number, number>();
  for (const pid of await numericEntries('/proc')) {
    const stat = await readOr(`/proc/${pid}/stat`);
    // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (rest.length > 1) parents.set(pid, Number(rest[1]));
  }
  return parents;
}

/** `root` and every process below it, parents before children. */
export function descendantsOf(root: number, parents: Map<number, number>): number[] {
  const children = new Map<number, number[]>();
  for (const [pid, ppid] of parents) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  const out: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** The process that owns the listening socket on `port`; the topmost one if several share it. */
export async function listenerPid(port: number): Promise<number | undefined> {
  const tables = (await readOr('/proc/net/tcp')) + '\n' + (await readOr('/proc/net/tcp6')).split('\n').slice(1).join('\n');
  const inodes = new Set(listeningInodes(tables, port).map((i) => `socket:[${i}]`));
  if (inodes.size === 0) return undefined;
  const owners: number[] = [];
  for (const pid of await numericEntries('/proc')) {
    let fds: string[];
    try {
      fds = await readdir(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or not ours to read
    }
    for (const fd of fds) {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      if (inodes.has(target)) {
        owners.push(pid);
        break;
      }
    }
  }
  if (owners.length <= 1) return owners[0];
  const parents = await parentMap();
  return owners.find((pid) => !owners.includes(parents.get(pid) ?? -1));
}
