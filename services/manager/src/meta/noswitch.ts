// No-switch windows (set_noswitch): while a shard's window is open, the leader does not fail
// its master over automatically (maintenance: a restart of the master must not trigger a
// promotion). Planned switchover (manual_switch) is an operator's own act and ignores them.

import { accepted, refused, type ApplyOutcome } from './outcome';
import type { MetaState } from './state';
import type { CommandBase, CommandKind } from './command-numbers';

/**
 * Opens (untilMs set) or closes (null) the no-switch window of shards of one cluster: no
 * automatic failover of those shards before untilMs (the proposer's clock + the timeout,
 * carried here so every member stores the same deadline). A shard that is gone is skipped.
 */
export interface NoSwitchSet extends CommandBase<typeof CommandKind.NoSwitchSet> {
  clusterId: string;
  shardIds: string[];
  untilMs: number | null;
}

export interface NoSwitchWindow {
  shardId: string;
  /** ms since the epoch, or null when the window was closed. */
  untilMs: number | null;
}

export function applyNoSwitchSet(state: MetaState, cmd: NoSwitchSet): ApplyOutcome<NoSwitchWindow[]> {
  const cluster = state.clusters[cmd.clusterId];
  if (!cluster) return refused('NOT_FOUND', `cluster ${cmd.clusterId} does not exist`);
  const windows: NoSwitchWindow[] = [];
  for (const shardId of cmd.shardIds) {
    // A shard deleted between submission and apply has no failover left to suspend.
    const shard = Object.hasOwn(cluster.shards, shardId) ? cluster.shards[shardId] : undefined;
    if (!shard) continue;
    if (cmd.untilMs === null) delete shard.noSwitchUntil;
    else shard.noSwitchUntil = cmd.untilMs;
    windows.push({ shardId, untilMs: cmd.untilMs });
  }
  return accepted(windows);
}

/**
 * The end (ms since the epoch) of the shard's no-switch window when one is open at `nowMs`,
 * else null. The failure detector asks this before it submits a shard_failover: a shard
 * with an open window is watched and reported, never failed over.
 */
export function noSwitchUntil(state: MetaState, clusterId: string, shardId: string, nowMs: number): number | null {
  const cluster = Object.hasOwn(state.clusters, clusterId) ? state.clusters[clusterId] : undefined;
  const shard = cluster && Object.hasOwn(cluster.shards, shardId) ? cluster.shards[shardId] : undefined;
  const until = shard?.noSwitchUntil;
  return until !== undefined && until > nowMs ? until : null;
}
