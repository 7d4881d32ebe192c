// Harness of the job tests: a real one-member manager built by buildManager (Raft in
// memory, only its job runner running), four hosts registered as both storage and computer
// machines, recording fake agents (fail where told), and a helper that builds a ready
// cluster through create_cluster.

import { afterEach } from 'vitest';
import type { Agents } from '@kcm/agent-api';
import { silentLogger } from '@kcm/common';
import { KcmError, parseRequest, type ValidRequest } from '@kcm/protocol';
import { MemoryStorage } from '@kcm/raft';
import { buildManager, type BuildOptions, type Manager } from '../../src/app';
import { parseManagerConfig } from '../../src/config';
import { CommandKind, type Command } from '../../src/meta/commands';
import type { MetaState } from '../../src/meta/state';
import { until } from '../helpers/local-store';
import { recordingAgents, type Call, type Failure } from '../helpers/recording-agents';
import { soloTransport } from '../helpers/solo-transport';
import { testSecretsKeyFile } from '../../../../test/helpers/secrets';

export type { Call, Failure };

export const HOSTS = ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'];
export const AGENT_PORT = 58100;
/** The harness manager's member name; nothing listens there (soloTransport, no gateway). */
const MEMBER = '127.0.0.1:1';

export function request(jobType: string, paras: Record<string, unknown>): ValidRequest {
  const parsed = parseRequest({ version: '1.0', job_type: jobType, timestamp: '1700000000', user_name: 't', paras });
  if (!parsed.ok) throw parsed.error;
  return parsed.request;
}

export const createParas = (change: Record<string, unknown> = {}) => ({
  nick_name: 'shop', ha_mode: 'rbr', shards: '2', nodes: '3', comps: '2', max_storage_size: '1', max_connections: '100', cpu_cores: '2',
  cpu_limit_node: 'quota', innodb_size: '64', rocksdb_block_cache_size_M: '0', fullsync_level: '1', storage_iplists: HOSTS.slice(0, 3), computer_iplists: [], ...change,
});

// Every harness manager is stopped after its test (stop is idempotent: a test may stop it first).
const started = new Set<Manager>();
afterEach(async () => {
  await Promise.all([...started].map((m) => m.stop()));
  started.clear();
});

export interface HarnessOptions {
  failures?: Failure[];
  /** The machines registered, each as both storage and computer (default HOSTS). */
  hosts?: readonly string[];
  /** Stop the manager after the current test (default true; false for one built in beforeAll: call close()). */
  closeAfterTest?: boolean;
  /** Options of particular jobs (buildManager's `jobs`), e.g. manual_switch's limits. */
  jobs?: BuildOptions['jobs'];
  /** Real agents to use instead of the recording fakes (nothing is then recorded in `calls`). */
  agents?: Agents;
  /** Ports of each machine (default 20). */
  portsPerMachine?: number;
  /** Tables each shard's master reports (delete_shards), by shard id. */
  tables?: Record<string, string[]>;
}

export async function startHarness(options: HarnessOptions = {}) {
  const failures: Failure[] = [...(options.failures ?? [])];
  const down = new Set<string>();
  // The tables a shard holds, as its master's agent reports them (manager is set just below,
  // before any job runs).
  let manager!: Manager;
  const tablesAt = (host: string, port: number) => {
    const shards = Object.values(manager.store.state().clusters).flatMap((c) => Object.values(c.shards));
    const shard = shards.find((s) => s.nodes[s.masterNodeId]?.hostaddr === host && s.nodes[s.masterNodeId]?.port === port);
    return (shard && options.tables?.[shard.id]) ?? [];
  };
  const recording = recordingAgents({ agentPort: AGENT_PORT, failures, down, tablesAt });
  const { calls } = recording;
  const agents = options.agents ?? recording.agents;
  // A real one-member manager (Raft in memory) built like production, running only its job
  // runner: no health probe or catalog sync calls the recording agents behind a test's back.
  const config = parseManagerConfig({ member: MEMBER, dataDir: '/nonexistent/kcm-grow-harness', agentPort: AGENT_PORT, tickMs: 10, electionTick: 10, logLevel: 'silent', secretsKeyFile: testSecretsKeyFile() });
  manager = await buildManager(config, {
    logger: silentLogger(),
    storage: MemoryStorage.bootstrap([MEMBER]),
    transport: soloTransport(),
    agents,
    jobs: options.jobs,
    leaderServices: ['job runner'],
  });
  if (options.closeAfterTest !== false) started.add(manager);
  await until(() => manager.leadership.isLeader, 10_000);
  /**
   * The replicated state and proposals, as job steps see them (`s` reads the current state).
   * `failProposals` makes this view's proposals reject, as a member that lost leadership
   * (the job runner proposes through the manager itself, not through this view).
   */
  const store = {
    failProposals: false,
    get s(): MetaState {
      return manager.store.state();
    },
    state: () => manager.store.state(),
    propose(cmd: Command) {
      return this.failProposals ? Promise.reject(new Error('not leader')) : manager.store.propose(cmd);
    },
  };
  // Room for the quota nodes of 2 cores the tests put on each storage machine (placement sums quotas).
  const portsPerMachine = options.portsPerMachine ?? 20;
  for (const h of options.hosts ?? HOSTS) {
    for (const [machineType, low] of [['storage', 5000], ['computer', 6000]] as const) {
      await store.propose({
        kind: CommandKind.MachineRegistered, at: 0, hostaddr: h, machineType, portLow: low, portHigh: low + portsPerMachine - 1, rackId: 'r', datadir: '/d', logdir: '/l',
        walLogDir: '/w', compDatadir: '/c', totalMemMb: 65536, totalCpuCores: machineType === 'storage' ? 16 : 4, facts: null,
      });
    }
  }
  const { runner, service } = manager;
  const run = async (jobType: string, paras: Record<string, unknown>) => {
    const { jobId } = await service.submitJob(request(jobType, paras));
    await until(() => ['done', 'failed'].includes(store.s.jobs[jobId].status), 10_000);
    return { ...(await service.getStatus(jobId, { identity: { name: 'test-admin', role: 'admin' } })), jobId };
  };
  /** The refusal at submission as [catalog name, message], or undefined when it was accepted. */
  const refusal = (jobType: string, paras: Record<string, unknown>) =>
    service.submitJob(request(jobType, paras)).then(
      () => undefined,
      (e: KcmError) => [e.errorName, e.message],
    );
  /** A ready cluster built by create_cluster (2 shards x 3 nodes on hosts 1-3, 2 comps); calls so far are forgotten. */
  const readyCluster = async (change: Record<string, unknown> = {}) => {
    const status = await run('create_cluster', createParas(change));
    if (status.status !== 'done') throw new Error(`create_cluster failed: ${status.errorInfo}`);
    calls.length = 0;
    return Object.values(store.s.clusters).at(-1)!;
  };
  const failOn = (...f: Failure[]) => failures.push(...f);
  const jobCount = () => store.s.counters.job;
  const { withAgent } = agents;
  /** Stops the manager (runner first); the state stays readable. */
  const close = () => manager.stop();
  return { manager, store, calls, runner, run, refusal, readyCluster, failOn, jobCount, agents, down, withAgent, close };
}

export const methods = (calls: Call[]) => [...new Set(calls.map((c) => c.method))];
