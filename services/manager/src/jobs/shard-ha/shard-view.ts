// A shard as the HA steps see it: its cluster, its master node and its other nodes, read
// from the replicated state now (a resumed step reads what the steps before it committed).

import { KcmError } from '@kcm/protocol';
import type { MariaDbHaStatusReply } from '@kcm/agent-api';
import type { ClusterRecord, MetaState, ShardRecord, StorageNodeRecord } from '../../meta/state';

export interface ShardView {
  cluster: ClusterRecord;
  shard: ShardRecord;
  master: StorageNodeRecord;
  /** Every node but the master, fenced ones included. */
  others: StorageNodeRecord[];
}

export function shardView(state: MetaState, clusterId: string, shardId: string): ShardView {
  const cluster = state.clusters[clusterId];
  if (!cluster) throw KcmError.of('NOT_FOUND', `cluster ${clusterId} does not exist`, { field: 'paras.cluster_id' });
  const shard = cluster.shards[shardId];
  if (!shard) throw KcmError.of('NOT_FOUND', `shard ${shardId} is not in cluster ${clusterId}`, { field: 'paras.shard_id' });
  const master = shard.nodes[shard.masterNodeId];
  if (!master) throw KcmError.of('NOT_FOUND', `shard ${shardId} has no master node ${shard.masterNodeId}`);
  return { cluster, shard, master, others: Object.values(shard.nodes).filter((n) => n.id !== master.id) };
}

export function nodeOf(shard: ShardRecord, nodeId: string): StorageNodeRecord {
  const node = shard.nodes[nodeId];
  if (!node) throw KcmError.of('NOT_FOUND', `node ${nodeId} is not in shard ${shard.id}`);
  return node;
}

export const where = (n: { hostaddr: string; port: number }): string => `${n.hostaddr}:${n.port}`;

/** Why a node answering `s` is not a standby of `master` with both replication threads running now; '' when it is. */
export function standbyProblem(s: MariaDbHaStatusReply, master: { hostaddr: string; port: number }): string {
  if (!s.answering) return `it does not answer (${s.reason || 'down'})`;
  if (!s.is_replica || s.master_host !== master.hostaddr || s.master_port !== master.port) {
    return `it does not replicate from ${where(master)}${s.is_replica ? ` but from ${s.master_host}:${s.master_port}` : ''}`;
  }
  if (!s.io_running || !s.sql_running) return `its replication is stopped (${[s.last_io_error, s.last_sql_error].filter(Boolean).join('; ') || 'threads not running'})`;
  return '';
}

/** Runs `work` and says how long it took (every HA step reports its duration). */
export async function timed<T extends object>(work: () => Promise<T>): Promise<T & { ms: number }> {
  const started = performance.now();
  const out = await work();
  return { ...out, ms: Math.round(performance.now() - started) };
}
