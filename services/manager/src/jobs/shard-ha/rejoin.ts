// A fenced old master coming back: stopped before anything else (it may have come back
// writable, e.g. a host that was cut off before its lease could fence it), started
// read-only, then checked for errant transactions: GTIDs it has beyond the position its
// successor was promoted at, which no client ever saw acknowledged through the new master.
// Without any it rejoins as a standby of the current master (MASTER_USE_GTID=slave_pos);
// with some it is rebuilt from a copy of the shard (the rebuild_node path) and the result
// names what was discarded. One holding prepared XA branches after its restart is rebuilt
// too (see below). Then its fence is lifted.

import { gtidsBeyond, isAgentUnreachable, type Agents } from '@kcm/agent-api';
import { CommandKind } from '../../meta/commands';
import type { ClusterRecord, ShardRecord, StorageNodeRecord } from '../../meta/state';
import { orThrow } from '../framework/errors';
import { opId } from '../instance-ops';
import { copyIntoStandby, DEFAULT_ALLOWED_REPLICA_DELAY_S } from '../nodes';
import type { StepServices } from '../framework/workflow';
import { agentAnswers, FENCE_REACH_MS } from './fence';
import { where } from './shard-view';
import { liveAccount } from '../../secrets/live-accounts';
import type { SecretBox } from '../../secrets/secret-box';

export interface RejoinOutcome {
  node_id: string;
  hostaddr: string;
  port: number;
  /** rejoined as standby | rebuilt from a copy | pending: <why> */
  outcome: string;
  /** Errant GTIDs it had (ranges), discarded by the rebuild; empty when none. */
  discarded_gtids: string[];
  gtid_binlog_pos: string;
}

export async function rejoinFencedNode(
  services: Pick<StepServices, 'propose' | 'now' | 'secrets' | 'withAgent'> & { agents: Agents },
  ids: { jobId: string; clusterId: string },
  /** The cluster and shard as committed now: read again before the fence is lifted. */
  view: () => { cluster: ClusterRecord; shard: ShardRecord },
  node: StorageNodeRecord,
  /** The XA branches its successor held prepared when promoted (`gtrid bqual`), when the failover read them. */
  preparedOnSuccessor?: string[],
): Promise<RejoinOutcome> {
  const base = { node_id: node.id, hostaddr: node.hostaddr, port: node.port };
  const { cluster, shard } = view();
  if (cluster.status !== 'ready') return { ...base, outcome: `pending: cluster is ${cluster.status}`, discarded_gtids: [], gtid_binlog_pos: '' };
  const master = shard.nodes[shard.masterNodeId];
  if (!master || master.id === node.id) return { ...base, outcome: 'pending: it is the shard master in the metadata', discarded_gtids: [], gtid_binlog_pos: '' };
  const ha = services.agents.mariadbHa(node.hostaddr);
  const mariadb = services.agents.mariadb(node.hostaddr);
  try {
    await agentAnswers(services, node.hostaddr, FENCE_REACH_MS);
  } catch (err) {
    if (isAgentUnreachable(err)) return { ...base, outcome: `pending: agent unreachable (${(err as Error).message})`, discarded_gtids: [], gtid_binlog_pos: '' };
    throw err;
  }
  // Stopped before anything else, and read-only on any later start. Killed, not made
  // read-only while it runs: a commit it holds for a standby's ack (cut off, it never got
  // one) would be acknowledged by turning semi-sync off or by a clean shutdown, and would be
  // discarded below as errant: a write acknowledged and lost. Then started, read-only.
  await ha.fence(opId(ids.jobId, 'fence-seen', `node-${node.id}`), node.port, true);
  await mariadb.start(opId(ids.jobId, 'start-fenced', `node-${node.id}`), node.port);
  const status = await ha.replicationStatus(node.port);
  if (!status.answering) throw new Error(`${where(node)} does not answer SQL: ${status.reason}`);
  // '' is a position (nothing written yet), not an unknown one; only a fence without a successor (no promotion recorded) skips the check.
  const successor = node.fenced?.successorGtid;
  const errant = successor !== undefined ? gtidsBeyond(status.gtid_binlog_pos, successor) : [];
  // XA branches its crash recovery left prepared: the successor holds the shard's copy of
  // each (XA PREPARE replicates), and its resolver ends them there. A local one would hold
  // row locks the replication stream needs, and MariaDB 10.11's recovery can leave one that
  // its own binlog says is committed; either stalls or stops the rejoined standby. Rebuilt.
  const prepared = (await ha.listPreparedXa(node.port)).branches;
  // And the other way round: a branch its successor received from it prepared but that its
  // recovery dropped (its binlog prepared it) would stop its replication at the branch's XA
  // COMMIT or ROLLBACK, and an XA COMMIT there means rows it lacks. Rebuilt as well.
  const held = new Set(prepared.map((b) => `${b.gtrid} ${b.bqual}`));
  const lost = (preparedOnSuccessor ?? []).filter((x) => !held.has(x));
  let outcome = 'rejoined as standby';
  if (errant.length === 0 && prepared.length === 0 && lost.length === 0) {
    try {
      await ha.repointStandby({
        op_id: opId(ids.jobId, 'rejoin', `node-${node.id}-to-${master.id}`),
        port: node.port,
        master_host: master.hostaddr,
        master_port: master.port,
        replication: liveAccount(services.secrets, cluster, 'replication'),
        fullsync_level: cluster.options.fullsyncLevel,
      });
    } catch (err) {
      // gtid_strict_mode refuses a history the master lacks: errant after all (a successor
      // position read after later writes hides them from the comparison). Rebuild.
      await rebuild(services.agents, services.secrets, ids.jobId, cluster, shard, node);
      outcome = `rebuilt from a copy (re-pointing failed: ${(err as Error).message})`;
    }
  } else {
    await rebuild(services.agents, services.secrets, ids.jobId, cluster, shard, node);
    outcome =
      errant.length > 0 ? 'rebuilt from a copy'
      : prepared.length > 0 ? `rebuilt from a copy (it held ${prepared.length} prepared XA branch(es) after its restart)`
      : `rebuilt from a copy (its restart lost ${lost.length} XA branch(es) its successor holds prepared)`;
  }
  // It runs beside the cluster's other jobs (its own lock): a failover that replaced the
  // master it now follows, or a job that took the cluster away, leaves it fenced for the next try.
  const now = view();
  if (now.shard.masterNodeId !== master.id || now.cluster.status !== 'ready') {
    throw new Error(`the shard's master changed from node ${master.id} to ${now.shard.masterNodeId} (or the cluster is ${now.cluster.status}) while ${where(node)} rejoined: it stays fenced and rejoins the new master next`);
  }
  orThrow(await services.propose({ kind: CommandKind.NodeFenceSet, at: services.now(), clusterId: ids.clusterId, shardId: shard.id, nodeId: node.id, fenced: false, jobId: ids.jobId, reason: outcome }));
  return { ...base, outcome, discarded_gtids: errant, gtid_binlog_pos: status.gtid_binlog_pos };
}

async function rebuild(agents: Agents, secrets: SecretBox, jobId: string, cluster: ClusterRecord, shard: ShardRecord, node: StorageNodeRecord): Promise<void> {
  const sources = Object.values(shard.nodes).filter((n) => n.id !== node.id && !n.fenced);
  await copyIntoStandby(
    agents,
    secrets,
    opId(jobId, 'rebuild-errant', `node-${node.id}`),
    cluster,
    shard,
    node,
    sources,
    { allowReplicaDelayS: DEFAULT_ALLOWED_REPLICA_DELAY_S, allowPullFromMaster: true, pvLimitMb: 0, needBackup: true },
    false,
  );
}
