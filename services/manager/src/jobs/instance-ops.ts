// Installing, wiring and removing one cluster's instances through the host agents. Shared
// by every job that adds or removes storage or compute nodes, and by their rollbacks.
//
// Each agent command carries an op_id derived from the job and the instance, so a step
// re-run after a crash or a leadership change repeats the same commands and the agent
// answers with the first result instead of acting twice.

import type { Agents, ShardEndpoint } from '@kcm/agent-api';
import { instancesPlacedByJob, type PlacedInstances } from '../meta/clusters';
import { CommandKind, type InstancePlacement } from '../meta/commands';
import type { ClusterRecord, CompRecord, ShardRecord, StorageNodeRecord } from '../meta/state';
import type { StepContext } from './framework/workflow';
import { orThrow } from './framework/errors';
import { liveAccount } from '../secrets/live-accounts';
import type { SecretBox } from '../secrets/secret-box';

/** op_ids allow [A-Za-z0-9_.:-]. */
export const opId = (jobId: string, action: string, instance: string): string => `job:${jobId}:${action}:${instance}`;

export function storageNodes(cluster: ClusterRecord): { shard: ShardRecord; node: StorageNodeRecord }[] {
  return Object.values(cluster.shards).flatMap((shard) => Object.values(shard.nodes).map((node) => ({ shard, node })));
}

/**
 * The MariaDB instance spec of a storage node: its place plus the cluster's create_cluster
 * options, and the engine version it runs: the cluster's current one unless named ('': the
 * agent's default, for clusters created before engines were versioned).
 */
export function instanceSpec(cluster: ClusterRecord, node: StorageNodeRecord, engineVersion = cluster.options.storageVersion ?? '') {
  const o = cluster.options;
  return {
    port: node.port,
    datadir: node.datadir,
    logdir: node.logdir,
    wal_log_dir: node.walLogDir,
    server_id: node.serverId,
    innodb_size_mb: o.innodbSizeMb,
    max_connections: o.maxConnections,
    dbcfg: o.dbcfg,
    fullsync_level: o.fullsyncLevel,
    engine_version: engineVersion,
  };
}

/** mariadb-install-db, my.cnf, the three accounts, started. The storage account may use every `D_$$_S` database. */
export async function installStorageNode(agents: Agents, secrets: SecretBox, jobId: string, cluster: ClusterRecord, node: StorageNodeRecord, engineVersion?: string): Promise<number> {
  const [admin, replication, storage] = (['admin', 'replication', 'storage'] as const).map((role) => liveAccount(secrets, cluster, role));
  const reply = await agents.mariadb(node.hostaddr).install({
    op_id: opId(jobId, 'install', `node-${node.id}`),
    spec: instanceSpec(cluster, node, engineVersion),
    admin,
    replication,
    storage,
    storage_db_patterns: [],
  });
  return reply.pid;
}

/**
 * The shard's master first (semi-sync master side only there), then every standby in
 * parallel, attached with GTID to the master.
 */
export async function setUpShardReplication(agents: Agents, secrets: SecretBox, jobId: string, cluster: ClusterRecord, shard: ShardRecord): Promise<void> {
  const master = shard.nodes[shard.masterNodeId];
  if (!master) throw new Error(`shard ${shard.id} has no master node ${shard.masterNodeId}`);
  const replication = liveAccount(secrets, cluster, 'replication');
  const level = cluster.options.fullsyncLevel;
  await agents.mariadb(master.hostaddr).configureReplication({
    op_id: opId(jobId, 'master', `node-${master.id}`),
    port: master.port,
    role: 'master',
    master_host: '',
    master_port: 0,
    replication,
    fullsync_level: level,
  });
  const standbys = Object.values(shard.nodes).filter((n) => n.id !== master.id);
  await Promise.all(
    standbys.map((n) =>
      agents.mariadb(n.hostaddr).configureReplication({
        op_id: opId(jobId, 'standby', `node-${n.id}`),
        port: n.port,
        role: 'standby',
        master_host: master.hostaddr,
        master_port: master.port,
        replication,
        fullsync_level: level,
      }),
    ),
  );
}

/** initdb, the computer account, mysql_fdw, started; on the cluster's PostgreSQL version unless `engineVersion` names one. */
export async function installComp(agents: Agents, secrets: SecretBox, jobId: string, cluster: ClusterRecord, comp: CompRecord, engineVersion = cluster.options.computerVersion ?? ''): Promise<number> {
  const computer = liveAccount(secrets, cluster, 'computer');
  const reply = await agents.postgres(comp.hostaddr).install({
    op_id: opId(jobId, 'install', `comp-${comp.id}`),
    comp_datadir: comp.compDatadir,
    port: comp.port,
    user: computer.user,
    password: computer.password,
    variables: { max_connections: String(cluster.options.maxConnections) },
    engine_version: engineVersion,
  });
  return reply.pid;
}

/** Every shard at its current master, reached with the storage account. */
export function shardEndpoints(secrets: SecretBox, cluster: ClusterRecord): ShardEndpoint[] {
  const storage = liveAccount(secrets, cluster, 'storage');
  return Object.values(cluster.shards).flatMap((shard) => {
    const master = shard.nodes[shard.masterNodeId];
    if (!master) return [];
    return [{ shard_id: shard.id, host: master.hostaddr, port: master.port, user: storage.user, password: storage.password }];
  });
}

/**
 * The cluster's cpu_cores and cpu_limit_node on one instance's processes. The instance is
 * named by the pid its agent measures now, not by port alone: the agent's lookup by port
 * ignores the address, and hosts sharing one kernel (loopback test hosts) reuse ports.
 */
export async function applyCpuLimit(agents: Agents, jobId: string, cluster: ClusterRecord, instance: { id: string; hostaddr: string; port: number }, kind: 'mysql' | 'pg'): Promise<void> {
  await setInstanceCpuLimit(agents, opId(jobId, 'cpu', `${kind}-${instance.id}`), instance, kind, { cpuCores: cluster.options.cpuCores, mode: cluster.options.cpuLimitNode });
}

/** `limit` on one instance, named by the pid its agent measures now (see applyCpuLimit). */
export async function setInstanceCpuLimit(
  agents: Agents,
  op: string,
  instance: { hostaddr: string; port: number },
  kind: 'mysql' | 'pg',
  limit: { cpuCores: number; mode: 'quota' | 'share' },
) {
  const pid = kind === 'mysql' ? (await agents.mariadb(instance.hostaddr).probe(instance.port)).pid : (await agents.postgres(instance.hostaddr).probe(instance.port)).pid;
  if (!pid) throw new Error(`the ${kind === 'mysql' ? 'storage' : 'compute'} instance on ${instance.hostaddr}:${instance.port} is not running`);
  return agents.cgroup(instance.hostaddr).setCpuLimit(op, { port: instance.port, kind, pid, cpuCores: limit.cpuCores, mode: limit.mode });
}

/** Stops the instance, deletes its directories and its cgroup. Removing what is not there succeeds. */
export async function removeStorageNode(agents: Agents, jobId: string, node: { id: string; hostaddr: string; port: number }): Promise<void> {
  await agents.mariadb(node.hostaddr).remove(opId(jobId, 'remove', `node-${node.id}`), node.port);
  await agents.cgroup(node.hostaddr).removeCpuLimit(opId(jobId, 'uncpu', `mysql-${node.id}`), node.port, 'mysql');
}

/** `compDatadir` (where it was installed) lets the agent delete a data dir it has no record of. */
export async function removeComp(agents: Agents, jobId: string, comp: { id: string; hostaddr: string; port: number; compDatadir?: string }): Promise<void> {
  await agents.postgres(comp.hostaddr).remove(opId(jobId, 'remove', `comp-${comp.id}`), comp.port, comp.compDatadir);
  await agents.cgroup(comp.hostaddr).removeCpuLimit(opId(jobId, 'uncpu', `pg-${comp.id}`), comp.port, 'pg');
}

/**
 * Points every listed compute node at the cluster's shards as they are in `cluster` now: a
 * new shard's tables appear, a forgotten shard's foreign tables go (SyncCatalog drops a kcm
 * foreign table whose source is on no listed shard; it leaves the unused foreign server).
 * `action` keeps op_ids of two syncs in one job apart.
 */
export async function syncCompCatalogs(agents: Agents, secrets: SecretBox, jobId: string, action: string, cluster: ClusterRecord, comps: CompRecord[]): Promise<void> {
  const shards = shardEndpoints(secrets, cluster);
  const settled = await Promise.allSettled(comps.map((comp) => agents.postgres(comp.hostaddr).syncCatalog(opId(jobId, action, `comp-${comp.id}`), comp.port, shards)));
  const failed = settled.flatMap((s, i) => (s.status === 'rejected' ? [`${comps[i].name}: ${(s.reason as Error).message}`] : []));
  // The first failure is the cause: its agent error names the job's (stepFailureOf).
  const first = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (first) throw new Error(`catalog sync failed on ${failed.join('; ')}`, { cause: first.reason });
}

/**
 * The placement step of a job that grows a cluster: commits InstancesPlaced once. A re-run
 * (after a crash between the commit and the step's own) finds what the job placed, by the
 * records' placedByJob tag, instead of planning again. `plan` runs in the job's placement
 * turn (StepContext.placeInTurn), so it sees every placement committed before it.
 */
export async function placeOnce(
  ctx: Pick<StepContext, 'propose' | 'now' | 'placeInTurn'>,
  cluster: ClusterRecord,
  jobId: string,
  plan: () => InstancePlacement,
): Promise<PlacedInstances> {
  const earlier = instancesPlacedByJob(cluster, jobId);
  if (earlier.shardIds.length + earlier.nodeIds.length + earlier.compIds.length > 0) return earlier;
  return ctx.placeInTurn(async () => {
    const outcome = await ctx.propose({ kind: CommandKind.InstancesPlaced, at: ctx.now(), clusterId: cluster.id, jobId, placement: plan() });
    return orThrow(outcome) as PlacedInstances;
  });
}

/** Where an instance that is being taken out of a cluster ran; kept in the job's step output. */
export interface RemovedInstance {
  id: string;
  hostaddr: string;
  port: number;
}
