// One compute node moved to another PostgreSQL version. A PostgreSQL instance cannot change
// its binary under open sessions: the node is stopped (fast shutdown: its sessions are
// disconnected and their open transactions rolled back, as PostgreSQL's own minor upgrade
// does) and started on the new engine, so its clients reconnect; the cluster's other compute
// nodes serve throughout, one node is restarted at a time. A node answers its health check
// when it accepts queries on the new version and its shard servers point where the metadata
// says (a catalog sync, as after any restart).

import { randomUUID } from 'node:crypto';
import { KcmError } from '@kcm/protocol';
import type { UpgradedInstance } from '@kcm/protocol';
import type { Agents } from '@kcm/agent-api';
import type { ClusterRecord, CompRecord } from '../../meta/state';
import { opId, shardEndpoints } from '../instance-ops';
import type { SecretBox } from '../../secrets/secret-box';
import { computerVersion } from './engine-prep';
import { asIpPort } from './storage-upgrade';

/** How long an upgraded compute node gets to accept queries again. */
export const COMPUTE_HEALTH_WITHIN_MS = 60_000;

export interface ComputeUpgradeContext {
  agents: Agents;
  secrets: SecretBox;
  jobId: string;
  signal: AbortSignal;
  cluster(): ClusterRecord;
  record(comp: CompRecord, version: string): Promise<void>;
}

export async function upgradeComputeNode(ctx: ComputeUpgradeContext, comp: CompRecord, version: string): Promise<UpgradedInstance> {
  const base = { instance: asIpPort(comp), comp_name: comp.name };
  const stopHere = (what: string, cause?: unknown) =>
    KcmError.of('INSTANCE_FAILED', `compute node ${comp.name} (${comp.hostaddr}:${comp.port}) ${what}; the cluster's other compute nodes keep serving. Fix it and submit upgrade_cluster again: it carries on from here`, { cause });
  const before = await computerVersion(ctx.agents, comp).catch((err: Error) => {
    throw stopHere(`does not answer before its upgrade: ${err.message}`, err);
  });
  if (before === version) {
    // Upgraded already (by a run before a leader change: the metadata still names the old version), or never needed.
    await ctx.record(comp, before);
    return { ...base, version_before: comp.engineVersion && comp.engineVersion !== 'unknown' ? comp.engineVersion : before, version_after: before, ms: '0' };
  }
  const started = performance.now();
  try {
    await ctx.agents.postgres(comp.hostaddr).upgradeEngine(opId(ctx.jobId, `upgrade-to-${version}`, `comp-${comp.id}`), comp.port, version);
  } catch (err) {
    throw stopHere(`could not be moved to PostgreSQL ${version}: ${(err as Error).message}`, err);
  }
  const deadline = Date.now() + COMPUTE_HEALTH_WITHIN_MS;
  let after = '';
  for (;;) {
    try {
      after = await computerVersion(ctx.agents, comp);
      await ctx.agents.postgres(comp.hostaddr).syncCatalog(`job:${ctx.jobId}:upgrade-sync:comp-${comp.id}:${randomUUID()}`, comp.port, shardEndpoints(ctx.secrets, ctx.cluster()));
      break;
    } catch (err) {
      if (Date.now() > deadline || ctx.signal.aborted) throw stopHere(`runs PostgreSQL ${version} but failed its health check: ${(err as Error).message}`, err);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  if (after !== version) throw stopHere(`answers version ${after} after its upgrade to ${version}`);
  await ctx.record(comp, after);
  return { ...base, version_before: before, version_after: after, ms: String(Math.round(performance.now() - started)) };
}
