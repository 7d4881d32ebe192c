// Dry runs (`"dry_run": "1"` in a mutating job's paras): the job is validated against the
// live state exactly as a submission would be, and the answer is its plan (steps, lock,
// placement and ports where the job places instances) with nothing committed. The ports are
// taken in a copy of the state, in the order the real placement takes them, so they are the
// ones a submission made now would get.

import { allocatePorts } from '../meta/ports';
import type { ClusterRecord, MachineType, MetaState } from '../meta/state';
import type { ShardPlacement } from './placement';

export interface PlannedInstance {
  hostaddr: string;
  port: string;
}

/** Ports for the placed instances as the apply would take them: every shard's nodes in order, then the compute nodes. */
export function previewPorts(state: MetaState, shards: readonly ShardPlacement[], comps: readonly string[]): { shards: { master: PlannedInstance; standbys: PlannedInstance[] }[]; comps: PlannedInstance[] } {
  const scratch = structuredClone(state);
  const take = (hostaddr: string, machineType: MachineType): PlannedInstance => {
    const outcome = allocatePorts(scratch, { hostaddr, machineType, count: 1, owner: 'dry-run' });
    return { hostaddr, port: outcome.ok ? String(outcome.value[0]) : `none free (${outcome.message})` };
  };
  const plannedShards = shards.map((s) => {
    const [master, ...standbys] = s.hosts.map((h) => take(h, 'storage'));
    return { master, standbys };
  });
  return { shards: plannedShards, comps: comps.map((h) => take(h, 'computer')) };
}

/** What removing a cluster takes away: every instance, with the port it gives back. */
export function removalPlan(cluster: ClusterRecord): Record<string, unknown> {
  return {
    cluster_id: cluster.id,
    cluster_name: cluster.name,
    storage_nodes: Object.values(cluster.shards).flatMap((s) => Object.values(s.nodes).map((n) => ({ shard: s.name, hostaddr: n.hostaddr, port: String(n.port), master: String(n.id === s.masterNodeId) }))),
    comps: Object.values(cluster.comps).map((c) => ({ comp: c.name, hostaddr: c.hostaddr, port: String(c.port) })),
  };
}
