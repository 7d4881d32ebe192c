// The cgroups the local agents made for their instances (<cpu root>/kcm/<kind>-<hostaddr>-<port>,
// see the agent's cgroup/cpu-limit.ts). `kcm local down --purge` removes them with the rest
// of the deployment: those of this deployment's host addresses only (another deployment or
// test on other loopback addresses keeps its own), and the shared kcm parent once empty.

import { readdir, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { detectCpuHierarchy, type CpuHierarchy } from '../../../agent/src/capabilities/cgroup/detect';

export interface CgroupPurge {
  removed: string[];
  /** Cgroups that could not be removed, with why (a process still in it: EBUSY). */
  problems: string[];
}

const INSTANCE_KINDS = ['mysql', 'pg'];

/** True when `name` is the cgroup of an instance on one of `hostaddrs` (the agent's naming). */
export function isInstanceCgroupOf(name: string, hostaddrs: readonly string[]): boolean {
  return INSTANCE_KINDS.some((kind) =>
    hostaddrs.some((addr) => {
      const prefix = `${kind}-${addr.replaceAll(':', '_')}-`;
      return name.startsWith(prefix) && /^[0-9]{1,5}$/.test(name.slice(prefix.length));
    }),
  );
}

export async function purgeInstanceCgroups(hostaddrs: readonly string[], find: () => Promise<CpuHierarchy | undefined> = detectCpuHierarchy): Promise<CgroupPurge> {
  const purge: CgroupPurge = { removed: [], problems: [] };
  const h = await find();
  if (!h) return purge;
  const parent = path.join(h.root, 'kcm');
  let entries;
  try {
    entries = await readdir(parent, { withFileTypes: true });
  } catch {
    return purge; // no kcm cgroup was ever made here
  }
  for (const entry of entries) {
    if (!entry.isDirectory() || !isInstanceCgroupOf(entry.name, hostaddrs)) continue;
    const dir = path.join(parent, entry.name);
    try {
      // rmdir, not rm -r: a cgroup's control files cannot be unlinked; the kernel removes them with it.
      await rmdir(dir);
      purge.removed.push(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') purge.problems.push(`${dir}: ${(err as Error).message}`);
    }
  }
  try {
    await rmdir(parent);
  } catch {
    // still used by instances of other deployments, or never ours to remove
  }
  return purge;
}
