// What a move costs the manager process (this one: the fixture builds the manager in it):
// CPU seconds (process.cpuUsage, every thread, user + system) and bytes read (rchar of
// /proc/self/io: every read(2) and recv on sockets, pipes and files alike, so it is an upper
// bound on what the manager received from the network), and the agents' CPU when they run as
// their own processes. The bench's own work in this process during a move is small: one
// Emit submission, a look at the replicated job record every 100 ms, the captured log.

import { readFileSync } from 'node:fs';
import { processCpuMs } from '../raft-kv/cpu';

export interface ProcessUse {
  cpuSeconds: number;
  readBytes: number;
  /** The agent processes' CPU seconds, summed (0 with in-process agents). */
  agentCpuSeconds: number;
}

export function processUse(agentPids: readonly number[]): ProcessUse {
  const cpu = process.cpuUsage();
  const rchar = /^rchar: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
  return {
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    readBytes: Number(rchar?.[1] ?? Number.NaN),
    agentCpuSeconds: agentPids.reduce((sum, pid) => sum + processCpuMs(pid) / 1000, 0),
  };
}

export function useBetween(a: ProcessUse, b: ProcessUse): ProcessUse {
  return { cpuSeconds: b.cpuSeconds - a.cpuSeconds, readBytes: b.readBytes - a.readBytes, agentCpuSeconds: b.agentCpuSeconds - a.agentCpuSeconds };
}
