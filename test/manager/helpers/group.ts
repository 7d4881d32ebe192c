// A local manager group for tests, soaks and benchmarks: managers on 127.0.1.x, agents on
// 127.0.2.x, data and logs under one temporary folder. Callers pick an address block no
// other test uses (tests may run in parallel) and call stop() in afterAll, even on failure.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { emitRaw, findLeader } from '../../helpers/emit-client';
import { useTestTls } from '../../helpers/pki';
import { AgentProcess, ManagerProcess, ProcessSet, waitFor, type ManagerSpec } from './processes';

/** tsx compiles on every start; on a loaded 2-core machine a member may take 15 s or more. */
export const STARTUP_TIMEOUT_MS = 45_000;

export interface GroupOptions {
  /** Used in the temp folder's name, e.g. 'leader-kill'. */
  name: string;
  /** Manager HTTP addresses `<host>:<port>`; Raft listens on port + 1. */
  members: string[];
  /** Members that join later by raft_mission (`join: true`); the rest seed the group. */
  joiners?: string[];
  agentHosts: string[];
  agentPort: number;
  /** Extra manager config (tickMs, electionTick, ...). */
  managerConfig?: Partial<ManagerSpec>;
  /** Extra config of single members, over managerConfig (e.g. a slower election timer for one). */
  memberConfig?: Record<string, Partial<ManagerSpec>>;
  /** Keep the temp folder after stop() (for reading logs after a failure); also $KCM_TEST_KEEP_DIR. */
  keepDir?: boolean;
}

export class LocalGroup {
  readonly dir: string;
  readonly processes = new ProcessSet();
  readonly managers = new Map<string, ManagerProcess>();
  readonly agents = new Map<string, AgentProcess>();

  constructor(readonly opts: GroupOptions) {
    this.dir = mkdtempSync(path.join(os.tmpdir(), `kcm-${opts.name}-`));
    // The test process calls agents itself too (status probes): as a manager, over mutual TLS.
    useTestTls(['127.0.0.1']);
    const joiners = new Set(opts.joiners ?? []);
    const seeds = opts.members.filter((m) => !joiners.has(m));
    for (const [i, member] of opts.members.entries()) {
      const spec: ManagerSpec = {
        member,
        agentPort: opts.agentPort,
        ...opts.managerConfig,
        ...opts.memberConfig?.[member],
        ...(joiners.has(member) ? { join: true } : { initialMembers: seeds }),
      };
      this.managers.set(member, this.processes.add(new ManagerProcess(spec, path.join(this.dir, `manager-${i + 1}`))));
    }
    for (const host of opts.agentHosts) {
      this.agents.set(host, this.processes.add(new AgentProcess(host, opts.agentPort, path.join(this.dir, `agent-${host}`))));
    }
  }

  manager(member: string): ManagerProcess {
    const m = this.managers.get(member);
    if (!m) throw new Error(`no manager ${member} in this group`);
    return m;
  }

  agent(host: string): AgentProcess {
    const a = this.agents.get(host);
    if (!a) throw new Error(`no agent ${host} in this group`);
    return a;
  }

  /** Members whose process is running and not SIGSTOPped. */
  liveMembers(): string[] {
    return [...this.managers.values()].filter((m) => m.running && !m.stopped).map((m) => m.member);
  }

  /** Starts the given managers (default: all) and every agent, and waits until each answers. */
  async start(members: string[] = this.opts.members): Promise<void> {
    for (const a of this.agents.values()) a.start();
    await Promise.all(members.map((m) => this.startManager(m)));
    await Promise.all([...this.agents.values()].map((a) => a.listeningPid(STARTUP_TIMEOUT_MS)));
  }

  /** Starts (or restarts, on the same data) one manager and waits until its gateway answers. */
  async startManager(member: string): Promise<void> {
    const m = this.manager(member);
    m.start();
    // Any envelope means the gateway is up (NO_LEADER included).
    await waitFor(`${m.name} to answer`, () => emitRaw(member, 'get_meta_mode', {}, { timeoutMs: 2_000 }).then(() => true), STARTUP_TIMEOUT_MS, 250);
  }

  /** Waits until exactly one of `members` (default: the live ones) reports itself leader. */
  async waitForLeader(members?: string[], timeoutMs = 20_000): Promise<string> {
    return waitFor('a leader', () => findLeader(members ?? this.liveMembers()), timeoutMs, 200);
  }

  async stop(): Promise<void> {
    await this.processes.killAll();
    if (this.opts.keepDir || process.env.KCM_TEST_KEEP_DIR) console.log(`kept ${this.dir}`);
    else rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The create_machine paras of the emit fixture, pointed at a host and folders of this test. */
export function createMachineParas(hostaddr: string, baseDir: string, overrides: Record<string, string> = {}): Record<string, string> {
  const dir = (name: string) => path.join(baseDir, hostaddr, name);
  return {
    hostaddr,
    machine_type: 'storage',
    port_range: '57000-58000',
    rack_id: '1',
    datadir: dir('storage_datadir'),
    logdir: dir('storage_logdir'),
    wal_log_dir: dir('storage_waldir'),
    comp_datadir: dir('server_datadir'),
    total_mem: '1024',
    total_cpu_cores: '8',
    ...overrides,
  };
}
