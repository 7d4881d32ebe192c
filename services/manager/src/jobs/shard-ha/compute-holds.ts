// Holding a shard on every compute node of its cluster while the shard's master changes
// (docs/ride-through.md): statements for the shard wait on the compute nodes instead of
// failing, and run on the new master once the nodes are re-pointed and the hold released.
//
// A hold is a courtesy to the clients, never a condition of the switch: a compute node whose
// agent does not know the call (UNIMPLEMENTED: an older kcm during a rolling upgrade), whose
// kcm_ddl has no holds, or that does not answer is switched without one, and the result says
// so. Every hold carries its own deadline on the compute node, so one this manager never
// releases (it died, it lost office) ends by itself.

import { isUnimplemented, type Agents } from '@kcm/agent-api';
import type { Logger } from '@kcm/common';
import type { ClusterRecord, StorageNodeRecord } from '../../meta/state';

export interface ShardHoldLimits {
  /** The hold's own deadline on each compute node (manager config switchHoldMs): the longest a statement waits. */
  holdMs: number;
  /** How long transactions already open on the shard get to end before they are ended (config switchDrainMs). */
  drainMs: number;
}

export const DEFAULT_SHARD_HOLD: ShardHoldLimits = { holdMs: 10_000, drainMs: 1_000 };

interface CompHold {
  comp: string;
  hostaddr: string;
  port: number;
  /** Transactions working on the shard on this node when the hold started. */
  openAtStart: number;
  /** Transactions the drain ended on this node (their shard sessions are closed by cutEndedSessions). */
  ended: number;
}

export interface ShardHolds {
  shardId: string;
  held: CompHold[];
  /** Compute nodes switched without a hold, each with why. */
  notHeld: { comp: string; why: string }[];
}

const compName = (comp: { id: string; name?: string }) => comp.name ?? `comp_${comp.id}`;

/** Holds the shard on every compute node of the cluster at once; answers when every drain is over. */
export async function holdShardOnComputes(agents: Agents, cluster: ClusterRecord, shardId: string, limits: ShardHoldLimits, logger: Logger): Promise<ShardHolds> {
  const holds: ShardHolds = { shardId, held: [], notHeld: [] };
  await Promise.all(
    Object.values(cluster.comps).map(async (comp) => {
      try {
        const reply = await agents.shardRouting(comp.hostaddr).holdShard(comp.port, shardId, limits.holdMs, Math.min(limits.drainMs, limits.holdMs));
        holds.held.push({ comp: compName(comp), hostaddr: comp.hostaddr, port: comp.port, openAtStart: reply.open_at_start, ended: reply.ended });
      } catch (err) {
        const why = isUnimplemented(err) ? 'its agent does not know HoldShard (an older kcm)' : (err as Error).message;
        holds.notHeld.push({ comp: compName(comp), why });
        logger.warn({ cluster: cluster.id, shard: shardId, comp: compName(comp), why }, 'compute node switched without a hold: its clients may see errors');
      }
    }),
  );
  return holds;
}

/**
 * Transactions a drain ended still hold their shard sessions on the old master (and their
 * row locks, in the way of a demoted master's replication): the compute hosts that ended any
 * close their connections to it, which rolls those sessions back there. Per host, what was done.
 */
export async function cutEndedSessions(agents: Agents, holds: ShardHolds, oldMaster: StorageNodeRecord): Promise<Record<string, string>> {
  const hosts = [...new Set(holds.held.filter((h) => h.ended > 0).map((h) => h.hostaddr))];
  const cut: Record<string, string> = Object.create(null);
  await Promise.all(
    hosts.map(async (host) => {
      cut[host] = await agents.mariadbHa(host).cutConnectionsTo(oldMaster.hostaddr, oldMaster.port).then(
        (r) => `${r.closed} closed`,
        (err: Error) => `not cut: ${err.message}`,
      );
    }),
  );
  return cut;
}

/** Releases every hold made; best effort (a hold not released ends at its own deadline), each failure logged. */
export async function releaseShardOnComputes(agents: Agents, holds: ShardHolds, logger: Logger): Promise<void> {
  await Promise.all(
    holds.held.map((h) =>
      agents
        .shardRouting(h.hostaddr)
        .releaseShard(h.port, holds.shardId)
        .catch((err: Error) => logger.warn({ shard: holds.shardId, comp: h.comp, err: err.message }, 'compute node hold not released: it ends at its deadline')),
    ),
  );
}

/** For results: "comp_1,comp_2" and "comp_3 (why); ..." */
export function describeHolds(holds: ShardHolds): { comps_held: string; comps_not_held: string; transactions_open_at_hold: number; transactions_ended: number } {
  return {
    comps_held: holds.held.map((h) => h.comp).join(','),
    comps_not_held: holds.notHeld.map((n) => `${n.comp} (${n.why})`).join('; '),
    transactions_open_at_hold: holds.held.reduce((sum, h) => sum + h.openAtStart, 0),
    transactions_ended: holds.held.reduce((sum, h) => sum + h.ended, 0),
  };
}
