// What each host of a topology gets, computed without touching anything: its packages, its
// units, and every file kcm deploy writes there (path on the host, bytes, mode, owner). The
// same plan serves both transports; only `onHost` differs: over ssh a path is the path, in
// a local-root deployment it is under the host's root (and so is every path a config names).

import path from 'node:path';
import type { AgentEntry, ManagerEntry, TopologyFile } from './topology-file';
import type { InstalledUnits, PackageName } from './package-units';

export interface HostFile {
  /** The path as the host sees it (under its root for local-root). */
  path: string;
  content: Buffer;
  mode: number;
  /** kcm: the manager runs as the kcm user (the package creates it); root: the agent runs as root. */
  owner: 'root' | 'kcm';
}

/** A directory made before the daemons start (parents too), e.g. an agent's data_dir. */
export interface HostDirectory {
  path: string;
  /** An agent's data_dir 0755 (the engines run as mysql and postgres and pass through it); a manager's data_dir 0700. */
  mode: number;
  /** The manager runs as kcm and must own its data directory; ignored by local-root (no kcm user there). */
  owner: 'root' | 'kcm';
}

export interface ManagerRole {
  kind: 'manager';
  entry: ManagerEntry;
  /** `<host>:<port>`: the member's name in the Raft group. */
  member: string;
  url: string;
  /** The systemd unit started for it, e.g. kcm-manager@m1.service. */
  unit: string;
  instance: string;
}

export interface AgentRole {
  kind: 'agent';
  entry: AgentEntry;
  unit: string;
  instance: string;
  /** create_machine paras, one per machine type of the host. */
  machines: Array<Record<string, string>>;
}

export interface HostPlan {
  host: string;
  /** local-root: the directory that stands for the host's /. */
  root?: string;
  sshUser?: string;
  packages: PackageName[];
  roles: Array<ManagerRole | AgentRole>;
  directories: HostDirectory[];
  files: HostFile[];
}

/** The deployment's generated secrets, as bytes (credentials.ts makes and keeps them on the deploying machine). */
export interface Credentials {
  caPem: Buffer;
  certificate(role: 'manager' | 'agent', host: string): { cert: Buffer; key: Buffer };
  secretsKey: Buffer;
  adminTokenSha256: string;
}

/** Where kcm's own files go on every host (the packages' declared configuration directory). */
export const ETC = '/etc/kcm';
export const HOST_PATHS = {
  ca: `${ETC}/tls/ca.pem`,
  managerCert: `${ETC}/tls/manager.pem`,
  managerKey: `${ETC}/tls/manager.key`,
  agentCert: `${ETC}/tls/agent.pem`,
  agentKey: `${ETC}/tls/agent.key`,
  secretsKey: `${ETC}/secrets.key`,
};

export const adminTokenName = (topology: TopologyFile): string => `${topology.name}-admin`;

export function managerMember(entry: ManagerEntry): string {
  return `${entry.host}:${entry.port}`;
}

export function managerUrl(entry: ManagerEntry, plainHttp: boolean): string {
  const host = entry.host.includes(':') ? `[${entry.host}]` : entry.host;
  return `${plainHttp ? 'http' : 'https'}://${host}:${entry.port}`;
}

/** A path on the host as the daemons there must name it: under the root for local-root. */
export function onHostOf(root: string | undefined): (p: string) => string {
  return (p) => (root === undefined ? p : path.join(root, p));
}

/** create_machine paras of an agent's host, one per machine type; directories under its data_dir. */
export function machineParasOf(entry: AgentEntry, onHost: (p: string) => string): Array<Record<string, string>> {
  const dir = onHost(entry.data_dir);
  const shared = {
    hostaddr: entry.host,
    rack_id: entry.rack,
    datadir: path.join(dir, 'storage_datadir'),
    logdir: path.join(dir, 'storage_logdir'),
    wal_log_dir: path.join(dir, 'storage_waldir'),
    comp_datadir: path.join(dir, 'server_datadir'),
    total_mem: String(entry.memory_mb),
    total_cpu_cores: String(entry.cores),
  };
  return entry.machine_types.map((type) => ({ ...shared, machine_type: type, port_range: type === 'storage' ? entry.storage_port_range : entry.computer_port_range }));
}

/** Where a manager's config points: on a host HOST_PATHS (under its root for local-root); in kcm local up, its own layout. */
export interface ManagerFiles {
  dataDir: string;
  secretsKeyFile: string;
  tls: { ca: string; cert: string; key: string };
}

export function hostManagerFiles(entry: ManagerEntry, onHost: (p: string) => string): ManagerFiles {
  return { dataDir: onHost(entry.data_dir), secretsKeyFile: onHost(HOST_PATHS.secretsKey), tls: { ca: onHost(HOST_PATHS.ca), cert: onHost(HOST_PATHS.managerCert), key: onHost(HOST_PATHS.managerKey) } };
}

/**
 * The manager's config (services/manager/src/config.ts), for kcm deploy and kcm local up
 * alike: HTTPS with the member's own certificate unless global.plain_http.
 */
export function managerConfig(topology: TopologyFile, entry: ManagerEntry, adminTokenSha256: string, files: ManagerFiles): Record<string, unknown> {
  return {
    member: managerMember(entry),
    dataDir: files.dataDir,
    // Seeds a brand-new group only; a joiner (member replace) starts empty and is added by raft_mission.
    ...(entry.join ? { join: true } : { initialMembers: topology.managers.filter((m) => !m.join).map(managerMember) }),
    agentPort: topology.global.agent_port,
    secretsKeyFile: files.secretsKeyFile,
    // The bootstrap admin: only the digest; the token stays on the deploying machine.
    tokens: [{ name: adminTokenName(topology), role: 'admin', sha256: adminTokenSha256 }],
    tls: files.tls,
    ...(topology.global.plain_http ? { plainHttp: true } : {}),
  };
}

/** The agent unit's EnvironmentFile: its address, port and mutual-TLS files. */
export function agentEnvironment(topology: TopologyFile, entry: AgentEntry, onHost: (p: string) => string): string {
  return [
    '# Written by kcm deploy from the topology file; a later kcm deploy reports any difference.',
    `KCM_AGENT_HOST=${entry.host}`,
    `KCM_AGENT_PORT=${topology.global.agent_port}`,
    `KCM_AGENT_TLS_CA=${onHost(HOST_PATHS.ca)}`,
    `KCM_AGENT_TLS_CERT=${onHost(HOST_PATHS.agentCert)}`,
    `KCM_AGENT_TLS_KEY=${onHost(HOST_PATHS.agentKey)}`,
    '',
  ].join('\n');
}

const json = (value: unknown): Buffer => Buffer.from(`${JSON.stringify(value, null, 2)}\n`);

/**
 * Every host of the topology with its roles and files. A host named by a manager and an
 * agent entry is one host (one root, one set of files), as it would be one machine.
 */
export function planHosts(topology: TopologyFile, credentials: Credentials, units: InstalledUnits): HostPlan[] {
  const hosts = new Map<string, HostPlan>();
  const hostOf = (entry: ManagerEntry | AgentEntry): HostPlan => {
    let plan = hosts.get(entry.host);
    if (plan === undefined) {
      plan = { host: entry.host, root: entry.root, sshUser: entry.ssh_user ?? topology.global.ssh_user, packages: [], roles: [], directories: [], files: [] };
      plan.files.push({ path: onHostOf(entry.root)(HOST_PATHS.ca), content: credentials.caPem, mode: 0o644, owner: 'root' });
      hosts.set(entry.host, plan);
    }
    return plan;
  };
  topology.managers.forEach((entry, i) => {
    const plan = hostOf(entry);
    const onHost = onHostOf(plan.root);
    const instance = `m${i + 1}`;
    const { cert, key } = credentials.certificate('manager', entry.host);
    plan.packages.push('kcm-manager');
    // Any data_dir, not only the package's /var/lib/kcm/manager: the manager (user kcm) cannot make one under / itself.
    plan.directories.push({ path: onHost(entry.data_dir), mode: 0o700, owner: 'kcm' });
    plan.roles.push({ kind: 'manager', entry, member: managerMember(entry), url: managerUrl(entry, topology.global.plain_http), unit: units.manager.unitFor(instance), instance });
    plan.files.push(
      { path: onHost(HOST_PATHS.managerCert), content: cert, mode: 0o644, owner: 'kcm' },
      { path: onHost(HOST_PATHS.managerKey), content: key, mode: 0o600, owner: 'kcm' },
      { path: onHost(HOST_PATHS.secretsKey), content: credentials.secretsKey, mode: 0o600, owner: 'kcm' },
      { path: onHost(units.manager.configFile(instance)), content: json(managerConfig(topology, entry, credentials.adminTokenSha256, hostManagerFiles(entry, onHost))), mode: 0o600, owner: 'kcm' },
    );
  });
  for (const entry of topology.agents) {
    const plan = hostOf(entry);
    const onHost = onHostOf(plan.root);
    const { cert, key } = credentials.certificate('agent', entry.host);
    plan.packages.push('kcm-agent');
    plan.roles.push({ kind: 'agent', entry, unit: units.agent.unitFor(''), instance: '', machines: machineParasOf(entry, onHost) });
    // The agent makes the instance directories under it as root; mysql and postgres must be able to pass through.
    plan.directories.push({ path: onHost(entry.data_dir), mode: 0o755, owner: 'root' });
    plan.files.push(
      { path: onHost(HOST_PATHS.agentCert), content: cert, mode: 0o644, owner: 'root' },
      { path: onHost(HOST_PATHS.agentKey), content: key, mode: 0o600, owner: 'root' },
      { path: onHost(units.agent.environmentFile), content: Buffer.from(agentEnvironment(topology, entry, onHost)), mode: 0o600, owner: 'root' },
    );
  }
  return [...hosts.values()];
}
