// Job family: clusters (create_cluster, delete_cluster).
//
// create_cluster commits the whole placement first (cluster, shard, node and compute-node
// records, ports, ids, generated accounts) in one command, then builds it on the hosts:
// storage nodes, replication, compute nodes, catalog, cpu limits. A failed step removes
// every instance the job created and returns its ports (rollback); what it cannot remove
// now is recorded and removed when its host's agent answers again (rollback.ts).

import { KcmError, type ComputerStepResult, type CreateClusterResult, type DeleteClusterResult, type ShardStepResult, type ParasOf } from '@kcm/protocol';
import { clusterCreatedByJob } from '../meta/clusters';
import { CommandKind } from '../meta/commands';
import type { ClusterOptions, ClusterRecord, MetaState, RestoreDrillScratch } from '../meta/state';
import { changeableCluster, clusterByReference, clusterOfStep, forEachInstance } from './cluster-lookup';
import { generateClusterAccounts } from './credentials';
import { orThrow } from './framework/errors';
import {
  applyCpuLimit,
  installComp,
  installStorageNode,
  removeComp,
  removeStorageNode,
  setUpShardReplication,
  shardEndpoints,
  storageNodes,
  opId,
} from './instance-ops';
import { previewPorts, removalPlan } from './dry-run';
import { candidatesFor, carryLoad, computeDemand, placeComps, placementReport, placeShards, storageDemand, type ShardPlacement } from './placement';
import { rollBackJob, wholeClusterPlan } from './rollback';
import type { JobOf, JobStep, StepContext } from './framework/workflow';
import { NO_ENGINE_DEFAULTS, prepareEngineOnHosts, recordEngineVersions, recordMeasuredVersions, type EngineVersionDefaults } from './engine-versions';

type CreateParas = ParasOf<'create_cluster'>;
/** cluster_id is always there: resolve() fills it in from cluster_name at submission. */
type DeleteParas = ParasOf<'delete_cluster'> & { cluster_id: string };

interface ClusterPlan {
  shards: ShardPlacement[];
  comps: string[];
}

/** Placement of the whole cluster on the current state; throws the first reason it cannot be made. */
export function planCluster(p: CreateParas, state: MetaState): ClusterPlan {
  const options = optionsOf(p);
  const storage = candidatesFor(state, 'storage', p.storage_iplists, 'storage_iplists', storageDemand(options));
  const shards = placeShards(storage, p.shards, p.nodes, 'storage_iplists');
  const computer = candidatesFor(state, 'computer', p.computer_iplists, 'computer_iplists', computeDemand(options));
  carryLoad(storage, computer);
  return { shards, comps: placeComps(computer, p.comps, 'computer_iplists') };
}

function optionsOf(p: CreateParas, engines: EngineVersionDefaults = NO_ENGINE_DEFAULTS): ClusterOptions {
  return {
    haMode: 'rbr',
    maxStorageSizeGb: p.max_storage_size,
    maxConnections: p.max_connections,
    cpuCores: p.cpu_cores,
    cpuLimitNode: p.cpu_limit_node,
    innodbSizeMb: p.innodb_size,
    rocksdbBlockCacheSizeMb: p.rocksdb_block_cache_size_M,
    dbcfg: p.dbcfg === '1' ? 1 : 0,
    fullsyncLevel: p.fullsync_level,
    // '' = each host's installed build, resolved by 'prepare engines'.
    storageVersion: p.storage_version ?? engines.storage,
    computerVersion: p.computer_version ?? engines.computer,
  };
}

/** Shards whose replicas share a machine (too few machines to spread them). */
export function unspreadShards(cluster: ClusterRecord): string[] {
  return Object.values(cluster.shards)
    .filter((s) => {
      const hosts = Object.values(s.nodes).map((n) => n.hostaddr);
      return new Set(hosts).size < hosts.length;
    })
    .map((s) => s.name);
}

function validateCreate(p: CreateParas, state: MetaState): void {
  if (p.ha_mode === 'mgr') {
    throw KcmError.of('UNSUPPORTED', 'paras.ha_mode: "mgr" is not supported (MariaDB has no group replication); use "rbr"', { field: 'paras.ha_mode' });
  }
  if (p.install_proxysql === '1') {
    throw KcmError.of('UNSUPPORTED', 'paras.install_proxysql: "1" is not supported (ProxySQL is not packaged here); use "0"', { field: 'paras.install_proxysql' });
  }
  if (p.fullsync_level > p.nodes - 1) {
    throw KcmError.of('INVALID_PARAS', `paras.fullsync_level: must be <= nodes - 1 (${p.nodes - 1} standbys), got ${p.fullsync_level}`, { field: 'paras.fullsync_level' });
  }
  if (p.max_connections < 10) {
    throw KcmError.of('INVALID_PARAS', `paras.max_connections: must be >= 10, got ${p.max_connections}`, { field: 'paras.max_connections' });
  }
  if (p.innodb_size < 16) {
    throw KcmError.of('INVALID_PARAS', `paras.innodb_size: must be >= 16 (MB), got ${p.innodb_size}`, { field: 'paras.innodb_size' });
  }
  planCluster(p, state);
}

/** What the client gets: the spec's fields, the accounts the reference clients read, and where everything went. */
function createResult(cluster: ClusterRecord, state: MetaState): CreateClusterResult {
  const shards = Object.values(cluster.shards);
  return {
    cluster_id: cluster.id,
    cluster_name: cluster.name,
    nick_name: cluster.nickName,
    shards: String(shards.length),
    comps: String(Object.keys(cluster.comps).length),
    computer_user: cluster.accounts.computer.user,
    // Sealed as stored: get_status opens them for the cluster's creator and admins only.
    computer_pwd: cluster.accounts.computer.sealedPassword,
    storage_user: cluster.accounts.storage.user,
    storage_pwd: cluster.accounts.storage.sealedPassword,
    list_shard: shards.map((s) => ({
      shard_id: s.id,
      shard_name: s.name,
      nodes: String(Object.keys(s.nodes).length),
      list_node: Object.values(s.nodes).map((n) => ({ node_id: n.id, hostaddr: n.hostaddr, port: String(n.port), master: String(n.id === s.masterNodeId) })),
    })),
    list_comp: Object.values(cluster.comps).map((c) => ({ comp_id: c.id, comp_name: c.name, hostaddr: c.hostaddr, port: String(c.port) })),
    placement: placementReport(cluster, state),
  };
}

export interface CreateOutputs {
  'plan placement': { clusterId: string; clusterName: string; unspreadShards: string[] };
  /** The versions every chosen host has in its engine cache ('': no agent could say, all older ones). */
  'prepare engines': { storageVersion: string; computerVersion: string };
  'install storage nodes': null;
  'set up replication': null;
  'install compute nodes': null;
  'connect compute nodes to shards': null;
  'apply cpu limits': null;
  'mark cluster ready': CreateClusterResult;
}

const createdCluster = (ctx: StepContext<CreateParas, CreateOutputs>) => clusterOfStep(ctx, ctx.outputs['plan placement'].clusterId);

/** create_cluster, with the engine versions a request naming none gets (manager config). */
export const createClusterJob = (engines: EngineVersionDefaults = NO_ENGINE_DEFAULTS): JobOf<'create_cluster', CreateOutputs> => ({
  jobType: 'create_cluster',
  validate: validateCreate,
  dryRunPlan(p, state) {
    const plan = planCluster(p, state);
    return { placement: previewPorts(state, plan.shards, plan.comps), unspread_shards: plan.shards.filter((s) => !s.spread).length };
  },
  // The cluster's id does not exist yet; other jobs on it are refused until it is built.
  lockKey: () => null,
  steps: (p) => createClusterSteps(p, engines),
  result: (outputs) => outputs['mark cluster ready'],
  async rollback(ctx, failedStep, error) {
    const cluster = clusterCreatedByJob(ctx.state(), ctx.jobId);
    if (!cluster) return undefined; // nothing was placed
    ctx.logger.warn({ jobId: ctx.jobId, clusterId: cluster.id, failedStep, reason: error.message }, 'create_cluster failed: removing what it created');
    // Ports are returned per instance, only once it is gone from its host (rollback.ts).
    return rollBackJob({ store: ctx, agents: ctx.agents, logger: ctx.logger, now: ctx.now, secrets: ctx.secrets }, ctx.jobId, 'create_cluster', wholeClusterPlan(cluster));
  },
});

/**
 * create_cluster's steps, which a restore drill runs too to build its scratch cluster
 * (`scratchOf`: the drilled cluster's id; the cluster is recorded as the job's drill's scratch
 * from its creation on, so it never shows as a user's).
 */
export function createClusterSteps(p: CreateParas, engines: EngineVersionDefaults = NO_ENGINE_DEFAULTS, scratchOf?: string): JobStep<CreateParas, CreateOutputs>[] {
  return [
    {
      name: 'plan placement',
      async run(ctx) {
        if (!clusterCreatedByJob(ctx.state(), ctx.jobId)) {
          await ctx.placeInTurn(async () => {
            const plan = planCluster(p, ctx.state());
            orThrow(
              await ctx.propose({
                kind: CommandKind.ClusterCreated,
                at: ctx.now(),
                jobId: ctx.jobId,
                nickName: p.nick_name,
                options: optionsOf(p, engines),
                accounts: generateClusterAccounts(ctx.secrets),
                placement: { newShards: plan.shards.map((s) => ({ hosts: s.hosts })), newNodes: [], newComps: plan.comps },
                ...(scratchOf !== undefined ? { scratchOfDrill: { drillJobId: ctx.jobId, sourceClusterId: scratchOf } satisfies RestoreDrillScratch } : {}),
              }),
            );
          });
        }
        const cluster = clusterCreatedByJob(ctx.state(), ctx.jobId)!;
        return { clusterId: cluster.id, clusterName: cluster.name, unspreadShards: unspreadShards(cluster) };
      },
    },
    {
      // Every chosen host fetches the versions before anything is installed: a version one of
      // them cannot have fails the job here, with nothing installed (the rollback returns the ports).
      name: 'prepare engines',
      async run(ctx) {
        const cluster = createdCluster(ctx);
        const asked = { storage: cluster.options.storageVersion ?? '', computer: cluster.options.computerVersion ?? '' };
        const [storageVersion, computerVersion] = await Promise.all([
          prepareEngineOnHosts(ctx, ctx.jobId, 'mariadb', asked.storage, storageNodes(cluster).map(({ node }) => node.hostaddr)),
          prepareEngineOnHosts(ctx, ctx.jobId, 'postgres', asked.computer, Object.values(cluster.comps).map((c) => c.hostaddr)),
        ]);
        if (storageVersion !== asked.storage || computerVersion !== asked.computer) {
          // The hosts' default, resolved: what the cluster's later instances get too. Skipped
          // (they get each agent's default) while a manager of the group is older.
          await recordEngineVersions(ctx, { clusterId: cluster.id, storageVersion, computerVersion }).catch((err: Error) =>
            ctx.logger.warn({ clusterId: cluster.id, err: err.message }, 'cluster engine versions not recorded'),
          );
        }
        return { storageVersion, computerVersion };
      },
    },
    {
      name: 'install storage nodes',
      async run(ctx) {
        const cluster = createdCluster(ctx);
        const version = ctx.outputs['prepare engines'].storageVersion;
        await forEachInstance(storageNodes(cluster), ({ node }) => `storage node ${node.id} on ${node.hostaddr}:${node.port}`, ({ node }) => installStorageNode(ctx.agents, ctx.secrets, ctx.jobId, cluster, node, version));
        return null;
      },
    },
    {
      name: 'set up replication',
      async run(ctx) {
        const cluster = createdCluster(ctx);
        await forEachInstance(Object.values(cluster.shards), (s) => s.name, (shard) => setUpShardReplication(ctx.agents, ctx.secrets, ctx.jobId, cluster, shard));
        return null;
      },
    },
    {
      name: 'install compute nodes',
      async run(ctx) {
        const cluster = createdCluster(ctx);
        const version = ctx.outputs['prepare engines'].computerVersion;
        await forEachInstance(Object.values(cluster.comps), (c) => `${c.name} on ${c.hostaddr}:${c.port}`, (comp) => installComp(ctx.agents, ctx.secrets, ctx.jobId, cluster, comp, version));
        return null;
      },
    },
    {
      name: 'connect compute nodes to shards',
      async run(ctx) {
        const cluster = createdCluster(ctx);
        const shards = shardEndpoints(ctx.secrets, cluster);
        await forEachInstance(Object.values(cluster.comps), (c) => c.name, (comp) =>
          ctx.agents.postgres(comp.hostaddr).syncCatalog(opId(ctx.jobId, 'catalog', `comp-${comp.id}`), comp.port, shards),
        );
        return null;
      },
    },
    {
      name: 'apply cpu limits',
      async run(ctx) {
        const cluster = createdCluster(ctx);
        const instances = [
          ...storageNodes(cluster).map(({ node }) => ({ instance: node, kind: 'mysql' as const })),
          ...Object.values(cluster.comps).map((comp) => ({ instance: comp, kind: 'pg' as const })),
        ];
        await forEachInstance(instances, (i) => `${i.kind} ${i.instance.hostaddr}:${i.instance.port}`, (i) => applyCpuLimit(ctx.agents, ctx.jobId, cluster, i.instance, i.kind));
        return null;
      },
    },
    {
      name: 'mark cluster ready',
      async run(ctx) {
        const cluster = createdCluster(ctx);
        // What each instance runs, as measured (get_cluster_detail's engine_version).
        await recordMeasuredVersions(ctx, cluster, { nodes: storageNodes(cluster).map(({ node }) => node), comps: Object.values(cluster.comps) });
        orThrow(await ctx.propose({ kind: CommandKind.ClusterStatusSet, at: ctx.now(), clusterId: cluster.id, status: 'ready' }));
        return createResult(clusterOfStep(ctx, cluster.id), ctx.state());
      },
    },
  ];
}

interface DeleteSnapshot {
  clusterId: string;
  clusterName: string;
  shards: { id: string; nodes: { id: string; hostaddr: string; port: number }[] }[];
  /** compDatadir: absent in snapshots taken before it was kept. */
  comps: { id: string; hostaddr: string; port: number; compDatadir?: string }[];
}

const hostsList = (instances: { hostaddr: string; port: number }[]) => instances.map((i) => `${i.hostaddr}_${i.port};`).join('');

interface DeleteOutputs {
  'mark cluster deleting': DeleteSnapshot;
  'remove compute nodes': ComputerStepResult[];
  'remove storage nodes': ShardStepResult[];
  'release ports': null;
}

export const deleteCluster: JobOf<'delete_cluster', DeleteOutputs, DeleteParas> = {
  jobType: 'delete_cluster',
  dryRunPlan: (p, state) => ({ removes: removalPlan(changeableCluster(state, p.cluster_id)) }),
  validate: (p, state) => void changeableCluster(state, clusterByReference(state, p).id),
  resolve: (p, state) => ({ ...p, cluster_id: clusterByReference(state, p).id }),
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: (p) => [
    {
      name: 'mark cluster deleting',
      async run(ctx): Promise<DeleteSnapshot> {
        const cluster = changeableCluster(ctx.state(), p.cluster_id);
        orThrow(await ctx.propose({ kind: CommandKind.ClusterStatusSet, at: ctx.now(), clusterId: cluster.id, status: 'deleting' }));
        // What to remove, kept in the job: later steps must find it even after the record is gone.
        return {
          clusterId: cluster.id,
          clusterName: cluster.name,
          shards: Object.values(cluster.shards).map((s) => ({ id: s.id, nodes: Object.values(s.nodes).map(({ id, hostaddr, port }) => ({ id, hostaddr, port })) })),
          comps: Object.values(cluster.comps).map(({ id, hostaddr, port, compDatadir }) => ({ id, hostaddr, port, compDatadir })),
        };
      },
    },
    {
      name: 'remove compute nodes',
      async run(ctx) {
        const snap = ctx.outputs['mark cluster deleting'];
        await forEachInstance(snap.comps, (c) => `comp_${c.id} on ${c.hostaddr}:${c.port}`, (comp) => removeComp(ctx.agents, ctx.jobId, comp));
        return snap.comps.map((c) => ({
          cluster_id: snap.clusterId,
          computer_hosts: hostsList([c]),
          computer_id: c.id,
          computer_state: 'done',
          error_code: 0,
          error_info: '',
          rollback_flag: 0,
        }));
      },
    },
    {
      name: 'remove storage nodes',
      async run(ctx) {
        const snap = ctx.outputs['mark cluster deleting'];
        const nodes = snap.shards.flatMap((s) => s.nodes);
        await forEachInstance(nodes, (n) => `storage node ${n.id} on ${n.hostaddr}:${n.port}`, (node) => removeStorageNode(ctx.agents, ctx.jobId, node));
        return snap.shards.map((s) => ({
          cluster_id: snap.clusterId,
          error_code: 0,
          error_info: '',
          rollback_flag: 0,
          shard_ids: s.id,
          storage_hosts: hostsList(s.nodes),
          storage_id: s.id,
          storage_state: 'done',
        }));
      },
    },
    {
      name: 'release ports',
      async run(ctx) {
        orThrow(await ctx.propose({ kind: CommandKind.ClusterDeleted, at: ctx.now(), clusterId: ctx.outputs['mark cluster deleting'].clusterId }));
        return null;
      },
    },
  ],
  result(outputs) {
    const snap = outputs['mark cluster deleting'];
    return {
      cluster_id: snap.clusterId,
      cluster_name: snap.clusterName,
      job_steps: 'computer,shard',
      shard_id: snap.shards.map((s) => s.id).join(','),
      computer_id: snap.comps.map((c) => c.id).join(','),
      storage_state: 'done',
      computer_state: 'done',
      shard_step: outputs['remove storage nodes'],
      computer_step: outputs['remove compute nodes'],
    };
  },
};
