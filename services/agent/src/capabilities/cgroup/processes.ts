// Which processes make up an instance: its main process (given, or found as the owner of
// the listening socket on the instance's port) and all of that process's descendants
// (a postmaster's backends and workers). Read from /proc; nothing is spawned.

import { readdir, readFile, readlink } from 'node:fs/promises';
import { processAlive } from '../../ops/exec';

const LISTEN = '0A';

/** An IPv4 address as /proc/net/tcp writes it: the four bytes in host (little-endian) order, hex. */
export function procNetIPv4(addr: string): string {
  return addr.split('.').map((b) => Number(b).toString(16).padStart(2, '0').toUpperCase()).reverse().join('');
}

const ANY_IPV4 = '00000000';

/**
 * Inodes of TCP sockets listening on `port` (IPv4 and IPv6 tables). With `hostaddr` (IPv4),
 * only sockets bound to that address or to all addresses: hosts that share a kernel
 * (loopback test hosts, containers) may each have an instance on the same port.
 */
export function listeningInodes(procNetTcp: string, port: number, hostaddr?: string): string[] {
  const wanted = hostaddr && /^\d+\.\d+\.\d+\.\d+$/.test(hostaddr) ? procNetIPv4(hostaddr) : undefined;
  const inodes: string[] = [];
  for (const line of procNetTcp.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const [localAddr, portHex] = f[1].split(':');
    const localPort = parseInt(portHex ?? '', 16);
    const addressMatches = wanted === undefined || localAddr.length !== 8 || localAddr === wanted || localAddr === ANY_IPV4;
    if (localPort === port && addressMatches && f[3] === LISTEN && f[9] !== '0') inodes.push(f[9]);
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

/** The process that owns the listening socket on `port` (of `hostaddr`); the topmost one if several share it. */
export async function listenerPid(port: number, hostaddr?: string): Promise<number | undefined> {
  const tables = (await readOr('/proc/net/tcp')) + '\n' + (await readOr('/proc/net/tcp6')).split('\n').slice(1).join('\n');
  const inodes = new Set(listeningInodes(tables, port, hostaddr).map((i) => `socket:[${i}]`));
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

/** The processes named `comm` (as /proc/<pid>/comm says) for which `belongs` holds. */
export async function processesNamed(comm: string, belongs: (pid: number) => Promise<boolean>): Promise<number[]> {
  const found: number[] = [];
  for (const pid of await numericEntries('/proc').catch(() => [] as number[])) {
    if ((await readOr(`/proc/${pid}/comm`)).trim() !== comm) continue;
    if (await belongs(pid)) found.push(pid);
  }
  return found;
}

/** SIGKILL each, and resolve once every one is gone (its ports, files and shared memory are free then). */
export async function killAndWait(pids: number[]): Promise<void> {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  while (pids.some(processAlive)) await new Promise((r) => setTimeout(r, 20));
}
