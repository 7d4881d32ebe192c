// One storage node of a shard moved to another MariaDB version while the shard serves: it is
// a standby when this runs (upgrade_cluster switches a master away before it gets here), so
// the shard keeps taking writes from its master and acknowledging them through its other
// standbys. The node is checked before it is touched (a standby that is already broken is
// named as that, not blamed on the upgrade) and after: replicating from the master, both
// threads running, and caught up with the master's position as of then.

import { KcmError } from '@kcm/protocol';
import type { UpgradedInstance } from '@kcm/protocol';
import type { Agents } from '@kcm/agent-api';
import type { ShardRecord, StorageNodeRecord } from '../../meta/state';
import { opId } from '../instance-ops';
import { standbyProblem, where } from '../shard-ha/shard-view';
import { storageVersion } from './engine-prep';

export const asIpPort = (n: { hostaddr: string; port: number }): string => `${n.hostaddr}_${n.port}`;

/** How long an upgraded standby gets to replicate again and reach its master's position. */
export const STANDBY_HEALTH_WITHIN_MS = 120_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Why `node` is not a healthy standby of `master` now, or '' when it is (as its agent measures it). */
async function standbyProblemNow(agents: Agents, node: StorageNodeRecord, master: StorageNodeRecord): Promise<string> {
  return standbyProblem(await agents.mariadbHa(node.hostaddr).replicationStatus(node.port), master);
}

/** Waits until `node` replicates from `master` and has applied the master's position as of now. */
async function waitHealthyStandby(agents: Agents, node: StorageNodeRecord, master: StorageNodeRecord, withinMs: number, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + withinMs;
  let problem = await standbyProblemNow(agents, node, master).catch((err: Error) => err.message);
  while (problem) {
    if (Date.now() > deadline || signal.aborted) throw new Error(problem);
    await sleep(500);
    problem = await standbyProblemNow(agents, node, master).catch((err: Error) => err.message);
  }
  const masterPos = (await agents.mariadbHa(master.hostaddr).replicationStatus(master.port)).gtid_binlog_pos;
  const caught = await agents.mariadbHa(node.hostaddr).waitForGtid(node.port, masterPos, Math.max(1_000, deadline - Date.now()));
  if (!caught.reached) throw new Error(`it did not reach the master's position ${masterPos} (at ${caught.gtid_current_pos})`);
}

export interface StorageUpgradeContext {
  agents: Agents;
  jobId: string;
  signal: AbortSignal;
  /** Records the version the node was measured to run (a metadata command). */
  record(node: StorageNodeRecord, version: string): Promise<void>;
}

/** Moves standby `node` of `shard` to `version` (nothing when it runs it already) and checks it. */
export async function upgradeStandby(ctx: StorageUpgradeContext, shard: ShardRecord, node: StorageNodeRecord, master: StorageNodeRecord, version: string): Promise<UpgradedInstance> {
  const base = { instance: asIpPort(node), shard_id: shard.id };
  const stopHere = (what: string, cause?: unknown) =>
    KcmError.of('INSTANCE_FAILED', `shard ${shard.id}: standby ${where(node)} ${what}; the shard keeps serving from its master ${where(master)}. Fix the node (rebuild_node) and submit upgrade_cluster again: it carries on from here`, { cause });
  const before = await storageVersion(ctx.agents, node).catch((err: Error) => {
    throw stopHere(`does not answer before its upgrade: ${err.message}`, err);
  });
  if (before === version) {
    // Upgraded already: by an earlier run of this step (a leader that died after the agent
    // answered, before the step's output was committed: the metadata still names the version
    // it was installed with), or never needed.
    await ctx.record(node, before);
    return { ...base, version_before: node.engineVersion && node.engineVersion !== 'unknown' ? node.engineVersion : before, version_after: before, ms: '0' };
  }
  const unhealthy = await standbyProblemNow(ctx.agents, node, master).catch((err: Error) => err.message);
  if (unhealthy) throw stopHere(`is not a healthy standby before its upgrade: ${unhealthy}`);
  const started = performance.now();
  try {
    // The same op_id on a re-run: an agent that finished it answers with its first result.
    await ctx.agents.mariadb(node.hostaddr).upgradeEngine(opId(ctx.jobId, `upgrade-to-${version}`, `node-${node.id}`), node.port, version);
  } catch (err) {
    throw stopHere(`could not be moved to MariaDB ${version}: ${(err as Error).message}`, err);
  }
  try {
    await waitHealthyStandby(ctx.agents, node, master, STANDBY_HEALTH_WITHIN_MS, ctx.signal);
  } catch (err) {
    throw stopHere(`runs MariaDB ${version} but failed its health check: ${(err as Error).message}`, err);
  }
  const after = await storageVersion(ctx.agents, node);
  if (after !== version) throw stopHere(`answers version ${after} after its upgrade to ${version}`);
  await ctx.record(node, after);
  return { ...base, version_before: before, version_after: after, ms: String(Math.round(performance.now() - started)) };
}
