// Apply of the shard high availability commands: a shard's master moving to another node
// (with the old one fenced in the same step), and a node's fence set or cleared.

import { refused, type ApplyOutcome } from './outcome';
import type { MetaState, ShardRecord } from './state';
import type { CommandBase, CommandKind } from './command-numbers';

/**
 * A shard's master moved to another of its nodes (failover, switchover). With
 * `fenceOldMaster`, the old master is recorded fenced in the same apply: no moment exists
 * where the metadata names a new master and the old one is not fenced.
 */
export interface ShardMasterChanged extends CommandBase<typeof CommandKind.ShardMasterChanged> {
  clusterId: string;
  shardId: string;
  masterNodeId: string;
  /** The master this replaces; refused when the shard's master is another one by now. */
  previousMasterNodeId: string;
  jobId: string;
  fenceOldMaster: boolean;
  /** Why it is fenced (shown in get_cluster_detail). */
  fenceReason?: string;
  /** The new master's GTID position at promotion (see NodeFence.successorGtid). */
  successorGtid?: string;
}

/**
 * Sets or clears a node's fence: a fenced node is never started writable, never given
 * client traffic, and left alone by the instance reconciler until it rejoins its shard.
 */
export interface NodeFenceSet extends CommandBase<typeof CommandKind.NodeFenceSet> {
  clusterId: string;
  shardId: string;
  nodeId: string;
  fenced: boolean;
  jobId: string;
  reason: string;
}

function shardOf(state: MetaState, clusterId: string, shardId: string): ShardRecord | undefined {
  return state.clusters[clusterId]?.shards[shardId];
}

export function applyShardMasterChanged(state: MetaState, cmd: ShardMasterChanged): ApplyOutcome<{ duplicate: boolean }> {
  const shard = shardOf(state, cmd.clusterId, cmd.shardId);
  if (!shard) return refused('NOT_FOUND', `shard ${cmd.shardId} of cluster ${cmd.clusterId} does not exist`);
  const next = shard.nodes[cmd.masterNodeId];
  if (!next) return refused('NOT_FOUND', `node ${cmd.masterNodeId} is not in shard ${cmd.shardId}`);
  // A step re-run after its commit finds the change made.
  if (shard.masterNodeId === cmd.masterNodeId) return { ok: true, value: { duplicate: true } };
  if (shard.masterNodeId !== cmd.previousMasterNodeId) {
    return refused('CONFLICT', `shard ${cmd.shardId}'s master is node ${shard.masterNodeId}, not ${cmd.previousMasterNodeId}`);
  }
  const old = shard.nodes[cmd.previousMasterNodeId];
  if (old && cmd.fenceOldMaster) {
    old.fenced = { since: cmd.at, byJob: cmd.jobId, reason: cmd.fenceReason ?? 'replaced as master', ...(cmd.successorGtid === undefined ? {} : { successorGtid: cmd.successorGtid }) };
  }
  delete next.fenced;
  shard.masterNodeId = cmd.masterNodeId;
  shard.masterSince = cmd.at;
  return { ok: true, value: { duplicate: false } };
}

export function applyNodeFenceSet(state: MetaState, cmd: NodeFenceSet): ApplyOutcome<null> {
  const node = shardOf(state, cmd.clusterId, cmd.shardId)?.nodes[cmd.nodeId];
  if (!node) return refused('NOT_FOUND', `node ${cmd.nodeId} is not in shard ${cmd.shardId} of cluster ${cmd.clusterId}`);
  if (cmd.fenced) node.fenced = { ...node.fenced, since: node.fenced?.since ?? cmd.at, byJob: cmd.jobId, reason: cmd.reason };
  else delete node.fenced;
  return { ok: true, value: null };
}
