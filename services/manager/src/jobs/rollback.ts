// The one rollback of every job that puts new instances on hosts (create_cluster,
// add_shards, add_comps, add_nodes): remove each instance the job placed from its host,
// then forget it and return its port. What cannot be removed now (its agent does not
// answer, or the removal failed) is recorded in the replicated state and removed later by
// the leader's RollbackFinisher; its port stays taken until then, so it is never handed to
// a new instance while the old one may still run there. The job's error says what is left.

import { isAgentUnreachable, type Agents } from '@kcm/agent-api';
import type { Logger } from '@kcm/common';
import type { KcmError } from '@kcm/protocol';
import { CommandKind } from '../meta/commands';
import type { ClusterRecord, CompRecord, PendingInstance } from '../meta/state';
import type { Clock, MetaStore } from '../meta/store';
import { orThrow } from './framework/errors';
import { removeComp, removeStorageNode, storageNodes, syncCompCatalogs } from './instance-ops';
import type { StepContext } from './framework/workflow';
import type { SecretBox } from '../secrets/secret-box';

export interface RollbackDeps {
  store: MetaStore;
  agents: Agents;
  logger: Logger;
  now: Clock;
  secrets: SecretBox;
}

/** What a failed job has to take back. */
export interface RollbackPlan {
  clusterId: string;
  instances: PendingInstance[];
  /** Shards the job placed, forgotten with their last node. */
  shardIds: string[];
  /** The job created the cluster: forgotten with its last instance. */
  deleteCluster: boolean;
}

/** create_cluster's rollback: the whole cluster. */
export function wholeClusterPlan(cluster: ClusterRecord): RollbackPlan {
  return {
    clusterId: cluster.id,
    instances: [
      ...storageNodes(cluster).map(({ node }) => pendingInstance('storage node', node)),
      ...Object.values(cluster.comps).map(compInstance),
    ],
    shardIds: Object.keys(cluster.shards),
    deleteCluster: true,
  };
}

/** A grow job's rollback (add_shards, add_comps, add_nodes): what its records are tagged with. */
export function placedByJobPlan(cluster: ClusterRecord, jobId: string): RollbackPlan {
  return {
    clusterId: cluster.id,
    instances: [
      ...storageNodes(cluster).filter(({ shard, node }) => node.placedByJob === jobId || shard.placedByJob === jobId).map(({ node }) => pendingInstance('storage node', node)),
      ...Object.values(cluster.comps).filter((c) => c.placedByJob === jobId).map(compInstance),
    ],
    shardIds: Object.values(cluster.shards).filter((s) => s.placedByJob === jobId).map((s) => s.id),
    deleteCluster: false,
  };
}

const pendingInstance = (kind: PendingInstance['kind'], i: { id: string; hostaddr: string; port: number }): PendingInstance => ({ kind, id: i.id, hostaddr: i.hostaddr, port: i.port });
const compInstance = (comp: CompRecord): PendingInstance => ({ ...pendingInstance('compute node', comp), compDatadir: comp.compDatadir });

/** Stops the instance, deletes its directories (the data dir included) and its cgroup. */
export function removeInstance(agents: Agents, jobId: string, instance: PendingInstance): Promise<void> {
  return instance.kind === 'storage node' ? removeStorageNode(agents, jobId, instance) : removeComp(agents, jobId, instance);
}

export const describeInstance = (i: PendingInstance): string => `${i.kind} ${i.id} at ${i.hostaddr}:${i.port}`;

export interface RemovalRound {
  removed: PendingInstance[];
  left: { instance: PendingInstance; err: unknown }[];
}

/** Removes every instance at once and waits for all of them. */
export async function removeAll(agents: Agents, jobId: string, instances: PendingInstance[]): Promise<RemovalRound> {
  const settled = await Promise.allSettled(instances.map((i) => removeInstance(agents, jobId, i)));
  const round: RemovalRound = { removed: [], left: [] };
  settled.forEach((s, k) => (s.status === 'fulfilled' ? round.removed.push(instances[k]) : round.left.push({ instance: instances[k], err: s.reason })));
  return round;
}

/** Forgets removed instances (ports returned); the pending record ends with its last one. */
export async function forgetRemoved(store: MetaStore, now: Clock, jobId: string, removed: PendingInstance[]): Promise<void> {
  orThrow(
    await store.propose({
      kind: CommandKind.RollbackInstancesRemoved,
      at: now(),
      jobId,
      nodeIds: removed.filter((i) => i.kind === 'storage node').map((i) => i.id),
      compIds: removed.filter((i) => i.kind === 'compute node').map((i) => i.id),
    }),
  );
}

/**
 * What is left on each host, for the job's error: "rollback incomplete: agent 127.0.2.3
 * unreachable; storage node 12 at 127.0.2.3:50010 and compute node 3 at 127.0.2.3:55220
 * will be removed when it answers".
 */
export function incompleteRollbackNote(left: RemovalRound['left']): string {
  const byHost = new Map<string, RemovalRound['left']>();
  for (const entry of left) byHost.set(entry.instance.hostaddr, [...(byHost.get(entry.instance.hostaddr) ?? []), entry]);
  const parts = [...byHost].map(([host, entries]) => {
    const what = entries.map((e) => describeInstance(e.instance));
    const list = what.length === 1 ? what[0] : `${what.slice(0, -1).join(', ')} and ${what.at(-1)}`;
    if (entries.every((e) => isAgentUnreachable(e.err))) return `agent ${host} unreachable; ${list} will be removed when it answers`;
    const why = entries.map((e) => (e.err instanceof Error ? e.err.message : String(e.err))).join('; ');
    return `removal failed on ${host} (${why}); ${list} will be removed on a later try`;
  });
  return `rollback incomplete: ${parts.join('; ')}`;
}

/**
 * Rolls back what `plan` names for job `jobId`. Returns undefined when everything is gone,
 * or the note for the job's error naming what is left and where (recorded for later).
 */
export async function rollBackJob(deps: RollbackDeps, jobId: string, jobType: string, plan: RollbackPlan): Promise<string | undefined> {
  const { store, agents } = deps;
  const log = deps.logger.child({ jobId, clusterId: plan.clusterId });
  if (plan.instances.length === 0 && plan.shardIds.length === 0 && !plan.deleteCluster) return undefined;
  const round = await removeAll(agents, jobId, plan.instances);
  const note = round.left.length > 0 ? incompleteRollbackNote(round.left) : undefined;
  // Recorded with every instance, then the removed ones forgotten: one path, whether or
  // not something is left, and a member that dies in between leaves a record, not an orphan.
  orThrow(
    await store.propose({
      kind: CommandKind.RollbackRecorded,
      at: deps.now(),
      jobId,
      jobType,
      clusterId: plan.clusterId,
      instances: plan.instances,
      shardIds: plan.shardIds,
      deleteCluster: plan.deleteCluster,
      reason: note ?? '',
    }),
  );
  await forgetRemoved(store, deps.now, jobId, round.removed);
  if (note) {
    log.warn({ left: round.left.map((l) => describeInstance(l.instance)) }, `${jobType} ${note}`);
    return note;
  }
  log.info({ instances: plan.instances.length }, `${jobType} rolled back: instances removed, ports returned`);
  if (plan.shardIds.length > 0 && !plan.deleteCluster) await resyncCatalogs(deps, jobId, plan.clusterId);
  return undefined;
}

/** A grow job's rollback (add_shards, add_comps, add_nodes), logged like create_cluster's. */
export async function rollBackPlacement(deps: RollbackDeps, jobId: string, jobType: string, clusterId: string, failedStep: string, reason: string): Promise<string | undefined> {
  const cluster = deps.store.state().clusters[clusterId];
  if (!cluster) return undefined; // deleted under the job: nothing of it is left to take back
  deps.logger.warn({ jobId, clusterId, failedStep, reason }, `${jobType} failed: removing what it placed`);
  return rollBackJob(deps, jobId, jobType, placedByJobPlan(cluster, jobId));
}

/**
 * The rollback of every grow job (add_shards, add_comps, add_nodes): removes what the job
 * placed in the cluster its paras name.
 */
export function rollBackGrowJob(jobType: 'add_shards' | 'add_comps' | 'add_nodes') {
  return (ctx: StepContext<{ cluster_id: string }, object>, failedStep: string, error: KcmError): Promise<string | undefined> =>
    rollBackPlacement({ store: ctx, agents: ctx.agents, logger: ctx.logger, now: ctx.now, secrets: ctx.secrets }, ctx.jobId, jobType, ctx.paras.cluster_id, failedStep, error.message);
}

/** The remaining compute nodes forget the dropped shards' foreign tables (the catalog sync would, within seconds). */
async function resyncCatalogs(deps: RollbackDeps, jobId: string, clusterId: string): Promise<void> {
  const cluster = deps.store.state().clusters[clusterId];
  if (!cluster) return;
  try {
    await syncCompCatalogs(deps.agents, deps.secrets, jobId, 'uncatalog', cluster, Object.values(cluster.comps));
  } catch (err) {
    deps.logger.warn({ jobId, clusterId, err: (err as Error).message }, 'catalog sync after rollback failed; the periodic catalog sync retries');
  }
}
