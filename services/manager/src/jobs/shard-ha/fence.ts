// Fencing an old master so there is never a second writable master: recorded fenced in
// the metadata first (the reconciler leaves it alone, routing never returns to it), then
// its agent makes it read-only on every later start, read-only now, and stops it. When the
// agent cannot be reached the metadata record stands, and the node is made read-only (or
// stopped) before anything else the moment it is seen again (rejoin.ts).

import { AgentUnreachableError, isAgentUnreachable, type Agents } from '@kcm/agent-api';
import { CommandKind } from '../../meta/commands';
import type { StorageNodeRecord } from '../../meta/state';
import { orThrow } from '../framework/errors';
import type { StepServices } from '../framework/workflow';

export interface FenceOutcome {
  node_id: string;
  hostaddr: string;
  port: number;
  /** stopped by its agent | read-only by its agent | recorded in metadata (agent unreachable)[; its lease ran out] */
  how: string;
  was_running: boolean;
  /** Its binlog position when it was made read-only; '' when not read. */
  gtid_binlog_pos: string;
}

/** FenceOutcome.how when the agent could not be reached: the failover then waits for the master's lease. */
export const FENCED_BY_METADATA_ONLY = 'recorded in metadata (agent unreachable)';

/** How long an agent gets to show it is reachable before the fence is by metadata only. */
export const FENCE_REACH_MS = 1500;

/**
 * Resolves when the host's agent answers its Health call within `ms`; throws
 * AgentUnreachableError otherwise. A call that needs no MariaDB: an agent whose mariadbd is
 * stopped (SIGSTOP) or hung answers at once, and it can still kill it.
 */
export async function agentAnswers(services: Pick<StepServices, 'withAgent'>, hostaddr: string, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AgentUnreachableError(hostaddr, new Error(`no answer to Health within ${ms} ms`))), ms);
  });
  try {
    await Promise.race([services.withAgent(hostaddr, (agent) => agent.health()), late]);
  } catch (err) {
    throw isAgentUnreachable(err) ? err : new AgentUnreachableError(hostaddr, err);
  } finally {
    clearTimeout(timer);
  }
}

export async function fenceNode(
  services: Pick<StepServices, 'propose' | 'now' | 'withAgent'> & { agents: Agents },
  ids: { jobId: string; clusterId: string; shardId: string; op: string },
  node: StorageNodeRecord,
  opts: { stop: boolean; reason: string },
): Promise<FenceOutcome> {
  orThrow(
    await services.propose({ kind: CommandKind.NodeFenceSet, at: services.now(), clusterId: ids.clusterId, shardId: ids.shardId, nodeId: node.id, fenced: true, jobId: ids.jobId, reason: opts.reason }),
  );
  const base = { node_id: node.id, hostaddr: node.hostaddr, port: node.port };
  const ha = services.agents.mariadbHa(node.hostaddr);
  try {
    // A quick look first: an agent behind a dead link would hold a fence call to its deadline.
    await agentAnswers(services, node.hostaddr, FENCE_REACH_MS);
    const reply = await ha.fence(ids.op, node.port, opts.stop);
    return { ...base, how: reply.stopped ? 'stopped by its agent' : reply.made_read_only ? 'read-only by its agent' : 'read-only on its next start', was_running: reply.was_running, gtid_binlog_pos: reply.gtid_binlog_pos };
  } catch (err) {
    if (!isAgentUnreachable(err)) throw err;
    return { ...base, how: FENCED_BY_METADATA_ONLY, was_running: false, gtid_binlog_pos: '' };
  }
}
