// Job family: shards (add_shards, delete_shards).
//
// add_shards places the new shards in one command (ids, names, ports; every record tagged
// with the job), then builds them like create_cluster does: storage nodes, GTID replication
// with semi-sync, cpu limits, and finally points every compute node at them. A failed step
// removes the new shards' instances and returns their ports.
//
// delete_shards removes one shard. It is refused while the shard's master still holds
// tables of the cluster's databases: the protocol has no paras flag to drop them
// (libs/protocol paras/clusters.ts), and silently destroying data is not a default.

import { KcmError, type AddShardsResult, type EmptyResult, type ParasOf } from '@kcm/protocol';
import type { Agents } from '@kcm/agent-api';
import { CommandKind } from '../meta/commands';
import type { ClusterRecord, MetaState, ShardRecord } from '../meta/state';
import { clusterOfStep, forEachInstance, readyCluster, shardOf } from './cluster-lookup';
import { orThrow } from './framework/errors';
import { applyCpuLimit, installStorageNode, placeOnce, removeStorageNode, setUpShardReplication, syncCompCatalogs } from './instance-ops';
import { candidatesFor, placeShards, storageDemand, type ShardPlacement } from './placement';
import { rollBackGrowJob } from './rollback';
import type { JobOf, StepContext } from './framework/workflow';
import { previewPorts } from './dry-run';
import { recordMeasuredVersions } from './engine-versions';

type AddParas = ParasOf<'add_shards'>;
type DeleteParas = ParasOf<'delete_shards'>;

/** Where add_shards would put the new shards on the current state; throws the first reason it cannot. */
export function planNewShards(p: AddParas, state: MetaState): ShardPlacement[] {
  const cluster = readyCluster(state, p.cluster_id);
  const pool = candidatesFor(state, 'storage', p.storage_iplists, 'storage_iplists', storageDemand(cluster.options));
  return placeShards(pool, p.shards, p.nodes, 'storage_iplists');
}

/** The shard delete_shards may remove: part of a ready cluster, and not its last one. */
function deletableShard(state: MetaState, p: DeleteParas): { cluster: ClusterRecord; shard: ShardRecord } {
  const cluster = readyCluster(state, p.cluster_id);
  const shard = shardOf(cluster, p.shard_id);
  if (Object.keys(cluster.shards).length === 1) {
    throw KcmError.of('CONFLICT', `paras.shard_id: ${shard.name} is the last shard of cluster ${cluster.id}; a cluster keeps at least one (delete_cluster removes it all)`, {
      field: 'paras.shard_id',
    });
  }
  return { cluster, shard };
}

/** Lists the tables of the cluster's `D_$$_S` databases on the shard's master, through its agent. */
export async function tablesOnShardMaster(agents: Agents, shard: ShardRecord): Promise<string[]> {
  const master = shard.nodes[shard.masterNodeId];
  if (!master) throw new Error(`${shard.name} has no master node ${shard.masterNodeId}`);
  return (await agents.mariadb(master.hostaddr).listTables(master.port)).tables;
}

function shardList(cluster: ClusterRecord, shardIds: string[]) {
  return shardIds.map((id) => ({ shard_id: id, shard_name: cluster.shards[id]?.name ?? `shard_${id}` }));
}

interface AddOutputs {
  'place new shards': { shardIds: string[] };
  'install storage nodes': null;
  'set up replication': null;
  'apply cpu limits': null;
  'connect compute nodes to shards': AddShardsResult;
}

const newShardsOf = (ctx: StepContext<AddParas, AddOutputs>) => {
  const cluster = clusterOfStep(ctx, ctx.paras.cluster_id);
  const { shardIds } = ctx.outputs['place new shards'];
  return { cluster, shards: shardIds.map((id) => shardOf(cluster, id, 'placed shard')) };
};

export const addShards: JobOf<'add_shards', AddOutputs> = {
  jobType: 'add_shards',
  validate: (p, state) => void planNewShards(p, state),
  dryRunPlan: (p, state) => ({ placement: previewPorts(state, planNewShards(p, state), []).shards }),
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: (p) => [
    {
      name: 'place new shards',
      async run(ctx) {
        const cluster = readyCluster(ctx.state(), p.cluster_id);
        const placed = await placeOnce(ctx, cluster, ctx.jobId, () => ({
          newShards: planNewShards(p, ctx.state()).map((s) => ({ hosts: s.hosts })),
          newNodes: [],
          newComps: [],
        }));
        return { shardIds: placed.shardIds };
      },
    },
    {
      name: 'install storage nodes',
      async run(ctx) {
        const { cluster, shards } = newShardsOf(ctx);
        const nodes = shards.flatMap((s) => Object.values(s.nodes));
        await forEachInstance(nodes, (n) => `storage node ${n.id} on ${n.hostaddr}:${n.port}`, (n) => installStorageNode(ctx.agents, ctx.secrets, ctx.jobId, cluster, n));
        await recordMeasuredVersions(ctx, cluster, { nodes });
        return null;
      },
    },
    {
      name: 'set up replication',
      async run(ctx) {
        const { cluster, shards } = newShardsOf(ctx);
        await forEachInstance(shards, (s) => s.name, (s) => setUpShardReplication(ctx.agents, ctx.secrets, ctx.jobId, cluster, s));
        return null;
      },
    },
    {
      name: 'apply cpu limits',
      async run(ctx) {
        const { cluster, shards } = newShardsOf(ctx);
        const nodes = shards.flatMap((s) => Object.values(s.nodes));
        await forEachInstance(nodes, (n) => `mysql ${n.hostaddr}:${n.port}`, (n) => applyCpuLimit(ctx.agents, ctx.jobId, cluster, n, 'mysql'));
        return null;
      },
    },
    {
      name: 'connect compute nodes to shards',
      async run(ctx) {
        const { cluster, shards } = newShardsOf(ctx);
        await syncCompCatalogs(ctx.agents, ctx.secrets, ctx.jobId, 'catalog', cluster, Object.values(cluster.comps));
        return {
          cluster_id: cluster.id,
          cluster_name: cluster.name,
          shards: String(Object.keys(cluster.shards).length),
          comps: String(Object.keys(cluster.comps).length),
          list_shard: shardList(cluster, shards.map((s) => s.id)),
        };
      },
    },
  ],
  result: (outputs) => outputs['connect compute nodes to shards'],
  rollback: rollBackGrowJob('add_shards'),
};

interface DeletedShard {
  shardId: string;
  nodes: { id: string; hostaddr: string; port: number }[];
}

interface DeleteOutputs {
  'check shard holds no tables': DeletedShard;
  'remove storage nodes': null;
  'forget shard': null;
  'disconnect compute nodes': null;
}

export function deleteShardsJob(): JobOf<'delete_shards', DeleteOutputs> {
  return {
    jobType: 'delete_shards',
    validate: (p, state) => void deletableShard(state, p),
    lockKey: (p) => `cluster:${p.cluster_id}`,
    steps: (p) => [
      {
        name: 'check shard holds no tables',
        async run(ctx): Promise<DeletedShard> {
          const { cluster, shard } = deletableShard(ctx.state(), p);
          let tables: string[];
          try {
            tables = await tablesOnShardMaster(ctx.agents, shard);
          } catch (err) {
            throw KcmError.of('INSTANCE_FAILED', `cannot tell whether ${shard.name} holds tables: its master did not answer: ${(err as Error).message}`, { cause: err });
          }
          if (tables.length > 0) {
            // Points at the job that empties a shard without losing rows: expand_cluster.
            throw KcmError.of(
              'CONFLICT',
              `paras.shard_id: ${shard.name} still holds ${tables.length} table(s): ${tables.join(', ')}; delete_shards never drops tables: move them to another shard of the cluster first with expand_cluster (src_shard_id ${shard.id}), or drop the ones you no longer need`,
              { field: 'paras.shard_id' },
            );
          }
          // Kept in the job: the later steps must find the nodes after the record is gone.
          return { shardId: shard.id, nodes: Object.values(shard.nodes).map(({ id, hostaddr, port }) => ({ id, hostaddr, port })) };
        },
      },
      {
        name: 'remove storage nodes',
        async run(ctx) {
          const { nodes } = ctx.outputs['check shard holds no tables'];
          await forEachInstance(nodes, (n) => `storage node ${n.id} on ${n.hostaddr}:${n.port}`, (n) => removeStorageNode(ctx.agents, ctx.jobId, n));
          return null;
        },
      },
      {
        name: 'forget shard',
        async run(ctx) {
          orThrow(await ctx.propose({ kind: CommandKind.InstancesRemoved, at: ctx.now(), clusterId: p.cluster_id, nodeIds: [], compIds: [], shardIds: [ctx.outputs['check shard holds no tables'].shardId] }));
          return null;
        },
      },
      {
        name: 'disconnect compute nodes',
        async run(ctx) {
          const cluster = clusterOfStep(ctx, p.cluster_id);
          await syncCompCatalogs(ctx.agents, ctx.secrets, ctx.jobId, 'uncatalog', cluster, Object.values(cluster.comps));
          return null;
        },
      },
    ],
    result: () => ({}),
  };
}
