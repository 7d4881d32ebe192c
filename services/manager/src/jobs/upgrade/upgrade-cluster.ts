// Job: upgrade_cluster (beyond the spec, issue 31): a cluster moved to other engine versions
// while it serves, one instance at a time.
//
//   1. check the cluster: every host of the cluster has the target engine (fetched into its
//      agent's engine cache now), before any instance is touched;
//   2. the standbys of each shard, one at a time (stop, other engine, start, mariadb-upgrade,
//      caught up with the master);
//   3. each shard whose master is not upgraded: a planned switchover (manual_switch's own
//      code, so compute nodes hold the shard's statements rather than fail them) to the
//      upgraded standby furthest ahead;
//   4. the old masters, now standbys, like step 2;
//   5. the compute nodes one at a time.
//
// What is left to do is measured at each instance (the version the running engine answers),
// never read from the metadata: a new leader resuming a step skips what is done whatever the
// old one had committed, and redoes an interrupted upgrade under the same op_id (the agent
// answers a finished op with its first result). The first instance that fails its health
// check stops the job with its name and why; the shard keeps serving from its master (a
// master is never restarted while it is the master) and a new upgrade_cluster carries on.
// Nothing is rolled back: an upgraded standby is as good a standby as before.

import { gtidProgress } from '@kcm/agent-api';
import type { ParasOf, UpgradeClusterResult, UpgradedInstance } from '@kcm/protocol';
import { KcmError } from '@kcm/protocol';
import type { MetaState, StorageNodeRecord } from '../../meta/state';
import { clusterOfStep, readyCluster } from '../cluster-lookup';
import type { JobOf, StepContext } from '../framework/workflow';
import { DEFAULT_MANUAL_SWITCH_LIMITS, switchMaster, type ManualSwitchLimits } from '../shard-ha/manual-switch';
import { where } from '../shard-ha/shard-view';
import { upgradeComputeNode } from './compute-upgrade';
import { asIpPort, upgradeStandby } from './storage-upgrade';
import { checkAndPrepare, storageVersion } from './engine-prep';
import { recordEngineVersions } from '../engine-versions';

type UpgradeParas = ParasOf<'upgrade_cluster'>;

interface UpgradeOutputs {
  'check the cluster': { hosts_prepared: string[] };
  'upgrade the standbys': { nodes: UpgradedInstance[] };
  'switch the masters': { switches: UpgradeClusterResult['list_switch'] };
  'upgrade the old masters': { nodes: UpgradedInstance[] };
  'upgrade the compute nodes': { comps: UpgradedInstance[] };
}

type Ctx = StepContext<UpgradeParas, UpgradeOutputs>;

const liveNodes = (nodes: Record<string, StorageNodeRecord>) => Object.values(nodes).filter((n) => !n.fenced);

/** Refusals before anything is committed: each names the field and what to do. */
function validateUpgrade(p: UpgradeParas, state: MetaState): void {
  const cluster = readyCluster(state, p.cluster_id);
  if (p.storage_version !== undefined) {
    for (const shard of Object.values(cluster.shards)) {
      // A master is upgraded only after a switchover to an upgraded standby.
      if (liveNodes(shard.nodes).length < 2) {
        throw KcmError.of('CONFLICT', `paras.storage_version: shard ${shard.id} of cluster ${cluster.id} has no standby to take over while its master is upgraded; add_nodes first`, {
          field: 'paras.storage_version',
        });
      }
    }
  }
  if (p.computer_version !== undefined && Object.keys(cluster.comps).length === 0) {
    throw KcmError.of('CONFLICT', `paras.computer_version: cluster ${cluster.id} has no compute node`, { field: 'paras.computer_version' });
  }
}

/** The order the job would take, from the metadata as it is now (a dry run shows it). */
function upgradePlan(p: UpgradeParas, state: MetaState) {
  const cluster = readyCluster(state, p.cluster_id);
  return {
    shards:
      p.storage_version === undefined
        ? []
        : Object.values(cluster.shards).map((shard) => {
            const master = shard.nodes[shard.masterNodeId];
            const standbys = liveNodes(shard.nodes).filter((n) => n.id !== shard.masterNodeId);
            return { shard_id: shard.id, standbys_first: standbys.map(asIpPort), then_switch_from: master ? asIpPort(master) : '', fenced_left_alone: Object.values(shard.nodes).filter((n) => n.fenced).map(asIpPort) };
          }),
    comps: p.computer_version === undefined ? [] : Object.values(cluster.comps).map((c) => c.name),
  };
}

/** Upgrades every live non-master node of every shard not yet at the version, one at a time. */
async function upgradeNonMasters(ctx: Ctx, p: UpgradeParas): Promise<UpgradedInstance[]> {
  const version = p.storage_version;
  if (version === undefined) return [];
  const done: UpgradedInstance[] = [];
  const shardIds = Object.keys(clusterOfStep(ctx, p.cluster_id).shards);
  const total = Object.values(clusterOfStep(ctx, p.cluster_id).shards).reduce((sum, s) => sum + liveNodes(s.nodes).length - 1, 0);
  let step = 0;
  for (const shardId of shardIds) {
    const shard = clusterOfStep(ctx, p.cluster_id).shards[shardId];
    if (!shard) continue; // removed meanwhile (delete_shards is ordered after this job, so only by a failover's fence)
    const master = shard.nodes[shard.masterNodeId];
    for (const node of liveNodes(shard.nodes).filter((n) => n.id !== shard.masterNodeId)) {
      done.push(
        await upgradeStandby(
          { agents: ctx.agents, jobId: ctx.jobId, signal: ctx.signal, record: (n, v) => recordEngineVersions(ctx, { clusterId: p.cluster_id, nodes: [{ nodeId: n.id, version: v }] }) },
          shard,
          node,
          master,
          version,
        ),
      );
      await ctx.progress(++step, total);
    }
  }
  return done;
}

/** Each shard whose master runs another version switches to its upgraded standby furthest ahead. */
async function switchMasters(ctx: Ctx, p: UpgradeParas, limits: ManualSwitchLimits): Promise<UpgradeClusterResult['list_switch']> {
  const version = p.storage_version;
  if (version === undefined) return [];
  const switches: UpgradeClusterResult['list_switch'] = [];
  for (const shardId of Object.keys(clusterOfStep(ctx, p.cluster_id).shards)) {
    const shard = clusterOfStep(ctx, p.cluster_id).shards[shardId];
    if (!shard) continue;
    const master = shard.nodes[shard.masterNodeId];
    if ((await storageVersion(ctx.agents, master)) === version) continue;
    const candidates = liveNodes(shard.nodes).filter((n) => n.id !== master.id);
    const measured = await Promise.all(
      candidates.map(async (n) => ({
        node: n,
        version: await storageVersion(ctx.agents, n).catch(() => ''),
        status: await ctx.agents.mariadbHa(n.hostaddr).replicationStatus(n.port).catch(() => undefined),
      })),
    );
    const fit = measured.filter((m) => m.version === version && m.status?.answering && m.status.io_running && m.status.sql_running);
    if (fit.length === 0) {
      throw KcmError.of('INSTANCE_FAILED', `shard ${shard.id}: no standby runs MariaDB ${version} and replicates, so its master ${where(master)} cannot be switched away and upgraded; the shard keeps serving from it`);
    }
    fit.sort((a, b) => gtidProgress(b.status!.gtid_current_pos) - gtidProgress(a.status!.gtid_current_pos));
    const to = fit[0].node;
    // manual_switch's own step, under this job's id: the same hold at the compute nodes, the
    // same refusals, the same resumption if this leader dies inside it.
    const switchCtx = Object.assign(Object.create(ctx) as StepContext<ParasOf<'manual_switch'>>, {
      paras: { cluster_id: p.cluster_id, shard_id: shard.id, master_hostaddr: asIpPort(master), assign_hostaddr: asIpPort(to) },
    });
    const out = await switchMaster(switchCtx, switchCtx.paras, limits);
    switches.push({ shard_id: shard.id, old_master: out.result.old_master, new_master: out.result.new_master, write_stall_ms: out.result.write_stall_ms });
  }
  return switches;
}

export function upgradeClusterJob(limits: ManualSwitchLimits = DEFAULT_MANUAL_SWITCH_LIMITS): JobOf<'upgrade_cluster', UpgradeOutputs> {
  return {
    jobType: 'upgrade_cluster',
    validate: validateUpgrade,
    dryRunPlan: (p, state) => ({ order: upgradePlan(p, state) }),
    // Topology changes (the switchovers) are ordered with every other job on the cluster, failovers included.
    lockKey: (p) => `cluster:${p.cluster_id}`,
    steps: (p) => [
      {
        name: 'check the cluster',
        async run(ctx) {
          return { hosts_prepared: await checkAndPrepare(ctx, clusterOfStep(ctx, p.cluster_id), p) };
        },
      },
      { name: 'upgrade the standbys', run: async (ctx) => ({ nodes: await upgradeNonMasters(ctx, p) }) },
      { name: 'switch the masters', run: async (ctx) => ({ switches: await switchMasters(ctx, p, limits) }) },
      {
        name: 'upgrade the old masters',
        async run(ctx) {
          const nodes = await upgradeNonMasters(ctx, p);
          // Every storage node runs it now: the cluster's next storage nodes (add_nodes, rebuild_node) get it too.
          if (p.storage_version !== undefined) await recordEngineVersions(ctx, { clusterId: p.cluster_id, storageVersion: p.storage_version });
          return { nodes };
        },
      },
      {
        name: 'upgrade the compute nodes',
        async run(ctx) {
          const version = p.computer_version;
          if (version === undefined) return { comps: [] };
          const comps: UpgradedInstance[] = [];
          for (const comp of Object.values(clusterOfStep(ctx, p.cluster_id).comps)) {
            comps.push(
              await upgradeComputeNode(
                { agents: ctx.agents, secrets: ctx.secrets, jobId: ctx.jobId, signal: ctx.signal, cluster: () => clusterOfStep(ctx, p.cluster_id), record: (c, v) => recordEngineVersions(ctx, { clusterId: p.cluster_id, comps: [{ compId: c.id, version: v }] }) },
                comp,
                version,
              ),
            );
          }
          await recordEngineVersions(ctx, { clusterId: p.cluster_id, computerVersion: version });
          return { comps };
        },
      },
    ],
    result: (o, p) => ({
      cluster_id: p.cluster_id,
      storage_version: p.storage_version ?? '',
      computer_version: p.computer_version ?? '',
      // The standbys, then the old masters (step 4 finds the standbys done already; it lists only the nodes step 3 switched away from).
      list_node: [
        ...o['upgrade the standbys'].nodes,
        ...o['upgrade the old masters'].nodes.filter((n) => n.ms !== '0' || o['switch the masters'].switches.some((s) => s.old_master === n.instance)),
      ],
      list_comp: o['upgrade the compute nodes'].comps,
      list_switch: o['switch the masters'].switches,
    }),
  };
}
