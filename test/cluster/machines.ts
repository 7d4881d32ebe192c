// Registration of the test hosts as machines, shared by the cluster tests (one-member
// fixture and 3-manager groups alike): every host a storage machine, and the hosts named
// as computer hosts (all of them unless told) a computer machine too.

import path from 'node:path';
import { computerPorts as fixtureComputerPorts, HOSTS, storagePorts as fixtureStoragePorts } from './cluster-fixture';

export type PortRange = { low: number; high: number } | string;
export interface MachineDirs {
  datadir: string;
  logdir: string;
  wal_log_dir: string;
  comp_datadir: string;
}

/** What registers the machines: a job runner that waits for the job's end, and the directories of host i. */
export interface MachineTarget {
  runJob(jobType: string, paras: Record<string, unknown>): Promise<{ status: string; error_info?: string }>;
  dirs(i: number): MachineDirs;
}

export interface MachineOptions {
  /** The hosts (default the cluster fixture's HOSTS). */
  hosts?: readonly string[];
  /** Indexes of the hosts that are computer machines too (default every host). */
  computerHosts?: readonly number[];
  /** Port ranges of host i (default the cluster fixture's). */
  storagePorts?: (i: number) => PortRange;
  computerPorts?: (i: number) => PortRange;
  /** total_cpu_cores of every machine (default '2'). */
  totalCpuCores?: string;
}

/** The directories of host i under `root`, as the cluster fixture lays them out. */
export function hostDirs(root: string, i: number): MachineDirs {
  return {
    datadir: path.join(root, `h${i}`, 'data'),
    logdir: path.join(root, `h${i}`, 'log'),
    wal_log_dir: path.join(root, `h${i}`, 'wal'),
    comp_datadir: path.join(root, `h${i}`, 'comp'),
  };
}

const rangeText = (r: PortRange) => (typeof r === 'string' ? r : `${r.low}-${r.high}`);

/**
 * Registers every machine at once (the registrations are independent jobs) and throws
 * naming the first that did not end done.
 */
export async function registerMachines(target: MachineTarget, options: MachineOptions = {}): Promise<void> {
  const hosts = options.hosts ?? HOSTS;
  const storagePorts = options.storagePorts ?? fixtureStoragePorts;
  const computerPorts = options.computerPorts ?? fixtureComputerPorts;
  const machines = hosts.flatMap((host, i) => {
    const computer = options.computerHosts === undefined || options.computerHosts.includes(i);
    return [
      { i, host, type: 'storage', range: storagePorts(i) },
      ...(computer ? [{ i, host, type: 'computer', range: computerPorts(i) }] : []),
    ];
  });
  const replies = await Promise.all(
    machines.map((m) =>
      target.runJob('create_machine', {
        hostaddr: m.host, machine_type: m.type, port_range: rangeText(m.range), rack_id: 'r1', ...target.dirs(m.i),
        total_mem: '4096', total_cpu_cores: options.totalCpuCores ?? '2',
      }),
    ),
  );
  for (const [k, reply] of replies.entries()) {
    if (reply.status !== 'done') throw new Error(`create_machine ${machines[k].host} ${machines[k].type}: ${reply.error_info}`);
  }
}
