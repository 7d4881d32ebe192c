// A topology file loaded with everything derived from it: the packages and their units, the
// deployment's credentials (made on first use, reused after) and each host's plan and
// transport. Shared by kcm deploy, display, scale-out and member replace.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ensureCredentials, type DeployDirFiles } from './credentials';
import { planHosts, type HostPlan } from './host-plan';
import { LocalRootTransport } from './local-root-transport';
import { findPackages, readPackageUnits, unpackOnce, type DebPackage, type InstalledUnits, type PackageName } from './package-units';
import { SshTransport } from './ssh-transport';
import { parseTopology, TopologyFileError, type TopologyFile } from './topology-file';
import type { HostTransport } from './transport';

export interface Deployment {
  topologyFile: string;
  topology: TopologyFile;
  packages: Map<PackageName, DebPackage>;
  units: InstalledUnits;
  plans: HostPlan[];
  files: DeployDirFiles;
  caPem: Buffer;
  token: string;
}

export function readTopologyFile(file: string): TopologyFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new TopologyFileError(file, `cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  return parseTopology(text, path.dirname(path.resolve(file)));
}

/** Loads the topology and derives the rest; creates the CA, token and keys in deploy_dir when missing. */
export async function loadDeployment(topologyFile: string, topology = readTopologyFile(topologyFile)): Promise<Deployment> {
  const packages = findPackages(topology.global.packages_dir, ['kcm-manager', 'kcm-agent']) as Map<PackageName, DebPackage>;
  const unpackedDir = path.join(topology.global.deploy_dir, 'packages');
  const units = readPackageUnits({ manager: unpackOnce(packages.get('kcm-manager')!, unpackedDir), agent: unpackOnce(packages.get('kcm-agent')!, unpackedDir) });
  const { credentials, files, token } = await ensureCredentials(topology);
  return { topologyFile, topology, packages, units, plans: planHosts(topology, credentials, units), files, caPem: credentials.caPem, token };
}

export function transportOf(topology: TopologyFile, plan: HostPlan): HostTransport {
  if (topology.global.transport === 'local-root') return new LocalRootTransport(plan.root!);
  return new SshTransport(plan.host, plan.sshUser);
}

/** Every manager's URL (https unless plain_http), in topology order. */
export function managerUrls(deployment: Deployment): string[] {
  return deployment.plans.flatMap((p) => p.roles.flatMap((r) => (r.kind === 'manager' ? [r.url] : [])));
}
