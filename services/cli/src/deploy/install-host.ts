// One host brought to what the topology says, idempotently: packages installed when
// missing, files written when missing, daemons started when not running. A host already
// installed and running is left alone; a file there that differs from what the topology now
// gives is reported, not overwritten under a running daemon (the operator restarts it
// deliberately, one host at a time).

import type { Deployment } from './deployment';
import type { HostPlan } from './host-plan';
import type { HostTransport, UnitToStart } from './transport';

export interface HostOutcome {
  host: string;
  transport: string;
  installed: string[];
  /** Installed at another version than packages_dir has: left as it is (upgrades are their own procedure). */
  otherVersion: string[];
  written: string[];
  /** Files on a running host that differ from the topology's: reported, not written. */
  changed: string[];
  started: string[];
  alreadyRunning: string[];
}

export function unitsToStart(deployment: Deployment, plan: HostPlan): UnitToStart[] {
  return plan.roles.map((role) => ({ unit: role.kind === 'manager' ? deployment.units.manager : deployment.units.agent, instance: role.instance }));
}

export async function installHost(deployment: Deployment, plan: HostPlan, transport: HostTransport): Promise<HostOutcome> {
  const outcome: HostOutcome = { host: plan.host, transport: transport.describe, installed: [], otherVersion: [], written: [], changed: [], started: [], alreadyRunning: [] };
  for (const name of new Set(plan.packages)) {
    const pkg = deployment.packages.get(name)!;
    const version = await transport.installedVersion(name);
    if (version === undefined) {
      await transport.install(pkg);
      outcome.installed.push(`${name} ${pkg.version}`);
    } else if (version !== pkg.version) {
      outcome.otherVersion.push(`${name} ${version} (packages_dir has ${pkg.version})`);
    }
  }
  const units = unitsToStart(deployment, plan);
  const running = await Promise.all(units.map((u) => transport.isRunning(u)));
  const anyRunning = running.some((r) => r);
  for (const dir of plan.directories) await transport.makeDirectory(dir);
  for (const file of plan.files) {
    const current = await transport.readFile(file.path);
    if (current !== undefined && current.equals(file.content)) continue;
    if (current !== undefined && anyRunning) {
      outcome.changed.push(file.path);
      continue;
    }
    await transport.writeFile(file);
    outcome.written.push(file.path);
  }
  for (const [i, unit] of units.entries()) {
    const name = unit.unit.unitFor(unit.instance);
    if (running[i]) {
      outcome.alreadyRunning.push(name);
      continue;
    }
    await transport.start(unit);
    outcome.started.push(name);
  }
  return outcome;
}

export function outcomeLines(o: HostOutcome): string[] {
  const did: string[] = [];
  if (o.installed.length > 0) did.push(`installed ${o.installed.join(', ')}`);
  if (o.written.length > 0) did.push(`wrote ${o.written.length} file(s)`);
  if (o.started.length > 0) did.push(`started ${o.started.join(', ')}`);
  const lines = [`${o.host} (${o.transport}): ${did.length > 0 ? did.join('; ') : `installed and running (${o.alreadyRunning.join(', ')}): left alone`}`];
  for (const v of o.otherVersion) lines.push(`  note: has ${v}; left as it is (upgrades: docs/upgrade.md)`);
  for (const c of o.changed) lines.push(`  changed: ${c} differs from what the topology gives; not applied while the host runs (write it and restart the unit to apply)`);
  return lines;
}
