// Set-up of the real-engine cluster tests: three in-process agents on 127.0.2.1-3 (port
// 58150 unless told), a one-member manager built in-process (buildManager) on 127.0.1.71
// (unless told), all data under one temp folder, a captured log, and a cleanup that kills
// every mariadbd and postgres process started under that folder even when a test failed.

import { chmod, mkdtemp, readdir, readFile, rm, rmdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { createLogger } from '@kcm/common';
import { detectCpuHierarchy, startAgent, type RunningAgent } from '@kcm/agent';
import { AgentPool, type Agents } from '@kcm/agent-api';
import { buildManager, parseManagerConfig, type Manager } from '@kcm/manager';
import { emit, waitForJobEnd } from '../helpers/emit-client';
import { testTokenConfig } from '../helpers/tokens';
import { AgentProcess, sleep } from '../manager/helpers/processes';
import { testSecretsKeyFile } from '../helpers/secrets';
import { useTestTls } from '../helpers/pki';

export const HOSTS = ['127.0.2.1', '127.0.2.2', '127.0.2.3'] as const;
export const AGENT_PORT = 58150;
export const MEMBER = '127.0.1.71:58171';
/**
 * Port ranges of host i. The three test hosts share one kernel, and the agent names an
 * instance's cgroup by kind and port only, so each host gets ports no other host uses.
 */
export const storagePorts = (i: number) => ({ low: 55100 + 20 * i, high: 55119 + 20 * i });
export const computerPorts = (i: number) => ({ low: 55200 + 10 * i, high: 55209 + 10 * i });

/** Where a fixture's processes listen; tests that may run back to back use different ones. */
export interface ClusterFixtureOptions {
  /** Every agent's port (default AGENT_PORT). */
  agentPort?: number;
  /** The manager member's `<host>:<port>` (default MEMBER). */
  member?: string;
  /** Hosts whose agent runs as its own OS process, so that a test can SIGKILL it (default none). */
  processAgentHosts?: readonly string[];
  /** More manager config (e.g. manualSwitchMaxBehindTrx), over the fixture's own. */
  managerConfig?: Record<string, unknown>;
  /** Record every engine-agent call the manager makes in `agentCalls` (evidence that a leader loop had its rounds). */
  recordAgentCalls?: boolean;
  /** In-process agents serve /metrics at the agent port + 2, as kcm-agent does by default (process agents always do). */
  agentMetrics?: boolean;
  /** The manager's clock (buildManager's `clock`), for a test that moves it on. */
  managerClock?: () => number;
}

/** One call the manager made to a host's agent: `api` is the Agents accessor (mariadbHa, postgres...). */
export interface AgentCall {
  host: string;
  api: string;
  method: string;
  at: number;
}

export interface ClusterFixture {
  tmp: string;
  /** The manager member's `<host>:<port>` to send jobs to. */
  member: string;
  agentPort: number;
  manager: Manager;
  /** The in-process agents (hosts not in processAgentHosts). */
  agents: RunningAgent[];
  /** The agents running as their own OS process, by host. */
  processAgents: Map<string, AgentProcess>;
  logLines: string[];
  /** The manager's agent calls, oldest first (empty unless `recordAgentCalls`). */
  agentCalls: AgentCall[];
  /** Directories of host i's machine registration. */
  dirs(i: number): { datadir: string; logdir: string; wal_log_dir: string; comp_datadir: string };
  /** Submits an async job and waits for its end; returns the final get_status reply. */
  runJob(jobType: string, paras: Record<string, unknown>, timeoutMs?: number): Promise<Awaited<ReturnType<typeof waitForJobEnd>>>;
  close(): Promise<void>;
}

export async function startClusterFixture(options: ClusterFixtureOptions = {}): Promise<ClusterFixture> {
  const agentPort = options.agentPort ?? AGENT_PORT;
  const member = options.member ?? MEMBER;
  // Mutual TLS for the in-process manager and agents (process agents get their own certificates).
  useTestTls([...HOSTS, member.slice(0, member.lastIndexOf(':'))]);
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-cl-'));
  await chmod(tmp, 0o755); // mysql and postgres must traverse it to their directories
  const logLines: string[] = [];
  const logger = createLogger({
    name: 'cluster-test',
    level: 'info',
    destination: new Writable({ write: (chunk, _enc, done) => (logLines.push(String(chunk)), done()) }),
  });
  const agents: RunningAgent[] = [];
  const processAgents = new Map<string, AgentProcess>();
  const agentCalls: AgentCall[] = [];
  let manager: Manager | undefined;
  const close = async () => {
    // Each part bounded, and the engines killed whatever happened before: an agent whose
    // stop waited on a call still streaming (a rebuild cut short by a failed test) left
    // mariadbd, postgres and mariabackup holding the fixed test ports for the next files.
    const bounded = (p: Promise<unknown>) => Promise.race([p.catch(() => {}), new Promise((r) => setTimeout(r, 20_000).unref())]);
    try {
      await bounded(manager?.stop() ?? Promise.resolve());
      await bounded(Promise.all(agents.map((a) => a.stop())));
      await bounded(Promise.all([...processAgents.values()].map((a) => a.kill())));
    } finally {
      killAll(await enginePidsUnder(tmp));
    }
    await removeCgroupsOf(HOSTS);
    if (process.env.KCM_TEST_KEEP_DIR) console.log(`kept ${tmp}`);
    else await rm(tmp, { recursive: true, force: true });
  };
  try {
    for (const host of HOSTS) {
      if (options.processAgentHosts?.includes(host)) {
        const agent = new AgentProcess(host, agentPort, path.join(tmp, `agent-${host}`));
        processAgents.set(host, agent);
        agent.start();
        await agent.listeningPid();
        continue;
      }
      agents.push(await startAgent({ hostaddr: host, port: agentPort, logger: logger.child({ agent: host }), stateDir: path.join(tmp, `agent-${host}`), metricsPort: options.agentMetrics ? agentPort + 2 : undefined }));
    }
    const config = parseManagerConfig({ member, dataDir: path.join(tmp, 'manager'), agentPort, tickMs: 50, electionTick: 10, tokens: testTokenConfig(), secretsKeyFile: testSecretsKeyFile(), ...options.managerConfig });
    manager = await buildManager(config, { logger: logger.child({ member }), agents: options.recordAgentCalls ? recordingCalls(new AgentPool(agentPort), agentCalls) : undefined, clock: options.managerClock });
    await manager.listen();
    const deadline = Date.now() + 20_000;
    while (!manager.leadership.isLeader) {
      if (Date.now() > deadline) throw new Error('the one-member manager did not become leader in 20 s');
      await sleep(50);
    }
  } catch (err) {
    await close();
    throw err;
  }
  const dirs = (i: number) => ({
    datadir: path.join(tmp, `h${i}`, 'data'),
    logdir: path.join(tmp, `h${i}`, 'log'),
    wal_log_dir: path.join(tmp, `h${i}`, 'wal'),
    comp_datadir: path.join(tmp, `h${i}`, 'comp'),
  });
  return {
    tmp,
    member,
    agentPort,
    manager,
    agents,
    processAgents,
    logLines,
    agentCalls,
    dirs,
    async runJob(jobType, paras, timeoutMs = 60_000) {
      const ack = await emit(member, jobType, paras);
      return waitForJobEnd([member], ack.job_id, timeoutMs);
    },
    close,
  };
}

/** The pool as the manager uses it, noting each call of a host's client (Agents.mariadbHa(host).replicationStatus...) in `calls`. */
function recordingCalls(pool: AgentPool, calls: AgentCall[]): Agents {
  const perHost = new Set(['mariadb', 'postgres', 'postgresProbe', 'cgroup', 'mariadbHa', 'mariadbRestore', 'passwords', 'hostProbe']);
  return new Proxy(pool, {
    get(target, api, receiver) {
      const value = Reflect.get(target, api, receiver) as unknown;
      if (typeof value !== 'function') return value;
      if (typeof api !== 'string' || !perHost.has(api)) return value.bind(target);
      return (host: string) => {
        const client = value.call(target, host) as object;
        return new Proxy(client, {
          get(c, method) {
            const m = Reflect.get(c, method) as unknown;
            if (typeof m !== 'function') return m;
            return (...args: unknown[]) => {
              calls.push({ host, api, method: String(method), at: Date.now() });
              return m.apply(c, args);
            };
          },
        });
      };
    },
  });
}

async function commOf(pid: string): Promise<string> {
  return (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim();
}

/**
 * mariadbd and postgres processes that belong to `dir`: their command line names a path
 * under it (mariadbd --defaults-file, postgres -D), and postgres children of such a postmaster.
 */
/**
 * Removes the kcm cgroups of instances on these test hosts (named `<kind>-<host>-<port>`),
 * once their processes are gone: a test that ends without delete_cluster would otherwise
 * leave them to the next test on the same hosts and ports, which checks it left none.
 * A cgroup that still holds a process is kept (rmdir refuses it).
 */
export async function removeCgroupsOf(hosts: readonly string[]): Promise<void> {
  const cpu = await detectCpuHierarchy();
  if (!cpu) return;
  const kcm = path.join(cpu.root, 'kcm');
  const names = await readdir(kcm).catch(() => [] as string[]);
  await Promise.all(names.filter((name) => hosts.some((h) => name.includes(`-${h}-`))).map((name) => rmdir(path.join(kcm, name)).catch(() => {})));
}

/** Processes of the engines and their tools that a test's instances run (a backup or rebuild streams through mariabackup). */
const ENGINE_COMMANDS = new Set(['mariadbd', 'postgres', 'mariabackup', 'mariadb-backup', 'mbstream']);

export async function enginePidsUnder(dir: string): Promise<number[]> {
  const leaders = new Set<number>();
  const all: { pid: number; comm: string; ppid: number; cmdline: string }[] = [];
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const comm = await commOf(name);
    if (!ENGINE_COMMANDS.has(comm)) continue;
    const cmdline = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).split('\0').join(' ');
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    all.push({ pid: Number(name), comm, ppid, cmdline });
    if (cmdline.includes(dir)) leaders.add(Number(name));
  }
  return all.filter((p) => leaders.has(p.pid) || leaders.has(p.ppid)).map((p) => p.pid);
}

export function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** Polls `check` until it returns a value (errors count as not yet), or fails naming what was awaited. */
export async function waitUntil<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`${what} not reached in ${timeoutMs} ms${last ? `: ${(last as Error).message}` : ''}`);
}
