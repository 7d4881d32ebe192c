// The hollow fleet (hollow-agents.ts) as a child process, for benches that measure the
// manager's side apart from the fleet's: its CPU is read from /proc, this process's from
// process.cpuUsage.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { testCertsPerHost } from '../../test/helpers/pki';

/** CPU seconds (user + system) a process has used so far; NaN once it has exited (a round ending after the bench stopped the fleet). */
export function cpuSecondsOf(pid: number): number {
  if (!existsSync(`/proc/${pid}/stat`)) return Number.NaN;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks of 1/100 s (getconf CLK_TCK)
}

export function processCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** Starts one hollow-agents process serving `hosts` on `port`; resolves once every endpoint listens. */
export async function startHollowFleet(hosts: string[], port: number, files: { silentFile?: string; hungFile?: string; olderAgents?: boolean } = {}): Promise<ChildProcess> {
  const tls = await testCertsPerHost('agent', hosts);
  const extra = [...(files.silentFile ? ['--silent-file', files.silentFile] : []), ...(files.hungFile ? ['--hung-file', files.hungFile] : []), ...(files.olderAgents ? ['--older-agents'] : [])];
  const fleet = spawn(
    process.execPath,
    ['--import', 'tsx', 'bench/scale/hollow-agents.ts', '--first', hosts[0], '--count', String(hosts.length), '--port', String(port),
      '--tls-ca', tls.ca, '--tls-dir', tls.dir, ...extra],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  // A bench that dies (an exception, process.exit) takes its fleet along: an orphaned fleet
  // keeps the addresses, and the next run's fleet fails to listen on them.
  process.once('exit', () => fleet.kill('SIGKILL'));
  for await (const line of createInterface({ input: fleet.stdout! })) if (line.includes('"ready":true')) return fleet;
  throw new Error('the hollow fleet exited before it was ready (its error is above)');
}
