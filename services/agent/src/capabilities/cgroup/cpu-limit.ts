// One kcm cgroup per instance under the cpu hierarchy: <root>/kcm/<kind>-<hostaddr>-<port>.
// The address is part of the name because hosts may share a kernel (loopback test hosts,
// containers), and two instances on different addresses may use the same port.
// `quota` caps the instance at cpu_cores of CPU time per period (CFS bandwidth);
// `share` gives it a weight proportional to cpu_cores when CPUs are contended
// (1 core = 1024 shares in v1 = weight 100 in v2, the kernel's defaults).

import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CpuHierarchy } from './detect';
import type { CpuLimitMode, InstanceKind } from '@kcm/agent-api';
import { AgentFailure } from '@kcm/agent-api';

export const CFS_PERIOD_US = 100_000;
const MAX_CORES = 4096;

export interface CpuLimit {
  cores: number;
  mode: CpuLimitMode;
}

export interface CgroupWrite {
  name: string;
  value: string;
}

export function validateCpuLimit(cores: number, mode: string): CpuLimit {
  if (mode !== 'quota' && mode !== 'share') throw new AgentFailure('invalid_argument', `mode must be "quota" or "share", not ${JSON.stringify(mode)}`);
  if (!Number.isFinite(cores) || cores <= 0 || cores > MAX_CORES) throw new AgentFailure('invalid_argument', `cpu_cores must be in (0, ${MAX_CORES}], not ${cores}`);
  return { cores, mode };
}

/**
 * The files to write, in order. Each mode also resets the other mode's knob to its
 * default, so switching an instance from quota to share (or back) leaves no stale limit.
 */
export function cpuLimitWrites(version: CpuHierarchy['version'], limit: CpuLimit): CgroupWrite[] {
  // The kernel rejects a CFS quota below 1 ms.
  const quotaUs = Math.max(1000, Math.round(limit.cores * CFS_PERIOD_US));
  if (version === 'v1') {
    return limit.mode === 'quota'
      ? [
          { name: 'cpu.cfs_period_us', value: String(CFS_PERIOD_US) },
          { name: 'cpu.cfs_quota_us', value: String(quotaUs) },
          { name: 'cpu.shares', value: '1024' },
        ]
      : [
          { name: 'cpu.cfs_quota_us', value: '-1' },
          { name: 'cpu.shares', value: String(Math.max(2, Math.round(limit.cores * 1024))) },
        ];
  }
  return limit.mode === 'quota'
    ? [
        { name: 'cpu.max', value: `${quotaUs} ${CFS_PERIOD_US}` },
        { name: 'cpu.weight', value: '100' },
      ]
    : [
        { name: 'cpu.max', value: `max ${CFS_PERIOD_US}` },
        { name: 'cpu.weight', value: String(Math.min(10_000, Math.max(1, Math.round(limit.cores * 100)))) },
      ];
}

/** The cgroup of one instance, named by kind, host address and port. */
export interface InstanceCgroup {
  kind: InstanceKind;
  hostaddr: string;
  port: number;
}

export function instanceCgroupDir(h: CpuHierarchy, instance: InstanceCgroup): string {
  // IPv6 colons are legal in cgroup names but awkward in paths; dots and dashes are not.
  return path.join(h.root, 'kcm', `${instance.kind}-${instance.hostaddr.replaceAll(':', '_')}-${instance.port}`);
}

async function procsOf(dir: string): Promise<number[]> {
  try {
    return (await readFile(path.join(dir, 'cgroup.procs'), 'utf8')).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** v2 only: a child gets the cpu knobs only when every ancestor enables `cpu` for its children. */
async function enableCpuController(dir: string): Promise<void> {
  const control = path.join(dir, 'cgroup.subtree_control');
  const enabled = (await readFile(control, 'utf8')).trim().split(/\s+/);
  if (!enabled.includes('cpu')) await writeFile(control, '+cpu');
}

/** Moves one process; one that exited meanwhile (ESRCH) is not an error. */
async function moveProcess(dir: string, pid: number): Promise<boolean> {
  try {
    await writeFile(path.join(dir, 'cgroup.procs'), String(pid));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw new Error(`cannot move pid ${pid} into ${dir}: ${(err as Error).message}`, { cause: err });
  }
}

/** How long removeCpuLimit keeps sweeping a cgroup that children keep being forked into. */
const REMOVE_DEADLINE_MS = 2_000;

export interface AppliedLimit {
  dir: string;
  written: CgroupWrite[];
  pids: number[];
}

/** Creates the instance's cgroup if needed, writes the limit, then moves `pids` in (parents first). */
export async function applyCpuLimit(h: CpuHierarchy, instance: InstanceCgroup, limit: CpuLimit, pids: number[]): Promise<AppliedLimit> {
  const dir = instanceCgroupDir(h, instance);
  if (h.version === 'v2') {
    await enableCpuController(h.root);
    await mkdir(path.dirname(dir), { recursive: true });
    await enableCpuController(path.dirname(dir));
  }
  await mkdir(dir, { recursive: true });
  const written = cpuLimitWrites(h.version, limit);
  for (const w of written) {
    try {
      await writeFile(path.join(dir, w.name), w.value);
    } catch (err) {
      throw new Error(`cannot write ${w.value} to ${path.join(dir, w.name)}: ${(err as Error).message}`, { cause: err });
    }
  }
  const moved: number[] = [];
  for (const pid of pids) if (await moveProcess(dir, pid)) moved.push(pid);
  return { dir, written, pids: moved };
}

/**
 * Moves the instance's processes back to the hierarchy's root and deletes its cgroup; absent is
 * fine. A postmaster forks backends and workers at any moment, and a child forked between
 * reading cgroup.procs and moving its parent is born inside the cgroup, so rmdir answers
 * EBUSY: then the sweep runs again (8 of 40 removals under a forking shell failed on the first
 * sweep) until the cgroup is empty or REMOVE_DEADLINE_MS has passed.
 */
export async function removeCpuLimit(h: CpuHierarchy, instance: InstanceCgroup): Promise<AppliedLimit> {
  const dir = instanceCgroupDir(h, instance);
  const moved: number[] = [];
  const deadline = Date.now() + REMOVE_DEADLINE_MS;
  for (;;) {
    for (const pid of await procsOf(dir)) if ((await moveProcess(h.root, pid)) && !moved.includes(pid)) moved.push(pid);
    try {
      await rmdir(dir);
      break;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') break;
      if (code !== 'EBUSY' || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  return { dir, written: [], pids: moved };
}
