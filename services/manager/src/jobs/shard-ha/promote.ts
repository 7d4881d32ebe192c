// Promoting the chosen standby, re-pointing the shard's other standbys at it, and
// committing the new topology.

import type { Agents } from '@kcm/agent-api';
import { CommandKind } from '../../meta/commands';
import type { ClusterRecord, StorageNodeRecord } from '../../meta/state';
import { orThrow } from '../framework/errors';
import { opId } from '../instance-ops';
import type { StepServices } from '../framework/workflow';
import { where } from './shard-view';
import { liveAccount } from '../../secrets/live-accounts';
import type { SecretBox } from '../../secrets/secret-box';

/** How long a promotion waits for the candidate's relay log to be applied. */
export const PROMOTE_RELAY_WAIT_MS = 10_000;

export interface PromoteOutcome {
  node_id: string;
  hostaddr: string;
  port: number;
  /** Its position when it took writes: what the shard's history is from here on. */
  gtid_current_pos: string;
  relay_applied: boolean;
  already_master: boolean;
  /**
   * The kcm XA branches (`gtrid bqual`) it held prepared once promoted by a failover: each
   * came from the old master, which must hold it too to rejoin (rejoin.ts). Absent when it
   * could not be read, and after a manual switch (a demoted master did not crash).
   */
  prepared_xa?: string[];
}

export async function promoteNode(agents: Agents, jobId: string, cluster: ClusterRecord, node: StorageNodeRecord): Promise<PromoteOutcome> {
  const reply = await agents.mariadbHa(node.hostaddr).promote({
    op_id: opId(jobId, 'promote', `node-${node.id}`),
    port: node.port,
    fullsync_level: cluster.options.fullsyncLevel,
    wait_relay_ms: PROMOTE_RELAY_WAIT_MS,
  });
  return { node_id: node.id, hostaddr: node.hostaddr, port: node.port, gtid_current_pos: reply.gtid_current_pos, relay_applied: reply.relay_applied, already_master: reply.already_master };
}

/** The kcm XA branches a node holds prepared, as `gtrid bqual`; undefined when its agent cannot tell. */
export function preparedXaOn(agents: Agents, node: StorageNodeRecord): Promise<string[] | undefined> {
  return agents.mariadbHa(node.hostaddr).listPreparedXa(node.port).then(
    (r) => r.branches.map((b) => `${b.gtrid} ${b.bqual}`),
    () => undefined,
  );
}

/** The shard's master in the metadata moves to `next`; the old master is recorded fenced in the same apply. */
export async function commitNewMaster(
  services: Pick<StepServices, 'propose' | 'now'>,
  ids: { jobId: string; clusterId: string; shardId: string },
  previous: StorageNodeRecord,
  next: StorageNodeRecord,
  opts: { fenceOldMaster: boolean; reason: string; successorGtid: string },
): Promise<{ duplicate: boolean }> {
  return orThrow(
    await services.propose({
      kind: CommandKind.ShardMasterChanged,
      at: services.now(),
      clusterId: ids.clusterId,
      shardId: ids.shardId,
      masterNodeId: next.id,
      previousMasterNodeId: previous.id,
      jobId: ids.jobId,
      fenceOldMaster: opts.fenceOldMaster,
      fenceReason: opts.reason,
      successorGtid: opts.successorGtid,
    }),
  ) as { duplicate: boolean };
}

export interface RepointOutcome {
  repointed: { node_id: string; hostaddr: string; port: number }[];
  /** Standbys that could not be re-pointed now (agent down, ...), with why; the reconciler and rebuild_node take them from here. */
  failed: { node_id: string; hostaddr: string; port: number; error: string }[];
}

/** Points each standby at the new master (MASTER_USE_GTID=slave_pos); one failing does not stop the others. */
export async function repointStandbys(agents: Agents, secrets: SecretBox, jobId: string, cluster: ClusterRecord, master: StorageNodeRecord, standbys: StorageNodeRecord[]): Promise<RepointOutcome> {
  const out: RepointOutcome = { repointed: [], failed: [] };
  const replication = liveAccount(secrets, cluster, 'replication');
  await Promise.all(
    standbys.map(async (n) => {
      try {
        await agents.mariadbHa(n.hostaddr).repointStandby({
          op_id: opId(jobId, 'repoint', `node-${n.id}-to-${master.id}`),
          port: n.port,
          master_host: master.hostaddr,
          master_port: master.port,
          replication,
          fullsync_level: cluster.options.fullsyncLevel,
        });
        out.repointed.push({ node_id: n.id, hostaddr: n.hostaddr, port: n.port });
      } catch (err) {
        out.failed.push({ node_id: n.id, hostaddr: n.hostaddr, port: n.port, error: `${where(n)}: ${(err as Error).message}` });
      }
    }),
  );
  return out;
}
