// Finding the cluster a job works on, and the checks every job that changes a cluster
// makes before it is committed (shared by the cluster, shard, comp and node families).

import { errorNameOf } from './framework/errors';
import { KcmError } from '@kcm/protocol';
import type { ClusterRecord, MetaState, ShardRecord } from '../meta/state';
import type { StepContext } from './framework/workflow';

/** The cluster named by `clusterId`, or NOT_FOUND naming the field. */
export function clusterById(state: MetaState, clusterId: string, field = 'paras.cluster_id'): ClusterRecord {
  const cluster = state.clusters[clusterId];
  if (!cluster) throw KcmError.of('NOT_FOUND', `${field}: cluster ${clusterId} does not exist`, { field });
  return cluster;
}

/**
 * The cluster paras name by cluster_name or cluster_id (clusterReferenceParas), or NOT_FOUND
 * naming the field; given both, they must name the same cluster.
 */
export function clusterByReference(state: MetaState, p: { cluster_name?: string; cluster_id?: string }): ClusterRecord {
  if (p.cluster_name === undefined) return clusterById(state, p.cluster_id!);
  const field = 'paras.cluster_name';
  const cluster = Object.values(state.clusters).find((c) => c.name === p.cluster_name);
  if (!cluster) throw KcmError.of('NOT_FOUND', `${field}: no cluster is named ${p.cluster_name}`, { field });
  if (p.cluster_id !== undefined && p.cluster_id !== cluster.id) {
    throw KcmError.of('NOT_FOUND', `${field}: ${p.cluster_name} is cluster ${cluster.id}, not paras.cluster_id ${p.cluster_id}; no cluster has both`, { field });
  }
  return cluster;
}

/**
 * A cluster a new job may change: not being deleted, and not still being built by its
 * create_cluster job (that job holds no cluster lock, since the id did not exist when it
 * was submitted). A cluster left behind by a failed create may be changed (deleted), also
 * while its rollback waits for an agent (meta/rollbacks.ts): delete_cluster then removes
 * what the rollback could not, and the pending record goes with the cluster.
 */
export function changeableCluster(state: MetaState, clusterId: string, field = 'paras.cluster_id'): ClusterRecord {
  const cluster = clusterById(state, clusterId, field);
  const creator = state.jobs[cluster.createdByJob];
  if (cluster.status === 'creating' && creator && !creator.result) {
    throw KcmError.of('CONFLICT', `${field}: cluster ${clusterId} is still being created by job ${cluster.createdByJob}`, { field });
  }
  return cluster;
}

/**
 * A cluster that may grow or shrink (add/delete shards, comps, nodes; rebuild): changeable
 * and built. A cluster left behind by a failed create_cluster can only be deleted.
 */
export function readyCluster(state: MetaState, clusterId: string, field = 'paras.cluster_id'): ClusterRecord {
  const cluster = changeableCluster(state, clusterId, field);
  if (cluster.status !== 'ready') {
    throw KcmError.of('CONFLICT', `${field}: cluster ${clusterId} is ${cluster.status}, not ready; only delete_cluster may run on it`, { field });
  }
  return cluster;
}

/** The shard `shardId` of the cluster, or NOT_FOUND naming the field. */
export function shardOf(cluster: ClusterRecord, shardId: string, field = 'paras.shard_id'): ShardRecord {
  const shard = cluster.shards[shardId];
  if (!shard) throw KcmError.of('NOT_FOUND', `${field}: shard ${shardId} is not part of cluster ${cluster.id}`, { field });
  return shard;
}

/** The cluster a running step works on; gone means another job removed it under us. */
export function clusterOfStep(ctx: StepContext<unknown>, clusterId: string): ClusterRecord {
  return clusterStillThere(ctx.state(), clusterId);
}

/** clusterOfStep for code that holds the state rather than the step. */
export function clusterStillThere(state: MetaState, clusterId: string): ClusterRecord {
  const cluster = state.clusters[clusterId];
  if (!cluster) throw KcmError.of('NOT_FOUND', `cluster ${clusterId} no longer exists`);
  return cluster;
}

/**
 * Runs `work` on every item at once and waits for all of them (none is left running behind
 * a failure, so a rollback never races an install). Fails with every item's reason, as
 * AGENT_UNREACHABLE or NO_RESOURCES (a full disk) when every failure was that, else INSTANCE_FAILED.
 */
export async function forEachInstance<T>(items: T[], describe: (item: T) => string, work: (item: T) => Promise<unknown>): Promise<void> {
  const settled = await Promise.allSettled(items.map((item) => work(item)));
  const failures = settled.flatMap((s, i) => (s.status === 'rejected' ? [{ item: items[i], err: s.reason as unknown }] : []));
  if (failures.length === 0) return;
  const message = failures.map((f) => `${describe(f.item)}: ${f.err instanceof Error ? f.err.message : String(f.err)}`).join('; ');
  // An outage or a full disk on every failed item is what the job met; anything else, or a mix, is an instance failure.
  const names = new Set(failures.map((f) => errorNameOf(f.err)));
  const [only] = names;
  const errorName = names.size === 1 && (only === 'AGENT_UNREACHABLE' || only === 'NO_RESOURCES') ? only : 'INSTANCE_FAILED';
  throw KcmError.of(errorName, message, { cause: failures[0].err });
}
