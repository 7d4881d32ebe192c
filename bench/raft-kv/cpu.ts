// CPU time spent by the processes of a system during a phase, from /proc/<pid>/stat
// (user + system, all threads). Latency on 2 shared cores is noisy; CPU per operation is
// the steadier figure when comparing two versions of the write path.

import { readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** CPU milliseconds used so far by `pid` (0 when it is gone). */
export function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return ((utime + stime) * 1000) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** This process (the load generator), user + system. */
export function selfCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** CPU milliseconds of each member and of the load generator. */
export interface CpuUse {
  members: number[];
  client: number;
}

/** CPU of each member and of the load generator between start() and used(). */
export class CpuMeter {
  private startMembers: number[] = [];
  private startClient = 0;

  constructor(private readonly pids: () => (number | undefined)[]) {}

  start(): void {
    this.startMembers = this.pids().map(processCpuMs);
    this.startClient = selfCpuMs();
  }

  used(): CpuUse {
    const members = this.pids().map((pid, i) => processCpuMs(pid) - (this.startMembers[i] ?? 0));
    return { members, client: selfCpuMs() - this.startClient };
  }
}

export function addCpu(a: CpuUse, b: CpuUse): CpuUse {
  return { members: b.members.map((m, i) => m + (a.members[i] ?? 0)), client: a.client + b.client };
}

export function perOp(use: CpuUse, ops: number): CpuUse {
  const n = Math.max(1, ops);
  return { members: use.members.map((m) => m / n), client: use.client / n };
}
