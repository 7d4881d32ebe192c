// Harness of the grow/shrink job tests: a LocalStore with four hosts registered as both
// storage and computer machines, recording fake agents (fail where told), every cluster
// job family registered, and a helper that builds a ready cluster through create_cluster.

import { AgentUnreachableError } from '@kcm/agent-api';
import type { AsyncJobType } from '@kcm/protocol';
import { silentLogger } from '@kcm/common';
import { KcmError, parseRequest, type ValidRequest } from '@kcm/protocol';
import { updateInstanceCgroup } from '../../src/jobs/cgroup';
import { createCluster, deleteCluster } from '../../src/jobs/cluster';
import { addComps, deleteComp } from '../../src/jobs/comps';
import type { WithAgent } from '@kcm/agent-api';
import type { EngineAgents } from '../../src/jobs/instance-ops';
import { addNodes, deleteNodes, rebuildNode } from '../../src/jobs/nodes';
import { registryOf } from '../../src/jobs/registry';
import type { JobDefinition } from '../../src/jobs/workflow';
import { JobRunner } from '../../src/jobs/runner';
import { addShards, deleteShardsJob } from '../../src/jobs/shards';
import { ManagerService } from '../../src/manager-service';
import { CommandKind } from '../../src/meta/commands';
import { LocalStore, until } from '../helpers/local-store';
import { stepServices } from '../helpers/step-services';

export const HOSTS = ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'];
export const AGENT_PORT = 58100;

export interface Call {
  host: string;
  method: string;
  request: any;
}

export interface Failure {
  method: string;
  host: string;
  /** The host's agent dies at this call (as if SIGKILLed): this and every later call to it is unreachable until revived. */
  kill?: boolean;
}

/**
 * Agents that succeed (or fail where told) and record what they were asked, in order.
 * `down` holds the hosts whose agent does not answer (AgentUnreachableError).
 */
export function recordingAgents(failures: Failure[], down = new Set<string>(), tablesAt: (host: string, port: number) => string[] = () => []) {
  const calls: Call[] = [];
  const record = (host: string, method: string, request: any, reply: unknown) => {
    calls.push({ host, method, request });
    const failure = failures.find((f) => f.method === method && f.host === host);
    if (failure?.kill) down.add(host);
    if (down.has(host)) return Promise.reject(new AgentUnreachableError(`${host}:${AGENT_PORT}`, new Error('connect ECONNREFUSED')));
    if (failure) return Promise.reject(new Error(`${method} failed on ${host}`));
    return Promise.resolve(reply);
  };
  const copyReply = (r: any) => ({ source_hostaddr: r.sources[0]?.hostaddr ?? '', source_port: r.sources[0]?.port ?? 0, gtid_pos: '0-1-5', bytes: 1000, transfer_ms: 10, kept_old_data: '', pid: 300 });
  const agents = {
    agentAddress: (host: string) => `${host}:${AGENT_PORT}`,
    mariadb: (host: string) => ({
      install: (r: any) => record(host, 'mariadb.install', r, { pid: 100 }),
      configureReplication: (r: any) => record(host, 'mariadb.replication', r, {}),
      seedStandby: (r: any) => record(host, 'mariadb.seed', r, copyReply(r)),
      rebuildStandby: (r: any) => record(host, 'mariadb.rebuild', r, copyReply(r)),
      remove: (op: string, port: number) => record(host, 'mariadb.remove', { op, port }, {}),
      probe: (port: number) => record(host, 'mariadb.probe', { port }, { pid: 100, state: 'online' }),
      listTables: (port: number) => record(host, 'mariadb.listTables', { port }, { tables: tablesAt(host, port) }),
    }),
    postgres: (host: string) => ({
      install: (r: any) => record(host, 'pg.install', r, { pid: 200 }),
      remove: (op: string, port: number, compDatadir?: string) => record(host, 'pg.remove', { op, port, compDatadir }, {}),
      probe: (port: number) => record(host, 'pg.probe', { port }, { pid: 200, installed: true }),
      syncCatalog: (op: string, port: number, shards: unknown[]) => record(host, 'pg.sync', { op, port, shards }, { changes: [], servers_changed: [], foreign_tables: 0, elapsed_ms: 1 }),
    }),
    cgroup: (host: string) => ({
      setCpuLimit: (op: string, p: any) => record(host, 'cgroup.set', { op, ...p }, { version: 'v2', cgroup_path: `/sys/fs/cgroup/kcm/${p.kind}-${host}-${p.port}`, written: [], pids: [p.pid] }),
      removeCpuLimit: (op: string, port: number, kind: string) => record(host, 'cgroup.remove', { op, port, kind }, {}),
    }),
  };
  return { agents: agents as unknown as EngineAgents, calls };
}

export function request(jobType: string, paras: Record<string, unknown>): ValidRequest {
  const parsed = parseRequest({ version: '1.0', job_type: jobType, timestamp: '1700000000', user_name: 't', paras });
  if (!parsed.ok) throw parsed.error;
  return parsed.request;
}

export const createParas = (change: Record<string, unknown> = {}) => ({
  nick_name: 'shop', ha_mode: 'rbr', shards: '2', nodes: '3', comps: '2', max_storage_size: '1', max_connections: '100', cpu_cores: '2',
  cpu_limit_node: 'quota', innodb_size: '64', rocksdb_block_cache_size_M: '0', fullsync_level: '1', storage_iplists: HOSTS.slice(0, 3), computer_iplists: [], ...change,
});

export interface HarnessOptions {
  failures?: Failure[];
  /** Tables each shard's master reports (delete_shards), by shard id. */
  tables?: Record<string, string[]>;
  /** More job definitions to register (families tested beside the cluster jobs). */
  extraJobs?: Partial<Record<AsyncJobType, JobDefinition>>;
}

export async function startHarness(options: HarnessOptions = {}) {
  const store = new LocalStore();
  // Room for the quota nodes of 2 cores the tests put on each storage machine (placement sums quotas).
  for (const h of HOSTS) {
    for (const [machineType, low] of [['storage', 5000], ['computer', 6000]] as const) {
      await store.propose({
        kind: CommandKind.MachineRegistered, at: 0, hostaddr: h, machineType, portLow: low, portHigh: low + 19, rackId: 'r', datadir: '/d', logdir: '/l',
        walLogDir: '/w', compDatadir: '/c', totalMemMb: 65536, totalCpuCores: machineType === 'storage' ? 16 : 4, facts: null,
      });
    }
  }
  const failures: Failure[] = [];
  const down = new Set<string>();
  // The tables a shard holds, as its master's agent reports them.
  const tablesAt = (host: string, port: number) => {
    const shards = Object.values(store.s.clusters).flatMap((c) => Object.values(c.shards));
    const shard = shards.find((s) => s.nodes[s.masterNodeId]?.hostaddr === host && s.nodes[s.masterNodeId]?.port === port);
    return (shard && options.tables?.[shard.id]) ?? [];
  };
  const { agents, calls } = recordingAgents(failures, down, tablesAt);
  const registry = registryOf({
    create_cluster: createCluster,
    delete_cluster: deleteCluster,
    add_shards: addShards,
    delete_shards: deleteShardsJob(),
    add_comps: addComps,
    delete_comp: deleteComp,
    add_nodes: addNodes,
    delete_nodes: deleteNodes,
    rebuild_node: rebuildNode,
    update_instance_cgroup: updateInstanceCgroup,
    ...options.extraJobs,
  });
  const runner = new JobRunner(store, registry, stepServices(store, { agents }));
  const service = new ManagerService({ store, registry, queries: new Map(), linearizableRead: async () => {}, onSubmitted: () => runner.notify() });
  runner.start();
  const run = async (jobType: string, paras: Record<string, unknown>) => {
    const { jobId } = await service.submitJob(request(jobType, paras));
    await until(() => ['done', 'failed'].includes(store.s.jobs[jobId].status), 5000);
    return { ...(await service.getStatus(jobId)), jobId };
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
  /** The agent pool's view of the same fake hosts: a down host's health check is unreachable. */
  const withAgent = (<T>(host: string, use: (agent: any) => Promise<T>): Promise<T> =>
    down.has(host) ? Promise.reject(new AgentUnreachableError(`${host}:${AGENT_PORT}`, new Error('connect ECONNREFUSED'))) : use({ health: async () => ({}) })) as WithAgent;
  return { store, calls, runner, run, refusal, readyCluster, failOn, jobCount, agents, down, withAgent };
}

export const methods = (calls: Call[]) => [...new Set(calls.map((c) => c.method))];
