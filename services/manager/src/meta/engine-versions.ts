// The engine versions of a cluster's instances (docs/engine-versions.md): what each storage
// node and compute node was measured running, and the versions the cluster's next instances
// get (cluster.options.storageVersion / computerVersion). Records written before engines were
// versioned have none: they read as "unknown".

import { accepted, refused, type ApplyOutcome } from './outcome';
import { CommandKind, type CommandBase } from './command-numbers';
import type { ClusterRecord, MetaState } from './state';

/** How a record without a measured version reads in queries. */
export const UNKNOWN_ENGINE_VERSION = 'unknown';

/**
 * Versions measured on a cluster's instances (after an install, a rebuild, an upgrade), and
 * optionally the cluster's own: the version its next instances get. Ids of instances no
 * longer in the cluster are passed over (the instance was removed meanwhile).
 */
export interface EngineVersionsRecorded extends CommandBase<typeof CommandKind.EngineVersionsRecorded> {
  clusterId: string;
  storageVersion?: string;
  computerVersion?: string;
  nodes?: { nodeId: string; version: string }[];
  comps?: { compId: string; version: string }[];
}

function nodeById(cluster: ClusterRecord, nodeId: string) {
  for (const shard of Object.values(cluster.shards)) if (Object.hasOwn(shard.nodes, nodeId)) return shard.nodes[nodeId];
  return undefined;
}

export function applyEngineVersionsRecorded(state: MetaState, cmd: EngineVersionsRecorded): ApplyOutcome<{ nodes: number; comps: number }> {
  const cluster = Object.hasOwn(state.clusters, cmd.clusterId) ? state.clusters[cmd.clusterId] : undefined;
  if (!cluster) return refused('NOT_FOUND', `cluster ${cmd.clusterId} does not exist`);
  if (cmd.storageVersion !== undefined) cluster.options.storageVersion = cmd.storageVersion;
  if (cmd.computerVersion !== undefined) cluster.options.computerVersion = cmd.computerVersion;
  let nodes = 0;
  for (const { nodeId, version } of cmd.nodes ?? []) {
    const node = nodeById(cluster, nodeId);
    if (node) {
      node.engineVersion = version;
      nodes++;
    }
  }
  let comps = 0;
  for (const { compId, version } of cmd.comps ?? []) {
    if (Object.hasOwn(cluster.comps, compId)) {
      cluster.comps[compId].engineVersion = version;
      comps++;
    }
  }
  return accepted({ nodes, comps });
}

/** The version a storage node was last measured running, or "unknown". */
export const nodeEngineVersion = (node: { engineVersion?: string }): string => node.engineVersion || UNKNOWN_ENGINE_VERSION;
