// Apply functions of continuous binlog archiving, and the look-ups made on the archive:
// what a shard has archived up to (the archiving round), and which files a point-in-time
// restore replays.

import { formatGtidPos, gtidCovers, parseGtidPos, type GtidEntry } from '@kcm/agent-api';
import { dict, own } from './dict';
import { accepted, refused, type ApplyOutcome } from './outcome';
import type { ArchivedBinlogRecord, MetaState, ShardBinlogArchive } from './state';
import type { CommandBase, CommandKind } from './command-numbers';

/** A shard master's closed binlog is on backup storage; the same key again is a no-op (a repeated round). */
export interface BinlogArchived extends CommandBase<typeof CommandKind.BinlogArchived> {
  clusterId: string;
  shardId: string;
  file: ArchivedBinlogRecord;
}

export const archiveKeyOf = (clusterId: string, shardId: string): string => `${clusterId}/${shardId}`;

export function applyBinlogArchived(state: MetaState, cmd: BinlogArchived): ApplyOutcome<null> {
  state.binlogArchives ??= dict();
  const key = archiveKeyOf(cmd.clusterId, cmd.shardId);
  const archive: ShardBinlogArchive = own(state.binlogArchives, key) ?? { clusterId: cmd.clusterId, shardId: cmd.shardId, files: [] };
  if (archive.files.some((f) => f.key === cmd.file.key)) return accepted(null);
  if (!Number.isInteger(cmd.file.lastEventTime) || cmd.file.lastEventTime < 0) return refused('INVALID_PARAS', `binlog ${cmd.file.name}: lastEventTime must be Unix seconds`);
  archive.files.push({ ...cmd.file, archivedAt: cmd.at });
  state.binlogArchives[key] = archive;
  return accepted(null);
}

export function shardArchive(state: MetaState, clusterId: string, shardId: string): ShardBinlogArchive | undefined {
  return own(state.binlogArchives ?? dict(), archiveKeyOf(clusterId, shardId));
}

/** The GTID state the shard's archive reaches (the union of its files' end states). */
export function archivedUpTo(archive: ShardBinlogArchive | undefined): string {
  const all = new Map<number, GtidEntry>();
  for (const f of archive?.files ?? []) {
    for (const entry of parseGtidPos(f.endGtidState).values()) if ((all.get(entry.domain)?.seq ?? -1) < entry.seq) all.set(entry.domain, entry);
  }
  return formatGtidPos(all);
}

/**
 * The archived files a restore to `stopTime` (Unix seconds) replays after a full backup at
 * `backupGtid`: every file that holds a transaction past the backup and starts before
 * stopTime, in archive order. The replay itself skips what the instance already has.
 */
export function binlogsToReplay(archive: ShardBinlogArchive | undefined, backupGtid: string, stopTime: number): ArchivedBinlogRecord[] {
  return (archive?.files ?? []).filter((f) => !gtidCovers(backupGtid, f.endGtidState) && f.firstEventTime < stopTime);
}

/** Unix seconds up to which the shard's archive is complete: its newest file's last event. */
export function archiveCoversUntil(archive: ShardBinlogArchive | undefined): number {
  return Math.max(0, ...(archive?.files ?? []).map((f) => f.lastEventTime));
}
