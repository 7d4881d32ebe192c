// Apply functions of recorded rollbacks: what a failed job could not remove from its hosts
// (an agent did not answer). The record lives in the replicated state, so whichever member
// leads finishes it; an instance is forgotten, and its port returned, only once its host
// confirmed it gone (RollbackInstancesRemoved), never when the rollback gave up on it.

import { applyClusterDeleted, applyInstancesRemoved } from './clusters';
import { accepted, refused, type ApplyOutcome } from './outcome';
import type { MetaState, PendingRollbackRecord } from './state';
import { CommandKind, type CommandBase } from './command-numbers';

/**
 * A failed job's rollback: every instance it has to remove from its host (all of them,
 * also those already removed: RollbackInstancesRemoved follows for those), kept until each
 * is gone. Recording it again (the job's rollback re-run by a new leader) replaces the record.
 */
export interface RollbackRecorded extends CommandBase<typeof CommandKind.RollbackRecorded>, Omit<PendingRollbackRecord, 'recordedAt'> {}

/**
 * Instances of a pending rollback that are gone from their hosts: forgotten, their ports
 * returned. When the last one goes, the job's shards (or its whole cluster) go too and
 * the record is dropped. Removing what is already forgotten is a no-op.
 */
export interface RollbackInstancesRemoved extends CommandBase<typeof CommandKind.RollbackInstancesRemoved> {
  jobId: string;
  nodeIds: string[];
  compIds: string[];
}

export function applyRollbackRecorded(state: MetaState, cmd: RollbackRecorded): ApplyOutcome<{ instances: number }> {
  if (!state.clusters[cmd.clusterId]) return refused('NOT_FOUND', `cluster ${cmd.clusterId} does not exist`);
  state.pendingRollbacks[cmd.jobId] = {
    jobId: cmd.jobId,
    jobType: cmd.jobType,
    clusterId: cmd.clusterId,
    instances: cmd.instances.map((i) => ({ ...i })),
    shardIds: [...cmd.shardIds],
    deleteCluster: cmd.deleteCluster,
    reason: cmd.reason,
    recordedAt: cmd.at,
  };
  return accepted({ instances: cmd.instances.length });
}

export function applyRollbackInstancesRemoved(state: MetaState, cmd: RollbackInstancesRemoved): ApplyOutcome<{ left: number; finished: boolean }> {
  const record = state.pendingRollbacks[cmd.jobId];
  if (!record) return accepted({ left: 0, finished: true });
  const gone = new Set([...cmd.nodeIds.map((id) => `storage node:${id}`), ...cmd.compIds.map((id) => `compute node:${id}`)]);
  record.instances = record.instances.filter((i) => !gone.has(`${i.kind}:${i.id}`));
  if (state.clusters[record.clusterId]) {
    applyInstancesRemoved(state, { kind: CommandKind.InstancesRemoved, at: cmd.at, clusterId: record.clusterId, nodeIds: cmd.nodeIds, compIds: cmd.compIds, shardIds: [] });
  }
  if (record.instances.length > 0) return accepted({ left: record.instances.length, finished: false });
  finishRollback(state, record, cmd.at);
  return accepted({ left: 0, finished: true });
}

/** Everything the rollback had to remove is gone: the job's shards, or the cluster it created, go too. */
function finishRollback(state: MetaState, record: PendingRollbackRecord, at: number): void {
  delete state.pendingRollbacks[record.jobId];
  if (!state.clusters[record.clusterId]) return;
  if (record.deleteCluster) {
    applyClusterDeleted(state, { kind: CommandKind.ClusterDeleted, at, clusterId: record.clusterId });
  } else if (record.shardIds.length > 0) {
    applyInstancesRemoved(state, { kind: CommandKind.InstancesRemoved, at, clusterId: record.clusterId, nodeIds: [], compIds: [], shardIds: record.shardIds });
  }
}

/** A deleted cluster takes its pending rollbacks with it: delete_cluster removed every instance. */
export function dropPendingRollbacksOf(state: MetaState, clusterId: string): void {
  for (const record of Object.values(state.pendingRollbacks)) if (record.clusterId === clusterId) delete state.pendingRollbacks[record.jobId];
}

/** A job that ended well after all (re-run by a new leader) has nothing to roll back. */
export function dropPendingRollbackOf(state: MetaState, jobId: string): void {
  if (state.pendingRollbacks[jobId]) delete state.pendingRollbacks[jobId];
}
