// Apply functions of the cluster domain: clusters, shards, storage nodes, compute nodes.
//
// Everything a placement assigns (ids, names, ports, server ids) is chosen here, from the
// replicated state, so every member derives the same cluster from the same command and two
// jobs can never be handed the same port. A placement is all or nothing: it is checked in
// full before the first port is taken.

import { CommandKind, type ClusterCreated, type ClusterDeleted, type ClusterStatusSet, type InstancePlacement, type InstancesPlaced, type InstancesRemoved } from './commands';
import { accepted, refused, type ApplyOutcome } from './outcome';
import { dict } from './dict';
import { allocatePorts, releasePorts } from './ports';
import { machineKey, type ClusterRecord, type MachineType, type MetaState } from './state';

export interface PlacedInstances {
  clusterId: string;
  shardIds: string[];
  nodeIds: string[];
  compIds: string[];
}

export const clusterName = (id: number, atMs: number): string => `cluster_${Math.floor(atMs / 1000)}_${String(id).padStart(6, '0')}`;
export const shardName = (id: string): string => `shard_${id}`;
export const compName = (id: string): string => `comp_${id}`;

/** Free ports of a host's registration of one type (ports are shared by both types of a host). */
export function freePortCount(state: MetaState, hostaddr: string, machineType: MachineType): number {
  const machine = state.machines[machineKey(hostaddr, machineType)];
  if (!machine) return 0;
  const taken = state.ports[hostaddr] ?? {};
  let free = 0;
  for (let port = machine.portLow; port <= machine.portHigh; port++) if (!taken[port]) free++;
  return free;
}

/**
 * Why the placement cannot be made as asked, or undefined when every host can take its share:
 * NOT_FOUND for a machine or shard that is not there, NO_RESOURCES for one that cannot take more.
 * (The job's validation said so first; this is the same verdict for a state that moved since.)
 */
function placementProblem(state: MetaState, cluster: ClusterRecord | undefined, placement: InstancePlacement): ApplyOutcome<never> | undefined {
  const wanted = new Map<string, { hostaddr: string; type: MachineType; count: number }>();
  const want = (hostaddr: string, type: MachineType) => {
    const key = machineKey(hostaddr, type);
    const entry = wanted.get(key) ?? { hostaddr, type, count: 0 };
    entry.count++;
    wanted.set(key, entry);
  };
  for (const shard of placement.newShards) {
    if (shard.hosts.length === 0) return refused('INVALID_PARAS', 'a new shard needs at least one node');
    shard.hosts.forEach((h) => want(h, 'storage'));
  }
  for (const node of placement.newNodes) {
    if (!cluster?.shards[node.shardId]) return refused('NOT_FOUND', `shard ${node.shardId} is not part of the cluster`);
    want(node.hostaddr, 'storage');
  }
  placement.newComps.forEach((h) => want(h, 'computer'));
  for (const { hostaddr, type, count } of wanted.values()) {
    const machine = state.machines[machineKey(hostaddr, type)];
    if (!machine) return refused('NOT_FOUND', `machine ${hostaddr} is not registered as ${type}`);
    if (machine.nodeStats !== 'running') return refused('NO_RESOURCES', `machine ${hostaddr} (${type}) is ${machine.nodeStats}, not running`);
    const free = freePortCount(state, hostaddr, type);
    if (free < count) return refused('NO_RESOURCES', `machine ${hostaddr} (${type}) has ${free} free ports in ${machine.portLow}-${machine.portHigh}, ${count} needed`);
  }
  return undefined;
}

/** Takes the lowest free port of the host's range for one instance (checked free beforehand). */
function takePort(state: MetaState, hostaddr: string, machineType: MachineType, owner: string): number {
  const outcome = allocatePorts(state, { hostaddr, machineType, count: 1, owner });
  if (!outcome.ok) throw new Error(`port allocation after a successful check failed: ${outcome.message}`);
  return outcome.value[0];
}

/**
 * Adds the placement's instances to the cluster; the caller has checked it with placementProblem.
 * `placedByJob` tags every new record with the job that grew an existing cluster, so a re-run
 * of its placement step finds them and its rollback knows what to remove.
 */
function place(state: MetaState, cluster: ClusterRecord, placement: InstancePlacement, at: number, placedByJob?: string): PlacedInstances {
  const placed: PlacedInstances = { clusterId: cluster.id, shardIds: [], nodeIds: [], compIds: [] };
  const tag = placedByJob === undefined ? {} : { placedByJob };
  const addNode = (shardId: string, hostaddr: string) => {
    const id = String(++state.clusterCounters.node);
    const machine = state.machines[machineKey(hostaddr, 'storage')];
    const port = takePort(state, hostaddr, 'storage', `cluster:${cluster.id}/node:${id}`);
    cluster.shards[shardId].nodes[id] = {
      id,
      hostaddr,
      port,
      serverId: Number(id),
      datadir: machine.datadir,
      logdir: machine.logdir,
      walLogDir: machine.walLogDir,
      ...tag,
    };
    placed.nodeIds.push(id);
    return id;
  };
  for (const shard of placement.newShards) {
    const id = String(++state.clusterCounters.shard);
    cluster.shards[id] = { id, name: shardName(id), masterNodeId: '', nodes: dict(), ...tag };
    placed.shardIds.push(id);
    for (const host of shard.hosts) {
      const nodeId = addNode(id, host);
      if (!cluster.shards[id].masterNodeId) cluster.shards[id].masterNodeId = nodeId;
    }
  }
  for (const node of placement.newNodes) addNode(node.shardId, node.hostaddr);
  for (const hostaddr of placement.newComps) {
    const id = String(++state.clusterCounters.comp);
    const machine = state.machines[machineKey(hostaddr, 'computer')];
    const port = takePort(state, hostaddr, 'computer', `cluster:${cluster.id}/comp:${id}`);
    cluster.comps[id] = { id, name: compName(id), hostaddr, port, compDatadir: machine.compDatadir, ...tag };
    placed.compIds.push(id);
  }
  return placed;
}

/** The cluster a create_cluster job made, if its placement was committed. */
export function clusterCreatedByJob(state: MetaState, jobId: string): ClusterRecord | undefined {
  return Object.values(state.clusters).find((c) => c.createdByJob === jobId);
}

/** Applying the same job's creation twice (a re-run step) returns the first cluster. */
export function applyClusterCreated(state: MetaState, cmd: ClusterCreated): ApplyOutcome<PlacedInstances & { duplicate: boolean }> {
  const earlier = clusterCreatedByJob(state, cmd.jobId);
  if (earlier) {
    const shards = Object.values(earlier.shards);
    return accepted({
      clusterId: earlier.id,
      shardIds: shards.map((s) => s.id),
      nodeIds: shards.flatMap((s) => Object.keys(s.nodes)),
      compIds: Object.keys(earlier.comps),
      duplicate: true,
    });
  }
  if (cmd.placement.newNodes.length > 0) return refused('INVALID_PARAS', 'a new cluster has no shards to add nodes to');
  const problem = placementProblem(state, undefined, cmd.placement);
  if (problem) return problem;
  const idNumber = ++state.clusterCounters.cluster;
  const id = String(idNumber);
  const cluster: ClusterRecord = {
    id,
    name: clusterName(idNumber, cmd.at),
    nickName: cmd.nickName,
    status: 'creating',
    createdByJob: cmd.jobId,
    createdAt: cmd.at,
    options: cmd.options,
    accounts: cmd.accounts,
    shards: dict(),
    comps: dict(),
  };
  state.clusters[id] = cluster;
  return accepted({ ...place(state, cluster, cmd.placement, cmd.at), duplicate: false });
}

/** What a job placed in a cluster (its InstancesPlaced), found by the records' placedByJob tag. */
export function instancesPlacedByJob(cluster: ClusterRecord, jobId: string): PlacedInstances {
  const shards = Object.values(cluster.shards);
  return {
    clusterId: cluster.id,
    shardIds: shards.filter((s) => s.placedByJob === jobId).map((s) => s.id),
    nodeIds: shards.flatMap((s) => Object.values(s.nodes)).filter((n) => n.placedByJob === jobId).map((n) => n.id),
    compIds: Object.values(cluster.comps).filter((c) => c.placedByJob === jobId).map((c) => c.id),
  };
}

/** Applying the same job's placement twice (a re-run step) returns what the first one placed. */
export function applyInstancesPlaced(state: MetaState, cmd: InstancesPlaced): ApplyOutcome<PlacedInstances> {
  const cluster = state.clusters[cmd.clusterId];
  if (!cluster) return refused('NOT_FOUND', `cluster ${cmd.clusterId} does not exist`);
  if (cluster.status === 'deleting') return refused('CONFLICT', `cluster ${cmd.clusterId} is being deleted`);
  const earlier = instancesPlacedByJob(cluster, cmd.jobId);
  if (earlier.shardIds.length + earlier.nodeIds.length + earlier.compIds.length > 0) return accepted(earlier);
  const problem = placementProblem(state, cluster, cmd.placement);
  if (problem) return problem;
  return accepted(place(state, cluster, cmd.placement, cmd.at, cmd.jobId));
}

/** Forgetting an instance that is already gone is a no-op, so a retried removal succeeds. */
export function applyInstancesRemoved(state: MetaState, cmd: InstancesRemoved): ApplyOutcome<{ releasedPorts: number }> {
  const cluster = state.clusters[cmd.clusterId];
  if (!cluster) return refused('NOT_FOUND', `cluster ${cmd.clusterId} does not exist`);
  let releasedPorts = 0;
  const release = (hostaddr: string, port: number) => {
    releasedPorts += releasePorts(state, hostaddr, [port]).released;
  };
  const dropShards = new Set(cmd.shardIds);
  const dropNodes = new Set(cmd.nodeIds);
  for (const shard of Object.values(cluster.shards)) {
    for (const node of Object.values(shard.nodes)) {
      if (!dropShards.has(shard.id) && !dropNodes.has(node.id)) continue;
      release(node.hostaddr, node.port);
      delete shard.nodes[node.id];
    }
    if (dropShards.has(shard.id)) delete cluster.shards[shard.id];
  }
  for (const id of cmd.compIds) {
    const comp = cluster.comps[id];
    if (!comp) continue;
    release(comp.hostaddr, comp.port);
    delete cluster.comps[id];
  }
  return accepted({ releasedPorts });
}

export function applyClusterStatusSet(state: MetaState, cmd: ClusterStatusSet): ApplyOutcome<null> {
  const cluster = state.clusters[cmd.clusterId];
  if (!cluster) return refused('NOT_FOUND', `cluster ${cmd.clusterId} does not exist`);
  cluster.status = cmd.status;
  return accepted(null);
}

/** Deleting a cluster that is already gone is a no-op, so a retried step succeeds. */
export function applyClusterDeleted(state: MetaState, cmd: ClusterDeleted): ApplyOutcome<{ releasedPorts: number; duplicate: boolean }> {
  const cluster = state.clusters[cmd.clusterId];
  if (!cluster) return accepted({ releasedPorts: 0, duplicate: true });
  const removed = applyInstancesRemoved(state, {
    kind: CommandKind.InstancesRemoved,
    at: cmd.at,
    clusterId: cmd.clusterId,
    nodeIds: [],
    compIds: Object.keys(cluster.comps),
    shardIds: Object.keys(cluster.shards),
  });
  delete state.clusters[cmd.clusterId];
  return accepted({ releasedPorts: removed.ok ? removed.value.releasedPorts : 0, duplicate: false });
}
