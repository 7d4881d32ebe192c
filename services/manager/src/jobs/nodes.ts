// Job family: storage nodes (add_nodes, delete_nodes, rebuild_node).
//
// A new standby (add_nodes) and a rebuilt one (rebuild_node) are both made the same way:
// the target's agent pulls a mariabackup stream of a healthy member of the shard (a
// standby within allow_replica_delay, else the master when allowed), prepares it, starts
// the instance and attaches it to the master from the copy's GTID position. So the node
// holds every row the shard had at the copy and replicates the rest; it is never an empty
// instance catching up from binlogs that may be purged.
//
// The master is never deleted or rebuilt here, and a shard never drops below the spec's
// minimum of 3 nodes (spec 8). rebuild_node's need_backup keeps the old data beside the
// instance on its own host (the agent reports where); hdfs_host is accepted and not used,
// as there is no HDFS here.

import { KcmError, MIN_NODES_PER_SHARD, type AddNodesResult, type EmptyResult, type ParasOf, type RebuildNodeResult, type RebuiltNodeResult } from '@kcm/protocol';
import type { MariaDbAgentClient, Agents } from '@kcm/agent-api';
import type { ClusterRecord, MetaState, ShardRecord, StorageNodeRecord } from '../meta/state';
import { clusterOfStep, forEachInstance, readyCluster, shardOf } from './cluster-lookup';
import { applyCpuLimit, instanceSpec, opId, placeOnce } from './instance-ops';
import { errorNameOf } from './framework/errors';
import { candidatesFor, placeNodesInShard, storageDemand } from './placement';
import { rollBackGrowJob } from './rollback';
import { takeOutInstanceSteps, type TakeOutOutputs } from './take-out-instance';
import type { JobOf } from './framework/workflow';
import { liveAccount } from '../secrets/live-accounts';
import type { SecretBox } from '../secrets/secret-box';
import { recordMeasuredVersions } from './engine-versions';

type AddParas = ParasOf<'add_nodes'>;
type DeleteParas = ParasOf<'delete_nodes'>;
type RebuildParas = ParasOf<'rebuild_node'>;
type MariaDbRebuildReply = Awaited<ReturnType<MariaDbAgentClient['rebuildStandby']>>;

/** A standby lagging more than this is not a copy source when the request does not say (allow_replica_delay). */
export const DEFAULT_ALLOWED_REPLICA_DELAY_S = 60;

export interface CopyPolicy {
  allowReplicaDelayS: number;
  allowPullFromMaster: boolean;
  pvLimitMb: number;
  needBackup: boolean;
}

/** The storage node at hostaddr:port in the cluster, with its shard. */
export function findStorageNode(cluster: ClusterRecord, hostaddr: string, port: number): { shard: ShardRecord; node: StorageNodeRecord } | undefined {
  for (const shard of Object.values(cluster.shards)) {
    const node = Object.values(shard.nodes).find((n) => n.hostaddr === hostaddr && n.port === port);
    if (node) return { shard, node };
  }
  return undefined;
}

/**
 * Makes `node` a standby of its shard from a copy of one of `sources` (members of the shard
 * that are not being built themselves). `seed` = the port has no instance yet (add_nodes).
 */
export async function copyIntoStandby(
  agents: Agents,
  secrets: SecretBox,
  op: string,
  cluster: ClusterRecord,
  shard: ShardRecord,
  node: StorageNodeRecord,
  sources: StorageNodeRecord[],
  policy: CopyPolicy,
  seed: boolean,
): Promise<MariaDbRebuildReply> {
  const master = shard.nodes[shard.masterNodeId];
  if (!master) throw new Error(`${shard.name} has no master node ${shard.masterNodeId}`);
  const request = {
    op_id: op,
    spec: instanceSpec(cluster, node),
    admin: liveAccount(secrets, cluster, 'admin'),
    sources: sources.map((s) => ({ agent_address: agents.agentAddress(s.hostaddr), hostaddr: s.hostaddr, port: s.port, is_master: s.id === master.id })),
    allow_replica_delay_s: policy.allowReplicaDelayS,
    allow_pull_from_master: policy.allowPullFromMaster,
    pv_limit_mb: policy.pvLimitMb,
    need_backup: policy.needBackup,
    master_host: master.hostaddr,
    master_port: master.port,
    replication: liveAccount(secrets, cluster, 'replication'),
  };
  const client = agents.mariadb(node.hostaddr);
  return seed ? client.seedStandby(request) : client.rebuildStandby(request);
}

/** Where add_nodes would put the new nodes on the current state; throws the first reason it cannot. */
export function planNewNodes(p: AddParas, state: MetaState): { shardId: string; hostaddr: string }[] {
  const cluster = readyCluster(state, p.cluster_id);
  const shards = p.shard_id !== undefined ? [shardOf(cluster, p.shard_id)] : Object.values(cluster.shards);
  const pool = candidatesFor(state, 'storage', p.storage_iplists, 'storage_iplists', storageDemand(cluster.options));
  const placed = shards.flatMap((shard) => {
    const taken = Object.values(shard.nodes).map((n) => n.hostaddr);
    return placeNodesInShard(pool, taken, p.nodes, 'storage_iplists').hosts.map((hostaddr) => ({ shardId: shard.id, hostaddr }));
  });
  return placed;
}

/** The node delete_nodes may remove: a standby of the cluster whose shard keeps the minimum. */
function deletableNode(state: MetaState, p: DeleteParas): { cluster: ClusterRecord; shard: ShardRecord; node: StorageNodeRecord } {
  const cluster = readyCluster(state, p.cluster_id);
  if (p.shard_id !== undefined) shardOf(cluster, p.shard_id);
  const where = `${p.hostaddr}:${p.port}`;
  const found = findStorageNode(cluster, p.hostaddr, p.port);
  if (!found) throw KcmError.of('NOT_FOUND', `paras.hostaddr/paras.port: ${where} is not a storage node of cluster ${cluster.id}`, { field: 'paras.port' });
  const { shard, node } = found;
  if (p.shard_id !== undefined && shard.id !== p.shard_id) {
    throw KcmError.of('NOT_FOUND', `paras.shard_id: ${where} is a node of ${shard.name}, not of shard ${p.shard_id}`, { field: 'paras.shard_id' });
  }
  if (node.id === shard.masterNodeId) {
    throw KcmError.of('CONFLICT', `paras.hostaddr/paras.port: ${where} is the master of ${shard.name}; a master cannot be deleted`, { field: 'paras.port' });
  }
  const count = Object.keys(shard.nodes).length;
  if (count - 1 < MIN_NODES_PER_SHARD) {
    throw KcmError.of(
      'CONFLICT',
      `paras.hostaddr/paras.port: ${shard.name} has ${count} nodes; deleting ${where} would leave ${count - 1}, below the minimum of ${MIN_NODES_PER_SHARD} nodes per shard`,
      { field: 'paras.port' },
    );
  }
  if (count - 2 < cluster.options.fullsyncLevel) {
    throw KcmError.of('CONFLICT', `paras.hostaddr/paras.port: deleting ${where} would leave ${shard.name} ${count - 2} standbys, fewer than its fullsync_level ${cluster.options.fullsyncLevel}`, {
      field: 'paras.port',
    });
  }
  return { cluster, shard, node };
}

interface RebuildTarget {
  shard: ShardRecord;
  node: StorageNodeRecord;
  policy: CopyPolicy;
}

/** Every rb_nodes entry must be a standby of the cluster (of shard_id, when given). */
function rebuildTargets(state: MetaState, p: RebuildParas): { cluster: ClusterRecord; targets: RebuildTarget[] } {
  const cluster = readyCluster(state, p.cluster_id);
  if (p.shard_id !== undefined) shardOf(cluster, p.shard_id);
  const targets = p.rb_nodes.map((t, i): RebuildTarget => {
    const field = `paras.rb_nodes[${i}]`;
    const where = `${t.hostaddr}:${t.port}`;
    const found = findStorageNode(cluster, t.hostaddr, t.port);
    if (!found) throw KcmError.of('NOT_FOUND', `${field}: ${where} is not a storage node of cluster ${cluster.id}`, { field });
    if (p.shard_id !== undefined && found.shard.id !== p.shard_id) {
      throw KcmError.of('NOT_FOUND', `${field}: ${where} is a node of ${found.shard.name}, not of paras.shard_id ${p.shard_id}`, { field });
    }
    if (found.node.id === found.shard.masterNodeId) {
      throw KcmError.of('CONFLICT', `${field}: ${where} is the master of ${found.shard.name}; only a standby can be rebuilt`, { field });
    }
    const policy = {
      allowReplicaDelayS: p.allow_replica_delay ?? DEFAULT_ALLOWED_REPLICA_DELAY_S,
      allowPullFromMaster: p.allow_pull_from_master,
      pvLimitMb: t.pv_limit ?? 0,
      needBackup: t.need_backup,
    };
    return { ...found, policy };
  });
  for (const shard of new Set(targets.map((t) => t.shard))) {
    const rebuilt = new Set(targets.filter((t) => t.shard === shard).map((t) => t.node.id));
    const standbysLeft = Object.values(shard.nodes).filter((n) => n.id !== shard.masterNodeId && !rebuilt.has(n.id));
    if (standbysLeft.length === 0 && !p.allow_pull_from_master) {
      throw KcmError.of('CONFLICT', `paras.allow_pull_from_master: every standby of ${shard.name} is being rebuilt, so only its master can be copied; set it to 1`, {
        field: 'paras.allow_pull_from_master',
      });
    }
  }
  return { cluster, targets };
}

const copySummary = (node: StorageNodeRecord, r: MariaDbRebuildReply): RebuiltNodeResult => ({
  node_id: node.id,
  hostaddr: node.hostaddr,
  port: String(node.port),
  source: `${r.source_hostaddr}:${r.source_port}`,
  gtid_pos: r.gtid_pos,
  bytes: String(r.bytes),
  transfer_ms: String(r.transfer_ms),
  kept_old_data: r.kept_old_data,
});

interface AddOutputs {
  'place new nodes': { nodeIds: string[] };
  'seed new standbys from a copy': null;
  'apply cpu limits': AddNodesResult;
}

export const addNodes: JobOf<'add_nodes', AddOutputs> = {
  jobType: 'add_nodes',
  validate: (p, state) => void planNewNodes(p, state),
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: (p) => [
    {
      name: 'place new nodes',
      async run(ctx) {
        const cluster = readyCluster(ctx.state(), p.cluster_id);
        const placed = await placeOnce(ctx, cluster, ctx.jobId, () => ({ newShards: [], newNodes: planNewNodes(p, ctx.state()), newComps: [] }));
        return { nodeIds: placed.nodeIds };
      },
    },
    {
      name: 'seed new standbys from a copy',
      async run(ctx) {
        const cluster = clusterOfStep(ctx, p.cluster_id);
        const shards = Object.values(cluster.shards).filter((s) => Object.values(s.nodes).some((n) => n.placedByJob === ctx.jobId));
        const policy: CopyPolicy = { allowReplicaDelayS: DEFAULT_ALLOWED_REPLICA_DELAY_S, allowPullFromMaster: true, pvLimitMb: 0, needBackup: false };
        // Shards in parallel; one copy at a time within a shard, so its sources carry one stream.
        await forEachInstance(shards, (s) => s.name, async (shard) => {
          const nodes = Object.values(shard.nodes);
          const sources = nodes.filter((n) => n.placedByJob !== ctx.jobId);
          for (const node of nodes.filter((n) => n.placedByJob === ctx.jobId)) {
            try {
              await copyIntoStandby(ctx.agents, ctx.secrets, opId(ctx.jobId, 'seed', `node-${node.id}`), cluster, shard, node, sources, policy, true);
            } catch (err) {
              throw new Error(`storage node ${node.id} on ${node.hostaddr}:${node.port}: ${(err as Error).message}`, { cause: err });
            }
          }
        });
        await recordMeasuredVersions(ctx, cluster, { nodes: shards.flatMap((s) => Object.values(s.nodes).filter((n) => n.placedByJob === ctx.jobId)) });
        return null;
      },
    },
    {
      name: 'apply cpu limits',
      async run(ctx) {
        const cluster = clusterOfStep(ctx, p.cluster_id);
        const shards = Object.values(cluster.shards);
        const added = shards.flatMap((s) => Object.values(s.nodes)).filter((n) => n.placedByJob === ctx.jobId);
        await forEachInstance(added, (n) => `mysql ${n.hostaddr}:${n.port}`, (n) => applyCpuLimit(ctx.agents, ctx.jobId, cluster, n, 'mysql'));
        return {
          cluster_id: cluster.id,
          cluster_name: cluster.name,
          shards: String(shards.length),
          comps: String(Object.keys(cluster.comps).length),
          list_shard: shards
            .filter((s) => Object.values(s.nodes).some((n) => n.placedByJob === ctx.jobId))
            .map((s) => ({
              shard_id: s.id,
              shard_name: s.name,
              nodes: String(Object.keys(s.nodes).length),
              list_node: Object.values(s.nodes)
                .filter((n) => n.placedByJob === ctx.jobId)
                .map((n) => ({ hostaddr: n.hostaddr, node_id: n.id, port: String(n.port) })),
            })),
        };
      },
    },
  ],
  result: (outputs) => outputs['apply cpu limits'],
  rollback: rollBackGrowJob('add_nodes'),
};

export const deleteNodes: JobOf<'delete_nodes', TakeOutOutputs<'storage node'>> = {
  jobType: 'delete_nodes',
  validate: (p, state) => void deletableNode(state, p),
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: () => takeOutInstanceSteps('storage node', (state, p: DeleteParas) => deletableNode(state, p).node),
  result: () => ({}),
};

interface RebuildOutputs {
  'rebuild standbys from a copy': RebuiltNodeResult[];
  'apply cpu limits': null;
}

export const rebuildNode: JobOf<'rebuild_node', RebuildOutputs> = {
  jobType: 'rebuild_node',
  validate: (p, state) => void rebuildTargets(state, p),
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: (p) => [
    {
      name: 'rebuild standbys from a copy',
      async run(ctx) {
        const { cluster, targets } = rebuildTargets(ctx.state(), p);
        const rebuilding = new Set(targets.map((t) => t.node.id));
        const copies: RebuiltNodeResult[] = [];
        // One at a time: every shard keeps its other members serving and able to be sources.
        for (const [i, { shard, node, policy }] of targets.entries()) {
          await ctx.progress(i, targets.length);
          const sources = Object.values(shard.nodes).filter((n) => !rebuilding.has(n.id));
          try {
            copies.push(copySummary(node, await copyIntoStandby(ctx.agents, ctx.secrets, opId(ctx.jobId, 'rebuild', `node-${node.id}`), cluster, shard, node, sources, policy, false)));
          } catch (err) {
            throw KcmError.of(errorNameOf(err, 'INSTANCE_FAILED'), `rebuilding ${node.hostaddr}:${node.port} (${shard.name}): ${(err as Error).message}`, { cause: err });
          }
        }
        // A rebuilt node runs the cluster's current version, whatever it ran before.
        await recordMeasuredVersions(ctx, cluster, { nodes: targets.map((t) => t.node) });
        return copies;
      },
    },
    {
      name: 'apply cpu limits',
      async run(ctx) {
        // The rebuilt instances are new processes, outside the cgroups their predecessors had.
        const { cluster, targets } = rebuildTargets(ctx.state(), p);
        await forEachInstance(targets, ({ node }) => `mysql ${node.hostaddr}:${node.port}`, ({ node }) => applyCpuLimit(ctx.agents, ctx.jobId, cluster, node, 'mysql'));
        return null;
      },
    },
  ],
  // The spec's result is {}; what each copy came from is added for the operator.
  result: (outputs) => ({ list_node: outputs['rebuild standbys from a copy'] }),
};
