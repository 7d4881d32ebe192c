// A backup policy's retention, decided on the replicated state alone (no I/O): which backup
// sets and archived binlogs of a cluster are outside it, and the window a point-in-time
// restore can reach with what is stored (docs/backup-policies.md).
//
// The guarantee: a restore to any moment inside the retention stays possible. So the kept
// sets are every set finished inside the last keep_days days, plus the newest set finished
// before them (a restore to the retention's first moment starts from it), plus the newest
// keep_sets sets; and a binlog is kept unless the oldest kept set already holds every
// transaction in it (nothing a kept set replays, and no moment inside the retention, needs it).

import { gtidCovers } from '@kcm/agent-api';
import { backupSetsOf } from '../meta/backup';
import type { BackupPolicyRecord } from '../meta/backup-policies';
import { archiveCoversUntil, shardArchive } from '../meta/binlog-archive';
import { dict } from '../meta/dict';
import type { ArchivedBinlogRecord, BackupSetRecord, MetaState } from '../meta/state';

const DAY_MS = 86_400_000;

export interface RetentionPlan {
  kept: BackupSetRecord[];
  expiredSets: BackupSetRecord[];
  expiredBinlogs: { shardId: string; files: ArchivedBinlogRecord[] }[];
}

/** The sets a policy keeps at `nowMs`, oldest first (every set when it names no retention). */
export function keptSets(sets: readonly BackupSetRecord[], policy: Pick<BackupPolicyRecord, 'keepDays' | 'keepSets'>, nowMs: number): BackupSetRecord[] {
  const keep = new Set<BackupSetRecord>();
  if (policy.keepSets !== null) for (const s of sets.slice(-policy.keepSets)) keep.add(s);
  if (policy.keepDays !== null) {
    const retentionStart = nowMs - policy.keepDays * DAY_MS;
    const before = sets.filter((s) => s.finishedAt < retentionStart);
    const anchor = before.at(-1);
    if (anchor) keep.add(anchor);
    for (const s of sets) if (s.finishedAt >= retentionStart) keep.add(s);
  }
  if (policy.keepDays === null && policy.keepSets === null) return [...sets];
  return sets.filter((s) => keep.has(s));
}

/** What expiry removes of a cluster at `nowMs`: nothing when the cluster has no set. */
export function retentionPlan(state: MetaState, policy: BackupPolicyRecord, nowMs: number): RetentionPlan {
  const sets = backupSetsOf(state, policy.clusterId);
  const kept = keptSets(sets, policy, nowMs);
  const oldestKept = kept[0];
  if (!oldestKept) return { kept, expiredSets: [], expiredBinlogs: [] };
  const keptIds = new Set(kept.map((s) => s.id));
  const expiredSets = sets.filter((s) => !keptIds.has(s.id));
  const expiredBinlogs: RetentionPlan['expiredBinlogs'] = [];
  for (const archive of Object.values(state.binlogArchives ?? dict())) {
    if (archive.clusterId !== policy.clusterId) continue;
    // A shard the oldest kept set does not hold (added later): its binlogs are all kept.
    const shard = oldestKept.shards.find((s) => s.shardId === archive.shardId);
    if (!shard) continue;
    const files = archive.files.filter((f) => gtidCovers(shard.gtidPos, f.endGtidState) && f.lastEventTime * 1000 <= oldestKept.finishedAt);
    if (files.length > 0) expiredBinlogs.push({ shardId: archive.shardId, files });
  }
  return { kept, expiredSets, expiredBinlogs };
}

/**
 * The moments (Unix seconds) a cluster_restore of the cluster accepts with what is stored
 * and archived now: from the oldest set's consistent point to where every shard's archive
 * reaches (cluster_restore's own checks: a set at or before the time, each shard archived
 * up to it). Undefined when there is no set, or the archive does not reach the oldest set.
 */
export function restorableWindow(state: MetaState, clusterId: string): { earliest: number; latest: number } | undefined {
  const sets = backupSetsOf(state, clusterId);
  const oldest = sets[0];
  const newest = sets.at(-1);
  if (!oldest || !newest || newest.shards.length === 0) return undefined;
  const earliest = Math.ceil(oldest.finishedAt / 1000);
  const latest = Math.min(...newest.shards.map((s) => archiveCoversUntil(shardArchive(state, clusterId, s.shardId))));
  return latest >= earliest ? { earliest, latest } : undefined;
}
