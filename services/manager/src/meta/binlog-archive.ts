// Apply functions of continuous binlog archiving, and the look-ups made on the archive:
// what a shard has archived up to (the archiving round), and which files a point-in-time
// restore replays.

import type { BinlogArchived } from './commands';
import { dict, own } from './dict';
import { accepted, refused, type ApplyOutcome } from './outcome';
import type { ArchivedBinlogRecord, MetaState, ShardBinlogArchive } from './state';

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

/** GTID list `d-s-n,...` as domain -> highest seq_no. */
export function gtidSeqByDomain(gtids: string): Map<number, bigint> {
  const seqs = new Map<number, bigint>();
  for (const gtid of gtids.split(',').filter(Boolean)) {
    const [domain, , seq] = gtid.split('-');
    const d = Number(domain);
    const n = BigInt(seq);
    if ((seqs.get(d) ?? -1n) < n) seqs.set(d, n);
  }
  return seqs;
}

/** Whether every transaction of `inner` is within `outer` (per domain, seq_no at most outer's). */
export function gtidStateWithin(inner: string, outer: string): boolean {
  const o = gtidSeqByDomain(outer);
  for (const [domain, seq] of gtidSeqByDomain(inner)) if (seq > (o.get(domain) ?? -1n)) return false;
  return true;
}

/** The GTID state the shard's archive reaches (the union of its files' end states). */
export function archivedUpTo(archive: ShardBinlogArchive | undefined): string {
  const all = new Map<number, { server: string; seq: bigint }>();
  for (const f of archive?.files ?? []) {
    for (const gtid of f.endGtidState.split(',').filter(Boolean)) {
      const [domain, server, seq] = gtid.split('-');
      const cur = all.get(Number(domain));
      if (!cur || cur.seq < BigInt(seq)) all.set(Number(domain), { server, seq: BigInt(seq) });
    }
  }
  return [...all.entries()]
    .sort(([a], [b]) => a - b)
    .map(([d, { server, seq }]) => `${d}-${server}-${seq}`)
    .join(',');
}

/**
 * The archived files a restore to `stopTime` (Unix seconds) replays after a full backup at
 * `backupGtid`: every file that holds a transaction past the backup and starts before
 * stopTime, in archive order. The replay itself skips what the instance already has.
 */
export function binlogsToReplay(archive: ShardBinlogArchive | undefined, backupGtid: string, stopTime: number): ArchivedBinlogRecord[] {
  return (archive?.files ?? []).filter((f) => !gtidStateWithin(f.endGtidState, backupGtid) && f.firstEventTime < stopTime);
}

/** Unix seconds up to which the shard's archive is complete: its newest file's last event. */
export function archiveCoversUntil(archive: ShardBinlogArchive | undefined): number {
  return Math.max(0, ...(archive?.files ?? []).map((f) => f.lastEventTime));
}
