// What a local deployment is made of, computed without touching anything: which address and
// directory each manager and agent gets, the manager's config file and the argv of every
// process: managers on 127.0.1.x, agents on 127.0.2.x (all of 127.0.0.0/8 routes to
// loopback on Linux, so each address is a simulated host).

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { isIP } from 'node:net';
import { secretsKeyPath } from './secrets-key';
import { machineParasOf, managerConfig as deployManagerConfig } from '../deploy/host-plan';
import { DEFAULT_COMPUTER_PORT_RANGE, DEFAULT_STORAGE_PORT_RANGE, type TopologyFile } from '../deploy/topology-file';

export interface TopologyOptions {
  /** Absolute deployment directory: configs, data, logs and local.json live under it. */
  dir: string;
  managers: number;
  hosts: number;
  /** First three octets of the manager addresses, e.g. "127.0.1". */
  managerNet: string;
  /** First three octets of the agent addresses, e.g. "127.0.2". */
  agentNet: string;
  /** Last octet of the first manager and of the first agent; the others follow. */
  first: number;
  /** Every manager's HTTP port; its Raft transport listens on httpPort + 1. */
  httpPort: number;
  /** Every agent's gRPC port (the managers' agentPort). */
  agentPort: number;
}

export const DEFAULT_TOPOLOGY: Omit<TopologyOptions, 'dir'> = {
  managers: 3,
  hosts: 3,
  managerNet: '127.0.1',
  agentNet: '127.0.2',
  first: 1,
  httpPort: 58000,
  agentPort: 58100,
};

export interface ManagerPlan {
  /** 1-based, names the directory manager-<index>. */
  index: number;
  host: string;
  /** `<host>:<httpPort>`: the member's identity in the Raft group. */
  member: string;
  url: string;
  /** The ports this manager binds: HTTP and Raft. */
  ports: number[];
  dir: string;
  configPath: string;
  dataDir: string;
  logPath: string;
  /** Its mutual-TLS files under <dir>/tls (certificates.ts issues them). */
  tls: TlsPaths;
}

export interface AgentPlan {
  index: number;
  hostaddr: string;
  port: number;
  dir: string;
  stateDir: string;
  logPath: string;
  /** create_machine paras pointing every instance directory of this host under dir. */
  machineFile: string;
  tls: TlsPaths;
}

export interface TlsPaths {
  ca: string;
  cert: string;
  key: string;
}

/** The local deployment's CA bundle: what a client trusts for the managers' HTTPS. */
export function localCaFile(dir: string): string {
  return path.join(dir, 'tls', 'ca.pem');
}

/** The local CA's PEM, or undefined when dir has none (no `kcm local up` made it). */
export function readLocalCa(dir: string): Buffer | undefined {
  try {
    return readFileSync(localCaFile(dir));
  } catch {
    return undefined;
  }
}

/** Where `kcm local up` keeps the CA (tls/ca.pem, ca.key) and each process's certificate. */
export function tlsPathsOf(dir: string, name: string): TlsPaths {
  return { ca: localCaFile(dir), cert: path.join(dir, 'tls', 'certs', `${name}.pem`), key: path.join(dir, 'tls', 'certs', `${name}.key`) };
}

export interface Topology {
  dir: string;
  options: TopologyOptions;
  managers: ManagerPlan[];
  agents: AgentPlan[];
}

/** Thrown for options that cannot make a deployment; the CLI reports it as a usage error. */
export class TopologyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TopologyError';
  }
}

function checkNet(net: string, flag: string): void {
  if (isIP(`${net}.1`) !== 4 || net.split('.').length !== 3) throw new TopologyError(`--${flag} must be three octets such as 127.0.1, got "${net}"`);
  if (!net.startsWith('127.')) throw new TopologyError(`--${flag} must be a loopback network (127.x.y), got "${net}"`);
}

function checkPort(port: number, flag: string, room = 0): void {
  if (!Number.isInteger(port) || port < 1024 || port + room > 65535) {
    throw new TopologyError(`--${flag} must be a port in 1024..${65535 - room}, got ${port}`);
  }
}

export function planTopology(options: TopologyOptions): Topology {
  if (!path.isAbsolute(options.dir)) throw new TopologyError(`the deployment directory must be absolute, got "${options.dir}"`);
  if (!Number.isInteger(options.managers) || options.managers < 1) throw new TopologyError(`--managers must be an integer >= 1, got ${options.managers}`);
  if (!Number.isInteger(options.hosts) || options.hosts < 0) throw new TopologyError(`--hosts must be an integer >= 0, got ${options.hosts}`);
  checkNet(options.managerNet, 'manager-net');
  checkNet(options.agentNet, 'agent-net');
  const last = options.first + Math.max(options.managers, options.hosts) - 1;
  if (!Number.isInteger(options.first) || options.first < 1 || last > 254) {
    throw new TopologyError(`--first ${options.first} with ${Math.max(options.managers, options.hosts)} addresses runs past .254`);
  }
  checkPort(options.httpPort, 'http-port', 1);
  checkPort(options.agentPort, 'agent-port');
  if (options.managerNet === options.agentNet && options.hosts > 0) {
    throw new TopologyError('--manager-net and --agent-net must differ (a host address is one simulated machine)');
  }

  const managers: ManagerPlan[] = [];
  for (let index = 1; index <= options.managers; index++) {
    const host = `${options.managerNet}.${options.first + index - 1}`;
    const dir = path.join(options.dir, `manager-${index}`);
    managers.push({
      index,
      host,
      member: `${host}:${options.httpPort}`,
      // HTTPS with the member's own certificate, as in a real deployment (the CA: <dir>/tls/ca.pem).
      url: `https://${host}:${options.httpPort}`,
      ports: [options.httpPort, options.httpPort + 1],
      dir,
      configPath: path.join(dir, 'config.json'),
      dataDir: path.join(dir, 'data'),
      logPath: path.join(dir, 'manager.log'),
      tls: tlsPathsOf(options.dir, `manager-${index}`),
    });
  }
  const agents: AgentPlan[] = [];
  for (let index = 1; index <= options.hosts; index++) {
    const dir = path.join(options.dir, `agent-${index}`);
    agents.push({
      index,
      hostaddr: `${options.agentNet}.${options.first + index - 1}`,
      port: options.agentPort,
      dir,
      stateDir: path.join(dir, 'state'),
      logPath: path.join(dir, 'agent.log'),
      machineFile: path.join(dir, 'create_machine.json'),
      tls: tlsPathsOf(options.dir, `agent-${index}`),
    });
  }
  return { dir: options.dir, options, managers, agents };
}

/**
 * The local deployment as kcm deploy's topology object (issue 34: `kcm local up` is the
 * deploy path on loopback): the managers' configs and the agents' create_machine paras come
 * from the same functions as a real deployment's (deploy/host-plan.ts). What still differs
 * is how files are placed and processes started: one directory for the whole group instead
 * of a root per host, and the repository's sources through tsx instead of the packages.
 */
export function localTopologyFile(topology: Topology): TopologyFile {
  return {
    name: 'local',
    global: {
      deploy_dir: topology.dir,
      // No packages: the services run from the repository's sources (managerArgv, agentArgv).
      packages_dir: '',
      transport: 'local-root',
      agent_port: topology.options.agentPort,
      plain_http: false,
    },
    managers: topology.managers.map((m) => ({ host: m.host, port: topology.options.httpPort, data_dir: m.dataDir, join: false })),
    agents: topology.agents.map(localAgentEntry),
  };
}

/** A local agent as a topology entry: both machine types, its instances under its own directory (so `down --purge` removes them). */
function localAgentEntry(agent: AgentPlan): TopologyFile['agents'][number] {
  return {
    host: agent.hostaddr,
    machine_types: ['storage', 'computer'],
    data_dir: path.join(agent.dir, 'instances'),
    rack: '1',
    cores: 2,
    memory_mb: 2048,
    storage_port_range: DEFAULT_STORAGE_PORT_RANGE,
    computer_port_range: DEFAULT_COMPUTER_PORT_RANGE,
  };
}

/** The manager's config.json for a member of a new local group: kcm deploy's, with the local files. */
export function managerConfig(topology: Topology, manager: ManagerPlan, adminTokenSha256: string): Record<string, unknown> {
  const local = localTopologyFile(topology);
  return deployManagerConfig(local, local.managers[manager.index - 1], adminTokenSha256, { dataDir: manager.dataDir, secretsKeyFile: secretsKeyPath(topology.dir), tls: manager.tls });
}

/**
 * create_machine paras for one agent's host as a storage machine (kcm deploy's, for the
 * local entry): its instances' data, logs and WAL under the deployment directory, so
 * `kcm local down` finds their pid files and `--purge` removes them.
 */
export function machineParas(agent: AgentPlan): Record<string, string> {
  return machineParasOf(localAgentEntry(agent), (p) => p).find((paras) => paras.machine_type === 'storage')!;
}

/**
 * How a service is started: one node process with tsx's loader (`node --import tsx`) rather
 * than the `tsx` CLI, which forks a second node process. The pid we record is then the
 * server itself, and its /proc/<pid>/cmdline is exactly this argv.
 */
export function serviceArgv(nodePath: string, entry: string, args: string[]): string[] {
  return [nodePath, '--import', 'tsx', entry, ...args];
}

export function managerArgv(nodePath: string, repoRoot: string, manager: ManagerPlan): string[] {
  return serviceArgv(nodePath, path.join(repoRoot, 'services/manager/src/main.ts'), ['--config', manager.configPath]);
}

export function agentArgv(nodePath: string, repoRoot: string, agent: AgentPlan): string[] {
  return serviceArgv(nodePath, path.join(repoRoot, 'services/agent/src/main.ts'), [
    '--host',
    agent.hostaddr,
    '--port',
    String(agent.port),
    '--state-dir',
    agent.stateDir,
    '--tls-ca',
    agent.tls.ca,
    '--tls-cert',
    agent.tls.cert,
    '--tls-key',
    agent.tls.key,
  ]);
}
