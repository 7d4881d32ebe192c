// topology.yaml: everything `kcm deploy` needs to know about a deployment, in one file the
// operator keeps under version control. Parsed strictly: an unknown or misspelt key is an
// error naming it (`agents[1].rack_id is not a topology key`), never silently ignored,
// because a key ignored here is a setting the operator believes is in force.

import { isIP } from 'node:net';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { z } from 'zod';

export const DEFAULT_HTTP_PORT = 58000;
export const DEFAULT_AGENT_PORT = 58100;
export const DEFAULT_MANAGER_DATA_DIR = '/var/lib/kcm/manager';
export const DEFAULT_AGENT_DATA_DIR = '/var/lib/kcm/data';
export const DEFAULT_STORAGE_PORT_RANGE = '57000-58000';
export const DEFAULT_COMPUTER_PORT_RANGE = '56000-56999';

/** A host as a manager's member name or an agent's hostaddr: an IP address or a DNS name. */
const hostName = z
  .string()
  .min(1)
  .refine((h) => isIP(h) !== 0 || /^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*$/.test(h), {
    message: 'must be an IP address or a host name',
  });
const port = z.number().int().min(1024).max(65534);
const absolutePath = z.string().refine((p) => path.isAbsolute(p) && path.normalize(p) === p.replace(/\/+$/, '') , { message: 'must be an absolute, normalised path' });
const portRange = z.string().regex(/^\d{4,5}-\d{4,5}$/, 'must be <low>-<high>, e.g. 57000-58000');

/** How `kcm deploy` reaches a host: `ssh` (ssh/scp, sudo dpkg -i, systemctl) or `local-root` (a directory on this machine standing for the host's /). */
export const TRANSPORTS = ['ssh', 'local-root'] as const;
export type TransportKind = (typeof TRANSPORTS)[number];

const hostFields = {
  host: hostName,
  /** local-root only: the directory that stands for this host's / (packages unpacked, configs written and daemons started under it). */
  root: absolutePath.optional(),
  /** ssh only: the login (default: global.ssh_user, then the current user). */
  ssh_user: z.string().regex(/^[a-z_][a-z0-9_-]*$/, 'must be a user name').optional(),
};

const managerSchema = z.strictObject({
  ...hostFields,
  /** The gateway's port (HTTPS Emit and console); Raft listens on port + 1. */
  port: port.default(DEFAULT_HTTP_PORT),
  data_dir: absolutePath.default(DEFAULT_MANAGER_DATA_DIR),
  /**
   * Start empty and wait to be added to the running group by raft_mission add_peer (what
   * `kcm member replace` does), instead of bootstrapping the group with the other entries.
   */
  join: z.boolean().default(false),
});

const agentSchema = z.strictObject({
  ...hostFields,
  /** Every agent listens on the managers' agentPort: given here only to say so (it must equal global.agent_port). */
  port: port.optional(),
  machine_types: z.array(z.enum(['storage', 'computer'])).min(1).default(['storage', 'computer']),
  /** Under it: storage_datadir, storage_logdir, storage_waldir, server_datadir (create_machine's directories). */
  data_dir: absolutePath.default(DEFAULT_AGENT_DATA_DIR),
  rack: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 letters, digits, _ . -').default('1'),
  /** create_machine's total_cpu_cores and total_mem (MB): what placement may use on this host. */
  cores: z.number().int().min(1),
  memory_mb: z.number().int().min(128),
  storage_port_range: portRange.default(DEFAULT_STORAGE_PORT_RANGE),
  computer_port_range: portRange.default(DEFAULT_COMPUTER_PORT_RANGE),
});

const globalSchema = z.strictObject({
  /**
   * On the deploying machine (relative paths: to the topology file): the CA and its key, the
   * admin token, the secrets key's master copy and the generated files. Never copied to a
   * server except ca.pem (and each host's own certificate, key and configs).
   */
  deploy_dir: z.string().min(1),
  /** Where the kcm-manager, kcm-agent and kcm-cli .deb files are (relative: to the topology file). */
  packages_dir: z.string().min(1),
  transport: z.enum(TRANSPORTS).default('ssh'),
  ssh_user: z.string().regex(/^[a-z_][a-z0-9_-]*$/, 'must be a user name').optional(),
  agent_port: port.default(DEFAULT_AGENT_PORT),
  /** Serve Emit and the console over plain HTTP instead of HTTPS (the managers' plainHttp). Only on an isolated network. */
  plain_http: z.boolean().default(false),
  /** The CLI context `kcm deploy` writes (default: the topology's name). */
  context: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/).optional(),
});

export const topologySchema = z.strictObject({
  /** Names the deployment: the CA's subject, the CLI context, the admin token's name. */
  name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,39}$/, 'must be 1-40 lowercase letters, digits and -, starting with a letter or digit'),
  global: globalSchema,
  managers: z.array(managerSchema).min(1, 'must list at least one manager'),
  agents: z.array(agentSchema).default([]),
});

export type TopologyFile = z.infer<typeof topologySchema>;
export type ManagerEntry = TopologyFile['managers'][number];
export type AgentEntry = TopologyFile['agents'][number];

/** A topology that cannot be deployed; `key` names the offending key (`agents[1].host`), `line` where it is when known. */
export class TopologyFileError extends Error {
  constructor(
    readonly key: string,
    readonly problem: string,
    readonly line?: number,
  ) {
    super(`${key}${line !== undefined ? ` (line ${line})` : ''}: ${problem}`);
    this.name = 'TopologyFileError';
  }
}

/** `agents[1].host` from zod's path ['agents', 1, 'host']. */
export function keyName(keyPath: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const part of keyPath) out += typeof part === 'number' ? `[${part}]` : `${out === '' ? '' : '.'}${String(part)}`;
  return out === '' ? '(top level)' : out;
}

function describeIssue(issue: z.core.$ZodIssue): { key: string; problem: string } {
  if (issue.code === 'unrecognized_keys') {
    const base = keyName(issue.path);
    const keys = issue.keys.map((k) => (base === '(top level)' ? k : `${base}.${k}`));
    return { key: keys[0], problem: `${keys.length > 1 ? `${keys.join(', ')} are not topology keys` : 'is not a topology key'}` };
  }
  if (issue.code === 'invalid_type' && issue.input === undefined) return { key: keyName(issue.path), problem: 'is required' };
  return { key: keyName(issue.path), problem: issue.message };
}

/** Checks across entries that a schema cannot say: duplicates and the transport's own keys. */
function checkConsistency(t: TopologyFile): TopologyFileError | undefined {
  const seenMembers = new Map<string, number>();
  for (const [i, m] of t.managers.entries()) {
    const member = `${m.host}:${m.port}`;
    if (seenMembers.has(member)) return new TopologyFileError(`managers[${i}].host`, `${member} is already managers[${seenMembers.get(member)}]`);
    seenMembers.set(member, i);
  }
  const seenAgents = new Map<string, number>();
  for (const [i, a] of t.agents.entries()) {
    if (seenAgents.has(a.host)) return new TopologyFileError(`agents[${i}].host`, `${a.host} is already agents[${seenAgents.get(a.host)}] (one agent per host)`);
    seenAgents.set(a.host, i);
    if (a.port !== undefined && a.port !== t.global.agent_port) {
      return new TopologyFileError(`agents[${i}].port`, `every agent listens on the managers' agent port, global.agent_port (${t.global.agent_port}); got ${a.port}`);
    }
    for (const key of ['storage_port_range', 'computer_port_range'] as const) {
      const [low, high] = a[key].split('-').map(Number);
      if (low > high || high > 65535) return new TopologyFileError(`agents[${i}].${key}`, `${a[key]} is not a range of ports`);
    }
  }
  const roots = new Map<string, string>();
  const entries: Array<[string, ManagerEntry | AgentEntry]> = [...t.managers.map((m, i): [string, ManagerEntry] => [`managers[${i}]`, m]), ...t.agents.map((a, i): [string, AgentEntry] => [`agents[${i}]`, a])];
  for (const [key, entry] of entries) {
    if (t.global.transport === 'local-root') {
      if (entry.root === undefined) return new TopologyFileError(`${key}.root`, 'is required with global.transport local-root (the directory standing for this host\'s /)');
      // A manager and an agent on one host share its root, as they would share its /.
      const owner = roots.get(entry.root);
      if (owner !== undefined && owner !== entry.host) return new TopologyFileError(`${key}.root`, `${entry.root} is already the root of host ${owner}`);
      roots.set(entry.root, entry.host);
    } else if (entry.root !== undefined) {
      return new TopologyFileError(`${key}.root`, 'is only for global.transport local-root');
    }
  }
  return undefined;
}

/** The line of a key in the YAML text, for the error message; undefined when it is not in the text (a missing key). */
function lineOf(doc: ReturnType<typeof parseDocument>, text: string, key: string): number | undefined {
  const parts = key.match(/[^.[\]]+/g) ?? [];
  const keyPath = parts.map((p) => (/^\d+$/.test(p) ? Number(p) : p));
  for (let n = keyPath.length; n > 0; n--) {
    const node = doc.getIn(keyPath.slice(0, n), true) as { range?: [number, number, number] } | undefined;
    if (node?.range) return text.slice(0, node.range[0]).split('\n').length;
  }
  return undefined;
}

/**
 * Parses topology YAML text. Relative deploy_dir and packages_dir are resolved against
 * baseDir (the topology file's directory), so the file means the same from any shell.
 */
export function parseTopology(text: string, baseDir: string): TopologyFile {
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) {
    const first = doc.errors[0];
    throw new TopologyFileError('(yaml)', first.message.split('\n')[0], first.linePos?.[0]?.line);
  }
  const parsed = topologySchema.safeParse(doc.toJS());
  if (!parsed.success) {
    // A misspelt key is the cause when it also leaves a required one missing (core: for cores:): name it first.
    const issues = parsed.error.issues;
    const { key, problem } = describeIssue(issues.find((i) => i.code === 'unrecognized_keys') ?? issues[0]);
    throw new TopologyFileError(key, problem, lineOf(doc, text, key));
  }
  const topology = parsed.data;
  const problem = checkConsistency(topology);
  if (problem) throw new TopologyFileError(problem.key, problem.problem, lineOf(doc, text, problem.key));
  topology.global.deploy_dir = path.resolve(baseDir, topology.global.deploy_dir);
  topology.global.packages_dir = path.resolve(baseDir, topology.global.packages_dir);
  return topology;
}
