// An instance the supervisor restarted starts in the agent's own cgroup: put it back into
// the cgroup kcm made for it, if there is one, so its CPU limit keeps holding.

import { access, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { detectCpuHierarchy, type CpuHierarchy } from './detect';
import { instanceCgroupDir, type InstanceCgroup } from './cpu-limit';
import { descendantsOf, parentMap } from './processes';

/** Moves pid and its descendants into the instance's cgroup; returns the cgroup, or '' when it has none. */
export async function rejoinCgroup(instance: InstanceCgroup, pid: number, find: () => Promise<CpuHierarchy | undefined> = detectCpuHierarchy): Promise<string> {
  const h = await find();
  if (!h) return '';
  const dir = instanceCgroupDir(h, instance);
  try {
    await access(dir);
  } catch {
    return '';
  }
  for (const member of descendantsOf(pid, await parentMap())) {
    try {
      await writeFile(path.join(dir, 'cgroup.procs'), String(member));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
  return dir;
}
