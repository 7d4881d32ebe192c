// kcm local down: stop exactly what `kcm local up` started, by recorded pid: managers first
// (no new jobs reach the agents), then agents, then the database instances the agents left
// running (found by pid files, see instances.ts). Each pid is signalled only while its
// /proc cmdline is still the process we started. Files stay (a later `up` resumes the same
// metadata, and the agents bring their instances back) unless --purge removes the whole
// deployment directory and the instances' cgroups.

import { rm } from 'node:fs/promises';
import path from 'node:path';
import { EXIT } from '../io';
import { writeJson } from '../commands/shared';
import { purgeInstanceCgroups, type CgroupPurge } from './cgroups';
import { findInstances, instanceProcess } from './instances';
import { stopProcesses, type StopOutcome } from './processes';
import { readRecord } from './record';
import { shown, stopLines } from './render';
import { agentProcesses, managerProcesses } from './services';
import type { LocalContext } from './context';

export interface DownOptions {
  dir: string;
  json: boolean;
  purge: boolean;
  /** Grace before SIGKILL for managers and agents; instances get longer (a clean engine shutdown flushes). */
  graceMs: number;
}

export async function localDown(ctx: LocalContext, options: DownOptions): Promise<number> {
  const record = await readRecord(options.dir);
  if (!record) {
    if (options.purge) {
      ctx.io.stderr.write(`kcm: not purging ${shown(options.dir, ctx.cwd)}: it has no local.json, so kcm local up did not create it\n`);
      return EXIT.failed;
    }
    if (options.json) writeJson(ctx.io, { dir: options.dir, recorded: false, stopped: [] });
    else ctx.io.stdout.write(`No kcm local deployment in ${shown(options.dir, ctx.cwd)}; nothing to stop.\n`);
    return EXIT.ok;
  }

  const outcomes: StopOutcome[] = [];
  outcomes.push(...(await stopProcesses(managerProcesses(record), { graceMs: options.graceMs })));
  outcomes.push(...(await stopProcesses(agentProcesses(record), { graceMs: options.graceMs })));
  const instances = await findInstances(record.dir, record.agents.map((a) => a.stateDir));
  outcomes.push(...(await stopProcesses(instances.map(instanceProcess), { graceMs: Math.max(options.graceMs, 30_000) })));

  const survivors = outcomes.filter((o) => o.result === 'still-running');
  let purged = false;
  let cgroups: CgroupPurge = { removed: [], problems: [] };
  if (options.purge && survivors.length === 0) {
    const dir = path.resolve(record.dir);
    if (dir === path.parse(dir).root || dir === path.resolve(ctx.repoRoot)) {
      ctx.io.stderr.write(`kcm: not purging ${dir}: refusing to remove a filesystem root or the repository\n`);
      return EXIT.failed;
    }
    // The instances' cgroups live outside the directory; every process in them was stopped above.
    cgroups = await purgeInstanceCgroups(record.agents.map((a) => a.hostaddr));
    await rm(dir, { recursive: true, force: true });
    purged = true;
  }

  if (options.json) {
    writeJson(ctx.io, { dir: record.dir, recorded: true, purged, stopped: outcomes, cgroupsRemoved: cgroups.removed, cgroupProblems: cgroups.problems });
  } else {
    const lines = [`kcm local down in ${shown(record.dir, ctx.cwd)}:`, ...stopLines(outcomes)];
    if (instances.length === 0) lines.push('  (no database instance pid files found)');
    if (purged) lines.push(`Removed ${shown(record.dir, ctx.cwd)}${cgroups.removed.length > 0 ? ` and ${cgroups.removed.length} instance cgroup(s)` : ''}.`);
    else if (options.purge) lines.push(`Not removed ${shown(record.dir, ctx.cwd)}: some processes are still running.`);
    else lines.push(`Data and logs are kept in ${shown(record.dir, ctx.cwd)} (kcm local up resumes them; --purge deletes them).`);
    for (const problem of cgroups.problems) lines.push(`  cgroup not removed: ${problem}`);
    ctx.io.stdout.write(`${lines.join('\n')}\n`);
  }
  return survivors.length === 0 && cgroups.problems.length === 0 ? EXIT.ok : EXIT.failed;
}
