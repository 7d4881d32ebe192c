// Job: manual_switch (reference system's name and paras): a planned switchover of a shard's
// master to a chosen standby. Writes are held only while that standby catches up and the
// compute nodes are re-pointed; the stall is measured and reported.
//
// Refused before anything is committed: an unknown node, master_hostaddr not the shard's
// master, assign_hostaddr not a standby of that shard (or fenced). Refused by the first step,
// before any write is held: the standby not replicating from the master, or further behind
// it than manualSwitchMaxBehindTrx.
//
// The hot path is one step, so no Raft commit of a step output lands inside the stall:
//   the shard held on every compute node (statements for it wait there; open transactions
//   get switchDrainMs to end: compute-holds.ts, docs/ride-through.md) ->
//   old master read-only (Fence without stop) -> standby reaches the old master's
//   gtid_binlog_pos (bounded) -> promote it -> commit the topology -> re-point the old
//   master, the other standbys and the compute nodes at it, all at once -> the holds released
//   (also when the switch fails: the waiting statements then run on the old master).
// The topology is committed before the compute nodes are re-pointed, since the leader's
// catalog sync points them at the master the metadata names: the other order could undo
// the re-point. The compute nodes are not made to wait for the standbys: a write that
// reaches the new master first waits for a standby's semi-sync ack, which comes when the
// standby attaches (well inside rpl_semi_sync_master_timeout), so it is held, not failed.
// A failure before the promotion gives writes back to the old master (Promote on it).
// Re-run by a new leader, the step finds what its earlier run did (the metadata already
// naming the new master, or the standby already writable) and carries on from there.
//
// The promote, re-point and topology primitives are the failover's (promote.ts,
// repoint-computes.ts); this file only orders them for a planned switch.

import { randomUUID } from 'node:crypto';
import { gtidProgress, type Agents, type MariaDbHaStatusReply } from '@kcm/agent-api';
import { KcmError, parseIpPort, type ManualSwitchResult, type ParasOf, type SwitchStepTiming } from '@kcm/protocol';
import type { ClusterRecord, MetaState, ShardRecord, StorageNodeRecord } from '../../meta/state';
import { changeableCluster, clusterOfStep, shardOf } from '../cluster-lookup';
import { CommandKind } from '../../meta/commands';
import { orThrow } from '../framework/errors';
import { opId } from '../instance-ops';
import type { JobOf, StepContext } from '../framework/workflow';
import { cutEndedSessions, DEFAULT_SHARD_HOLD, describeHolds, holdShardOnComputes, releaseShardOnComputes, type ShardHoldLimits, type ShardHolds } from './compute-holds';
import { commitNewMaster, promoteNode, repointStandbys } from './promote';
import { repointComputes } from './repoint-computes';
import { shardView, standbyProblem, where } from './shard-view';

type SwitchParas = ParasOf<'manual_switch'>;

export interface ManualSwitchLimits {
  /** A standby further behind than this many transactions is refused. */
  maxBehindTrx: number;
  /** How long writes may be held waiting for the standby to reach the master's position. */
  catchUpMs: number;
  /** The compute nodes' hold on the shard (config switchHoldMs, switchDrainMs); default DEFAULT_SHARD_HOLD. */
  hold?: ShardHoldLimits;
}

export const DEFAULT_MANUAL_SWITCH_LIMITS: ManualSwitchLimits = { maxBehindTrx: 1_000, catchUpMs: 5_000, hold: DEFAULT_SHARD_HOLD };

const asIpPort = (n: { hostaddr: string; port: number }) => `${n.hostaddr}_${n.port}`;

/** The storage node at `<ip>_<port>` in any cluster, with its cluster and shard. */
function storageNodeAt(state: MetaState, ipPort: string) {
  const at = parseIpPort(ipPort);
  if (!at.ok) return undefined; // the paras schema has checked it
  const { hostaddr, port } = at.value;
  for (const cluster of Object.values(state.clusters)) {
    for (const shard of Object.values(cluster.shards)) {
      const node = Object.values(shard.nodes).find((n) => n.hostaddr === hostaddr && n.port === port);
      if (node) return { cluster, shard, node };
    }
  }
  return undefined;
}

interface SwitchTarget {
  cluster: ClusterRecord;
  shard: ShardRecord;
  master: StorageNodeRecord;
  assign: StorageNodeRecord;
  /** The shard's other nodes, re-pointed at the new master with the old one. */
  others: StorageNodeRecord[];
}

/** The nodes the paras name, checked against the metadata: refusals name the field. */
function switchTarget(state: MetaState, p: SwitchParas): SwitchTarget {
  const cluster = changeableCluster(state, p.cluster_id);
  const shard = shardOf(cluster, p.shard_id);
  const named = (field: 'master_hostaddr' | 'assign_hostaddr') => {
    const found = storageNodeAt(state, p[field]);
    if (!found) throw KcmError.of('NOT_FOUND', `paras.${field}: ${p[field]} is not a storage node kcm manages`, { field: `paras.${field}` });
    if (found.shard !== shard) {
      throw KcmError.of('CONFLICT', `paras.${field}: ${p[field]} is a node of shard ${found.shard.id} of cluster ${found.cluster.id}, not of shard ${shard.id} of cluster ${cluster.id}`, {
        field: `paras.${field}`,
      });
    }
    return found.node;
  };
  const master = named('master_hostaddr');
  if (master.id !== shard.masterNodeId) {
    const current = shard.nodes[shard.masterNodeId];
    throw KcmError.of('CONFLICT', `paras.master_hostaddr: ${p.master_hostaddr} is not the master of shard ${shard.id}${current ? `; its master is ${asIpPort(current)}` : ''}`, {
      field: 'paras.master_hostaddr',
    });
  }
  const assign = named('assign_hostaddr');
  if (assign.fenced) {
    throw KcmError.of('CONFLICT', `paras.assign_hostaddr: ${p.assign_hostaddr} is fenced (${assign.fenced.reason}); it is not a standby of shard ${shard.id} until it rejoins`, {
      field: 'paras.assign_hostaddr',
    });
  }
  const others = Object.values(shard.nodes).filter((n) => n.id !== master.id && n.id !== assign.id && !n.fenced);
  return { cluster, shard, master, assign, others };
}

/** How far the standby is behind the master, in transactions, as both measure it now; refuses an unfit standby. */
function checkStandby(p: SwitchParas, master: MariaDbHaStatusReply, standby: MariaDbHaStatusReply, target: SwitchTarget, limits: ManualSwitchLimits): number {
  const refuse = (why: string) => {
    throw KcmError.of('CONFLICT', `paras.assign_hostaddr: ${p.assign_hostaddr} cannot take over shard ${target.shard.id}: ${why}; nothing was changed`, { field: 'paras.assign_hostaddr' });
  };
  if (!master.answering || master.read_only || master.is_replica) {
    throw KcmError.of('CONFLICT', `paras.master_hostaddr: ${p.master_hostaddr} is not a writable master now (${master.answering ? (master.read_only ? 'read-only' : 'replicating') : master.reason || 'not answering'}); nothing was changed`, {
      field: 'paras.master_hostaddr',
    });
  }
  const unfit = standbyProblem(standby, target.master);
  if (unfit) refuse(unfit);
  const behind = Math.max(0, gtidProgress(master.gtid_binlog_pos) - gtidProgress(standby.gtid_current_pos));
  if (behind > limits.maxBehindTrx) {
    refuse(`it is ${behind} transactions behind the master (${standby.gtid_current_pos || 'empty'} vs ${master.gtid_binlog_pos}), more than manualSwitchMaxBehindTrx ${limits.maxBehindTrx}`);
  }
  return behind;
}

/** Beyond the protocol's fields: which compute nodes held the shard, which did not and why, and what the drain ended. */
export type SwitchResult = ManualSwitchResult & ReturnType<typeof describeHolds> & { sessions_cut: Record<string, string> };

export interface SwitchOutput {
  result: SwitchResult;
}

/** Gives writes back to the old master after a switch that stopped before the promotion. */
async function releaseOldMaster(agents: Agents, run: string, target: SwitchTarget): Promise<string> {
  try {
    await promoteNode(agents, `${run}-undo`, target.cluster, target.master);
    return `writes were given back to ${where(target.master)}`;
  } catch (err) {
    // Left read-only: the failure detector sees a shard without a writable master and acts.
    return `giving writes back to ${where(target.master)} failed too: ${(err as Error).message}`;
  }
}

/**
 * The switch itself (the 'switch master' step), also for other jobs that move a master the
 * same way (upgrade_cluster): the shard is held on the compute nodes for the whole of it.
 */
export async function switchMaster(ctx: StepContext<SwitchParas>, p: SwitchParas, limits: ManualSwitchLimits): Promise<SwitchOutput> {
  // Agents answer a repeated op_id with its first result without acting. Each run of this
  // step acts again: a run after a crash that had given writes back to the old master must
  // really make it read-only again, not be told it did.
  const run = `${ctx.jobId}-${randomUUID().slice(0, 8)}`;
  const steps: SwitchStepTiming[] = [];
  // The stall starts when writes are held (reset below); a re-run that finds them moved already counts from its own start.
  let started = performance.now();
  let mark = started;
  const lap = (step: string) => {
    const t = performance.now();
    steps.push({ step, ms: String(Math.round(t - mark)) });
    mark = t;
  };
  const view = shardView(ctx.state(), p.cluster_id, p.shard_id);
  const assignAt = parseIpPort(p.assign_hostaddr);
  const assign = assignAt.ok ? Object.values(view.shard.nodes).find((n) => n.hostaddr === assignAt.value.hostaddr && n.port === assignAt.value.port) : undefined;
  if (!assign) throw KcmError.of('NOT_FOUND', `paras.assign_hostaddr: ${p.assign_hostaddr} is no longer a node of shard ${p.shard_id}`);
  const committed = view.master.id === assign.id;
  // Before the commit, the old master is the metadata's master; after it, the one the paras named.
  const oldAt = parseIpPort(p.master_hostaddr);
  const old = committed ? Object.values(view.shard.nodes).find((n) => oldAt.ok && n.hostaddr === oldAt.value.hostaddr && n.port === oldAt.value.port) : view.master;
  if (!old) throw KcmError.of('NOT_FOUND', `paras.master_hostaddr: ${p.master_hostaddr} is no longer a node of shard ${p.shard_id}`);
  const target: SwitchTarget = { cluster: view.cluster, shard: view.shard, master: old, assign, others: Object.values(view.shard.nodes).filter((n) => n.id !== old.id && n.id !== assign.id && !n.fenced) };
  const ha = (n: StorageNodeRecord) => ctx.agents.mariadbHa(n.hostaddr);
  let gtidPos = '';
  let standbysRepointed: string[] = [];
  let standbysFailed: string[] = [];
  let compsRepointed: string[] = [];

  // Before the old master stops taking writes: from here statements for the shard wait on
  // the compute nodes (a re-run after the commit has nothing left to hold them for).
  let holds: ShardHolds = { shardId: p.shard_id, held: [], notHeld: [] };
  let sessionsCut: Record<string, string> = Object.create(null);
  if (!committed) {
    started = mark = performance.now();
    holds = await holdShardOnComputes(ctx.agents, view.cluster, p.shard_id, limits.hold ?? DEFAULT_SHARD_HOLD, ctx.logger);
    sessionsCut = await cutEndedSessions(ctx.agents, holds, old);
    lap('hold the shard on the compute nodes');
  }
  try {
    if (!committed) {
      const assignNow = await ha(assign).replicationStatus(assign.port);
      const promotedEarlier = assignNow.answering && !assignNow.is_replica && !assignNow.read_only;
      if (!promotedEarlier) {
        const held = await ha(old).fence(opId(run, 'hold-writes', `node-${old.id}`), old.port, false);
        lap('hold writes on the old master');
        if (!held.made_read_only) {
          const undo = await releaseOldMaster(ctx.agents, run, target);
          throw KcmError.of('INSTANCE_FAILED', `${where(old)} could not be made read-only to hold writes; ${undo}`);
        }
        gtidPos = held.gtid_binlog_pos;
        try {
          const caught = await ha(assign).waitForGtid(assign.port, gtidPos, limits.catchUpMs);
          if (!caught.reached) throw KcmError.of('TIMEOUT', `${where(assign)} did not reach ${gtidPos} within ${limits.catchUpMs} ms (at ${caught.gtid_current_pos})`);
          lap('standby caught up');
        } catch (err) {
          const undo = await releaseOldMaster(ctx.agents, run, target);
          const message = `${(err as Error).message}; ${undo}`;
          throw err instanceof KcmError ? KcmError.of(err.errorName, message, { cause: err }) : new Error(message, { cause: err });
        }
      }
      const promoted = await promoteNode(ctx.agents, run, target.cluster, assign);
      gtidPos ||= promoted.gtid_current_pos;
      lap('promote the standby');
      await commitNewMaster(ctx, { jobId: ctx.jobId, clusterId: p.cluster_id, shardId: p.shard_id }, old, assign, {
        fenceOldMaster: false,
        reason: 'manual_switch',
        successorGtid: promoted.gtid_current_pos,
      });
      lap('commit the topology');
    }
    // Standbys and compute nodes at once: a client write that reaches the new master before a
    // standby is attached waits for its acknowledgement (semi-sync acks a waiting transaction
    // once a standby connects and reaches it), it does not fail; one after the other made the
    // stall their sum.
    const [repointed, comps] = await Promise.all([
      repointStandbys(ctx.agents, ctx.secrets, run, target.cluster, assign, [old, ...target.others].filter((n) => n.id === old.id || !n.fenced)),
      repointComputes(ctx.agents, ctx.secrets, run, () => clusterOfStep(ctx, p.cluster_id), ctx.signal),
    ]);
    lap('re-point the standbys and the compute nodes');
    compsRepointed = comps.comps.map((c) => c.comp_id);
    standbysRepointed = repointed.repointed.map(asIpPort);
    standbysFailed = repointed.failed.map((f) => f.error);
    if (repointed.failed.some((f) => f.node_id === old.id)) {
      // The old master is read-only on every start (Fence wrote its role), but not a standby:
      // recorded fenced, so the rejoin path takes it on, as after a failover.
      orThrow(
        await ctx.propose({ kind: CommandKind.NodeFenceSet, at: ctx.now(), clusterId: p.cluster_id, shardId: p.shard_id, nodeId: old.id, fenced: true, jobId: ctx.jobId, reason: 'manual_switch: could not be re-pointed as a standby' }),
      );
    }
  } finally {
    await releaseShardOnComputes(ctx.agents, holds, ctx.logger);
  }
  if (holds.held.length > 0) lap('release the holds');
  // Until the compute nodes' statements go on, on the new master.
  const stallMs = Math.round(performance.now() - started);
  const cluster = clusterOfStep(ctx, p.cluster_id);
  return {
    result: {
      cluster_id: p.cluster_id,
      shard_id: p.shard_id,
      old_master: asIpPort(old),
      new_master: asIpPort(assign),
      gtid_pos: gtidPos,
      // From the moment the shard was held on the compute nodes (the old master turned read-only
      // right after) to the compute nodes' statements going on, on the new master.
      write_stall_ms: String(stallMs),
      standbys_repointed: standbysRepointed.join(','),
      standbys_failed: standbysFailed.join('; '),
      comps_repointed: compsRepointed.map((id) => cluster.comps[id]?.name ?? `comp_${id}`).join(','),
      list_step: steps,
      ...describeHolds(holds),
      sessions_cut: sessionsCut,
    },
  };
}

export function manualSwitchJob(limits: ManualSwitchLimits = DEFAULT_MANUAL_SWITCH_LIMITS): JobOf<'manual_switch', { 'check the standby': { behind_trx: number }; 'switch master': SwitchOutput }> {
  return {
    jobType: 'manual_switch',
    validate: (p, state) => void switchTarget(state, p),
    // The shard's topology changes: ordered with every other job on the cluster (failover included).
    lockKey: (p) => `cluster:${p.cluster_id}`,
    steps: (p) => [
      {
        name: 'check the standby',
        async run(ctx) {
          const target = switchTarget(ctx.state(), p);
          const [master, standby] = await Promise.all([
            ctx.agents.mariadbHa(target.master.hostaddr).replicationStatus(target.master.port),
            ctx.agents.mariadbHa(target.assign.hostaddr).replicationStatus(target.assign.port),
          ]);
          return { behind_trx: checkStandby(p, master, standby, target, limits) };
        },
      },
      { name: 'switch master', run: (ctx) => switchMaster(ctx, p, limits) },
    ],
    result: (outputs) => outputs['switch master'].result,
  };
}
