// shard_failover: replaces a failed shard master. An internal job type: submitted only by
// the leader's failure detector (leader/shard-failure-detector.ts), never accepted from Emit (it
// is not in the protocol's job types), but a job like any other: visible in get_status,
// one step at a time with each step's output committed, resumed by a new leader at its
// first unfinished step.
//
// The steps, in this order (fencing comes first so that nothing the old master might
// still commit is lost to a promotion that did not wait for it; the topology is committed
// right after the promotion so that the leader's catalog sync, which follows the metadata,
// re-points compute nodes to the new master and never back to the old one):
//   fence old master -> choose candidate -> promote candidate -> commit topology ->
//   re-point standbys -> re-point compute nodes.
// The first step holds the shard on every compute node before it fences (compute-holds.ts,
// docs/ride-through.md): statements issued meanwhile wait there, bounded by the hold's own
// deadline (switchHoldMs), instead of retrying connections to the dead master; the last step
// releases them once the compute nodes are re-pointed. A job that fails in between leaves
// them to their deadline.
// The old master rejoins in a shard_rejoin job of its own, which the detector submits once
// its agent answers, under a lock of its own (`rejoin:cluster:<id>`): its restart and maybe
// a rebuild from a copy take seconds, and while they run the cluster lock stays free, so
// the detector can fail the new master over at once if it dies too.

import { setTimeout as sleep } from 'node:timers/promises';
import { KcmError } from '@kcm/protocol';
import type { JobDefinition, JobStep } from '../framework/workflow';
import { chooseCandidate, surveyStandbys, type CandidateChoice } from './choose-candidate';
import { DEFAULT_SHARD_HOLD, describeHolds, holdShardOnComputes, releaseShardOnComputes, type ShardHolds } from './compute-holds';
import { FENCED_BY_METADATA_ONLY, fenceNode, type FenceOutcome } from './fence';
import { commitNewMaster, preparedXaOn, promoteNode, repointStandbys, type PromoteOutcome, type RepointOutcome } from './promote';
import { rejoinFencedNode, type RejoinOutcome } from './rejoin';
import { repointComputes, type ComputeRepointOutcome } from './repoint-computes';
import { nodeOf, shardView, timed } from './shard-view';
import { opId } from '../instance-ops';
import type { MasterLeaseClock } from '../../leader/master-leases';
import type { MetaState } from '../../meta/state';

export const SHARD_FAILOVER = 'shard_failover';
export const SHARD_REJOIN = 'shard_rejoin';

export interface ShardFailoverParas {
  cluster_id: string;
  shard_id: string;
  /** The master the detector found failed; the job refuses to act when the shard's master is another by now. */
  failed_node_id: string;
  /** The evidence the detector acted on. */
  reason: string;
}

type Timed<T> = T & { ms: number };

/** What the failover needs beyond the step services. */
export interface FailoverDeps {
  /** The leader's leases on shard masters (leader/master-leases.ts). */
  leases: MasterLeaseClock;
  /** The compute nodes' hold on the shard (manager config switchHoldMs; default DEFAULT_SHARD_HOLD's). */
  holdMs?: number;
}

interface FailoverOutputs {
  'fence old master': Timed<FenceOutcome & { lease_wait_ms: number; compute_holds?: ShardHolds }>;
  'choose candidate': Timed<CandidateChoice>;
  'promote candidate': Timed<PromoteOutcome>;
  'commit topology': Timed<{ master_node_id: string; duplicate: boolean }>;
  're-point standbys': Timed<RepointOutcome>;
  're-point compute nodes': Timed<ComputeRepointOutcome>;
}

type Step = JobStep<ShardFailoverParas, FailoverOutputs>;

const ids = (jobId: string, p: ShardFailoverParas) => ({ jobId, clusterId: p.cluster_id, shardId: p.shard_id });

function failoverSteps(deps: FailoverDeps): Step[] {
  return [
    {
      name: 'fence old master',
      run: (ctx) =>
        timed(async () => {
          const { shard } = shardView(ctx.state(), ctx.paras.cluster_id, ctx.paras.shard_id);
          const old = nodeOf(shard, ctx.paras.failed_node_id);
          if (shard.masterNodeId !== old.id && !old.fenced) {
            throw KcmError.of('CONFLICT', `node ${old.id} is no longer the master of shard ${shard.id} (node ${shard.masterNodeId} is)`);
          }
          // Nothing to promote: fencing would leave the shard with no master at all, where the
          // agent's supervisor would at least bring the old one back. NO_RESOURCES, nothing fenced.
          if (shard.masterNodeId === old.id) {
            chooseCandidate(await surveyStandbys(ctx.agents, Object.values(shard.nodes).filter((n) => n.id !== old.id)));
          }
          // Beside the fence, not before it: the master is gone, and whatever was open on it with
          // it (no drain); a compute host slow to answer must not delay the fence.
          const holding = holdShardOnComputes(ctx.agents, shardView(ctx.state(), ctx.paras.cluster_id, ctx.paras.shard_id).cluster, shard.id, { holdMs: deps.holdMs ?? DEFAULT_SHARD_HOLD.holdMs, drainMs: 0 }, ctx.logger);
          const [fenced, holds] = await Promise.all([
            fenceNode(ctx, { ...ids(ctx.jobId, ctx.paras), op: opId(ctx.jobId, 'fence', `node-${old.id}`) }, old, { stop: true, reason: `failed master: ${ctx.paras.reason}` }),
            holding,
          ]);
          if (fenced.how !== FENCED_BY_METADATA_ONLY) return { ...fenced, lease_wait_ms: 0, compute_holds: holds };
          // Its agent cannot be reached, so nobody killed it: it may still be running, cut off.
          // No one renews its lease since the fence was recorded; once the lease has run out its
          // agent has fenced it, or its host still reaches every standby (then they did not lose
          // it and this failover would not have been submitted). Only then may another take writes.
          const waitMs = deps.leases.msUntilLeaseEnds(old.id);
          await sleep(waitMs, undefined, { signal: ctx.signal }); // a leader that loses office stops waiting
          return { ...fenced, how: `${fenced.how}; its lease ran out`, lease_wait_ms: waitMs, compute_holds: holds };
        }),
    },
    {
      name: 'choose candidate',
      run: (ctx) =>
        timed(async () => {
          const { shard } = shardView(ctx.state(), ctx.paras.cluster_id, ctx.paras.shard_id);
          const standbys = Object.values(shard.nodes).filter((n) => n.id !== ctx.paras.failed_node_id);
          return chooseCandidate(await surveyStandbys(ctx.agents, standbys));
        }),
    },
    {
      name: 'promote candidate',
      run: (ctx) =>
        timed(async () => {
          const { cluster, shard } = shardView(ctx.state(), ctx.paras.cluster_id, ctx.paras.shard_id);
          const candidate = nodeOf(shard, ctx.outputs['choose candidate'].node_id);
          const promoted = await promoteNode(ctx.agents, ctx.jobId, cluster, candidate);
          // Read before any compute node writes to it: every branch it holds came from the old master.
          return { ...promoted, prepared_xa: await preparedXaOn(ctx.agents, candidate) };
        }),
    },
    {
      name: 'commit topology',
      run: (ctx) =>
        timed(async () => {
          const { shard } = shardView(ctx.state(), ctx.paras.cluster_id, ctx.paras.shard_id);
          const next = nodeOf(shard, ctx.outputs['choose candidate'].node_id);
          const promoted = ctx.outputs['promote candidate'];
          // A promotion re-run after later writes reports a later position; the choice's is the safe base then.
          const successorGtid = promoted.already_master ? ctx.outputs['choose candidate'].gtid : promoted.gtid_current_pos;
          const { duplicate } = await commitNewMaster(ctx, ids(ctx.jobId, ctx.paras), nodeOf(shard, ctx.paras.failed_node_id), next, {
            fenceOldMaster: true,
            reason: `replaced by node ${next.id} (${ctx.paras.reason})`,
            successorGtid,
          });
          return { master_node_id: next.id, duplicate };
        }),
    },
    {
      name: 're-point standbys',
      run: (ctx) =>
        timed(async () => {
          const { cluster, master, others } = shardView(ctx.state(), ctx.paras.cluster_id, ctx.paras.shard_id);
          return repointStandbys(ctx.agents, ctx.secrets, ctx.jobId, cluster, master, others.filter((n) => !n.fenced));
        }),
    },
    {
      name: 're-point compute nodes',
      run: (ctx) => {
        const view = () => shardView(ctx.state(), ctx.paras.cluster_id, ctx.paras.shard_id);
        return timed(async () => {
          const repointed = await repointComputes(ctx.agents, ctx.secrets, ctx.jobId, () => view().cluster, ctx.signal, { oldMaster: nodeOf(view().shard, ctx.paras.failed_node_id) });
          const holds = ctx.outputs['fence old master'].compute_holds;
          if (holds) await releaseShardOnComputes(ctx.agents, holds, ctx.logger);
          return repointed;
        });
      },
    },
  ];
}

/** The failover's step names (the same whatever its deps): what the detector submits. */
export const FAILOVER_STEP_NAMES = failoverSteps({ leases: { msUntilLeaseEnds: () => 0 } }).map((s) => s.name);

function rejoinStep(state: () => MetaState, services: Parameters<typeof rejoinFencedNode>[0], jobId: string, clusterId: string, shardId: string, nodeId: string): Promise<RejoinOutcome> {
  const { shard } = shardView(state(), clusterId, shardId);
  const node = nodeOf(shard, nodeId);
  if (!node.fenced) return Promise.resolve({ node_id: node.id, hostaddr: node.hostaddr, port: node.port, outcome: 'not fenced: nothing to do', discarded_gtids: [], gtid_binlog_pos: '' });
  return rejoinFencedNode(services, { jobId, clusterId }, () => shardView(state(), clusterId, shardId), node, preparedOnSuccessorOf(state(), node.fenced.byJob));
}

/**
 * The XA branches the successor held prepared when the failover that fenced this node
 * promoted it (that job's promote step output), or undefined when another job fenced it.
 */
function preparedOnSuccessorOf(state: MetaState, fencedByJob: string): string[] | undefined {
  const job = state.jobs[fencedByJob];
  if (job?.jobType !== SHARD_FAILOVER) return undefined;
  const promoted = job.stepOutputs[String(job.stepNames.indexOf('promote candidate'))] as { prepared_xa?: string[] } | undefined;
  return promoted?.prepared_xa;
}

export interface ShardFailoverResult {
  cluster_id: string;
  shard_id: string;
  reason: string;
  /** lease_wait_ms: how long the promotion waited for the lease of an old master its agent could not fence. */
  old_master: { node_id: string; hostaddr: string; port: number; fenced: string; lease_wait_ms: number; rejoin: string };
  new_master: { node_id: string; hostaddr: string; port: number; gtid_at_promotion: string };
  standbys_repointed: string[];
  standbys_not_repointed: string[];
  compute_nodes_repointed: string[];
  /** Per compute host: its connections to the old master closed (`N closed`), or why not. */
  compute_connections_to_old_master_cut: Record<string, string>;
  /** Compute nodes that held the shard's statements through the failover, and those that could not (with why). */
  comps_held: string;
  comps_not_held: string;
  /** Each step's duration (ms), by step name, and their sum. */
  step_ms: Record<string, number>;
  total_ms: number;
}

export function shardFailoverJob(deps: FailoverDeps): JobDefinition<ShardFailoverParas, FailoverOutputs, ShardFailoverResult> {
  const steps = failoverSteps(deps);
  return {
    jobType: SHARD_FAILOVER,
    lockKey: failoverLockKey,
    steps: () => steps,
    result(o, p) {
      const stepMs: Record<string, number> = Object.create(null);
      for (const s of steps) stepMs[s.name] = o[s.name].ms;
      const addr = (n: { hostaddr: string; port: number }) => `${n.hostaddr}:${n.port}`;
      return {
        cluster_id: p.cluster_id,
        shard_id: p.shard_id,
        reason: p.reason,
        old_master: {
          node_id: o['fence old master'].node_id,
          hostaddr: o['fence old master'].hostaddr,
          port: o['fence old master'].port,
          fenced: o['fence old master'].how,
          lease_wait_ms: o['fence old master'].lease_wait_ms ?? 0,
          rejoin: 'by a shard_rejoin job, once its agent answers',
        },
        new_master: { node_id: o['promote candidate'].node_id, hostaddr: o['promote candidate'].hostaddr, port: o['promote candidate'].port, gtid_at_promotion: o['promote candidate'].gtid_current_pos },
        standbys_repointed: o['re-point standbys'].repointed.map(addr),
        standbys_not_repointed: o['re-point standbys'].failed.map((f) => f.error),
        compute_nodes_repointed: o['re-point compute nodes'].comps.map(addr),
        compute_connections_to_old_master_cut: o['re-point compute nodes'].connections_cut ?? {},
        comps_held: o['fence old master'].compute_holds ? describeHolds(o['fence old master'].compute_holds).comps_held : '',
        comps_not_held: o['fence old master'].compute_holds ? describeHolds(o['fence old master'].compute_holds).comps_not_held : '',
        step_ms: stepMs,
        total_ms: Object.values(stepMs).reduce((a, b) => a + b, 0),
      };
    },
  };
}

export function rejoinLockKey(clusterId: string): string {
  return `rejoin:cluster:${clusterId}`;
}

export function failoverLockKey(p: ShardFailoverParas): string {
  return `cluster:${p.cluster_id}`;
}

export interface ShardRejoinParas {
  cluster_id: string;
  shard_id: string;
  node_id: string;
}

/**
 * shard_rejoin: a fenced old master whose agent answers (after the failover that replaced
 * it) is stopped, started read-only, checked for errant GTIDs and rejoined or rebuilt. Internal
 * like shard_failover; submitted by the failure detector.
 */
export const shardRejoinJob: JobDefinition<ShardRejoinParas, { 'rejoin old master': Timed<RejoinOutcome> }, RejoinOutcome & { ms: number }> = {
  jobType: SHARD_REJOIN,
  // Not the cluster lock: a failover of the new master must not wait behind a rebuild.
  lockKey: (p) => rejoinLockKey(p.cluster_id),
  steps: () => [{ name: 'rejoin old master', run: (ctx) => timed(() => rejoinStep(ctx.state, ctx, ctx.jobId, ctx.paras.cluster_id, ctx.paras.shard_id, ctx.paras.node_id)) }],
  result: (o) => o['rejoin old master'],
};
