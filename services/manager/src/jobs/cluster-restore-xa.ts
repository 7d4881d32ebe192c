// cluster_restore's rule for the multi-shard transactions open at restore_time (DESIGN.md
// section 12): a transaction whose decision was recorded by T is committed on every
// destination shard, one without is rolled back.
//
// The binlog replay brings each shard to T on its own. What it does to a compute node's
// two-phase commit (measured on MariaDB 10.11): XA PREPARE is binlogged as its own event
// group (`XA START ... XA END; XA PREPARE`), XA COMMIT / XA ROLLBACK as another, and the
// coordinator's decision row with the coordinator's own local transaction. mariadb-binlog's
// output sets pseudo_slave_mode, so a replayed XA PREPARE leaves the branch prepared and
// detached from the client, and a later replayed XA COMMIT (same file or not) ends it.
// An event group is never cut by --stop-datetime (its GTID event carries its latest time).
// So after the replay:
//   - prepared and decided before T, branch committed before T: committed by the replay;
//   - decided before T, branch committed after T: the branch is left prepared, and the
//     decision row is on the destination coordinator;
//   - prepared before T, decided after T (or never): the branch is left prepared, with no
//     decision row on the destination coordinator.
// A branch left prepared holds its row locks, and the leader's in-doubt resolver cannot end
// it: its gtrid names the *source* coordinator shard (`kcm:<source shard id>:...`), which
// is not a shard of the destination. So the restore ends them itself, before the compute
// nodes serve the destination: each gtrid's decision is read on the destination shard
// restored from that source shard (DecideXa: the replayed `commit`, or `abort` written now
// when there is none, the same rule as the resolver's), and every branch of it is committed
// or rolled back by it. A gtrid whose coordinator shard is not among the restored ones has
// none of its coordinator's part on the destination: its branches are rolled back.
// Re-running this (a new leader resuming the step) finds the decisions it wrote.

import { coordinatorShardOf, type Agents } from '@kcm/agent-api';
import type { Logger } from '@kcm/common';
import type { ShardRecord, StorageNodeRecord } from '../meta/state';
import { forEachInstance } from './cluster-lookup';

/** A destination shard and the source shard it was restored from. */
export interface RestoredShard {
  srcShardId: string;
  dst: ShardRecord;
}

/** Branches the restore ended on one destination shard. */
export interface EndedBranches {
  committed: number;
  rolledBack: number;
}

interface Branch {
  gtrid: string;
  bqual: string;
  shard: RestoredShard;
  master: StorageNodeRecord;
}

/** A decision row lock held on the destination (nothing should hold one) is waited for this many times. */
const PENDING_ATTEMPTS = 5;

function masterOf(shard: ShardRecord): StorageNodeRecord {
  const master = shard.nodes[shard.masterNodeId];
  if (!master) throw new Error(`${shard.name} has no master node ${shard.masterNodeId}`);
  return master;
}

/**
 * Ends every kcm XA branch left prepared on the destination's shard masters after the
 * replay, by the decision the destination's coordinator shard holds as of T; returns the
 * branches committed and rolled back per destination shard id.
 */
export async function endTransactionsOpenAtRestoreTime(agents: Pick<Agents, 'mariadbHa'>, logger: Logger, shards: RestoredShard[], signal?: AbortSignal): Promise<Record<string, EndedBranches>> {
  const ended: Record<string, EndedBranches> = Object.create(null);
  const byGtrid = new Map<string, Branch[]>();
  await forEachInstance(shards, (s) => s.dst.name, async (shard) => {
    const master = masterOf(shard.dst);
    const { branches, unreadable } = await agents.mariadbHa(master.hostaddr).listPreparedXa(master.port);
    if (unreadable > 0) logger.warn({ shard: shard.dst.name, unreadable }, 'cluster_restore: XA branches with kcm\'s formatID but not its XID form are left prepared');
    ended[shard.dst.id] = { committed: 0, rolledBack: 0 };
    for (const b of branches) byGtrid.set(b.gtrid, [...(byGtrid.get(b.gtrid) ?? []), { ...b, shard, master }]);
  });
  const bySource = new Map(shards.map((s) => [s.srcShardId, s] as const));
  for (const [gtrid, branches] of byGtrid) {
    if (signal?.aborted) throw new Error('cluster_restore stopped: this member is no longer the leader');
    const coordinator = bySource.get(coordinatorShardOf(gtrid) ?? '');
    const outcome = coordinator ? await decisionOn(agents, coordinator, gtrid) : 'abort';
    await forEachInstance(branches, (b) => `${b.shard.dst.name} ${gtrid} ${b.bqual}`, async (b) => {
      const reply = await agents.mariadbHa(b.master.hostaddr).finishXa({ port: b.master.port, gtrid, bqual: b.bqual, commit: outcome === 'commit' });
      // Only a live session holds a branch; the replay's clients are gone.
      if (reply.held) throw new Error('the branch is held by a session on the destination');
      if (outcome === 'commit') ended[b.shard.dst.id].committed++;
      else ended[b.shard.dst.id].rolledBack++;
    });
    logger.info(
      { gtrid, outcome, coordinator: coordinator ? coordinator.dst.name : `source shard ${coordinatorShardOf(gtrid)} (not restored)`, branches: branches.map((b) => `${b.shard.dst.name} ${b.bqual}`) },
      `cluster_restore: a multi-shard transaction open at restore_time ${outcome === 'commit' ? 'committed (decided by then)' : 'rolled back (not decided by then)'}`,
    );
  }
  return ended;
}

/** The gtrid's decision on the destination coordinator shard: the replayed row, or `abort` written now. */
async function decisionOn(agents: Pick<Agents, 'mariadbHa'>, coordinator: RestoredShard, gtrid: string): Promise<'commit' | 'abort'> {
  const master = masterOf(coordinator.dst);
  for (let attempt = 1; ; attempt++) {
    const decision = await agents.mariadbHa(master.hostaddr).decideXa(master.port, gtrid);
    if (decision.outcome !== 'pending') return decision.outcome;
    if (attempt === PENDING_ATTEMPTS) throw new Error(`the decision row of ${gtrid} on ${coordinator.dst.name} stays locked`);
  }
}
