// `kcm audit verify --data-dir <dir>`: checks the audit chain in a copy of a member's data,
// offline (the member's LevelDB is locked while it runs). It reads the Raft snapshot (the
// state's newest records and the chain's tip) and the committed log after it, and replays
// the rule apply follows (chain.ts linkOf), so it holds the same chain the member held. It
// reports every record whose content does not match its hash (a changed record), every
// place where the chain does not continue (a record changed and re-hashed, or removed),
// and numbers that never arrive (records removed).
//
// Not detectable from one copy alone: the newest records removed from the end of the log
// (nothing after them points back). Compare the tip it prints with another member's, or
// with a tip kept elsewhere (get_audit shows tip_seq and tip_hash).

import { existsSync } from 'node:fs';
import path from 'node:path';
import { LevelStorage, readImage } from '@kcm/raft';
import { CommandKind, decodeCommand, type Command } from '../meta/commands';
import { restoreMeta } from '../meta/snapshot/image';
import { linkOf, recordHash, type AuditRecord, type AuditTip } from './chain';

export interface AuditVerifyReport {
  ok: boolean;
  /** Records found: in the snapshot's state, and linked from the log after it. */
  snapshotRecords: number;
  logRecords: number;
  tip: AuditTip;
  problems: string[];
}

/** The Raft store inside a member's data directory (or the store itself). */
export function raftDirOf(dataDir: string): string {
  const inner = path.join(dataDir, 'raft');
  return existsSync(path.join(inner, 'CURRENT')) ? inner : dataDir;
}

export async function verifyAuditTrail(dataDir: string): Promise<AuditVerifyReport> {
  const dir = raftDirOf(dataDir);
  if (!existsSync(path.join(dir, 'CURRENT'))) throw new Error(`${dataDir}: no Raft LevelDB store here or in ${path.join(dataDir, 'raft')}`);
  const storage = await LevelStorage.open(dir);
  try {
    const problems: string[] = [];
    const snapshot = storage.snapshot();
    const state = restoreMeta(await readImage(snapshot.data));
    // The snapshot's own records: each must match its hash and follow the one before it.
    const kept = state.audit.records;
    kept.forEach((r, i) => {
      const { jobId: _notHashed, ...record } = r;
      const { hash, ...content } = record;
      if (recordHash(content) !== hash) problems.push(`record ${r.seq} (in the snapshot at index ${snapshot.meta.index}) was changed: its content does not match its hash`);
      const before = kept[i - 1];
      if (before && (r.seq !== before.seq + 1 || r.prevHash !== before.hash)) problems.push(`record ${r.seq} (in the snapshot) does not follow record ${before.seq}: a record between them was removed, or one of them was changed`);
    });
    const last = kept.at(-1);
    if (last && (last.seq !== state.audit.tip.seq || last.hash !== state.audit.tip.hash)) problems.push(`the snapshot's chain tip (${state.audit.tip.seq}) is not its newest record (${last.seq}): the snapshot was changed`);

    // The committed log after the snapshot, replayed as apply replays it.
    const logged: LoggedRecord[] = [];
    const commit = storage.initialState().hardState.commit;
    const lastCommitted = Math.min(commit, storage.lastIndex());
    for (let lo = storage.firstIndex(); lo <= lastCommitted; lo += 1000) {
      for (const entry of storage.entries(lo, Math.min(lastCommitted, lo + 999) + 1)) {
        for (const record of auditRecordsOf(entry.type, entry.data, entry.index, problems)) logged.push({ record, index: entry.index });
      }
    }
    const replay = replayChain(state.audit.tip, `the snapshot at index ${snapshot.meta.index}`, logged);
    problems.push(...replay.problems);
    const { tip, linked: logRecords } = replay;
    return { ok: problems.length === 0, snapshotRecords: kept.length, logRecords, tip, problems };
  } finally {
    await storage.close();
  }
}

export interface LoggedRecord {
  record: AuditRecord;
  /** The Raft log index of the entry that carries it. */
  index: number;
}

/**
 * Replays records in log order from `start` by apply's rule (chain.ts linkOf): the chain's
 * final tip, how many records linked, and what is wrong, naming each record.
 */
export function replayChain(start: AuditTip, startWhere: string, logged: readonly LoggedRecord[]): { tip: AuditTip; linked: number; problems: string[] } {
  const problems: string[] = [];
  let tip: AuditTip = { ...start };
  let tipWhere = startWhere;
  let linked = 0;
  const gaps: LoggedRecord[] = [];
  for (const item of logged) {
    const { record, index } = item;
    const link = linkOf(tip, record);
    if (link === 'linked') {
      tip = { seq: record.seq, hash: record.hash };
      tipWhere = `log index ${index}`;
      linked++;
    } else if (link === 'altered') {
      problems.push(`record ${record.seq} (log index ${index}) was changed: its content does not match its hash`);
    } else if (link === 'forked') {
      problems.push(`record ${record.seq} (log index ${index}) does not follow record ${tip.seq} (${tipWhere}): record ${tip.seq} was changed (and re-hashed) or replaced, or ${record.seq} was`);
    } else if (link === 'gap') {
      gaps.push(item);
    }
    // 'stale': numbered by a leader with an old view of the chain; apply refused it too.
  }
  // A gap the chain later closed was a refused proposal; one it never closed is a removed record.
  const open = gaps.filter((g) => g.record.seq > tip.seq + 1);
  if (open.length > 0) problems.push(`record ${tip.seq + 1} is missing: record ${open[0].record.seq} (log index ${open[0].index}) comes after record ${tip.seq} (${tipWhere}) with nothing between`);
  return { tip, linked, problems };
}

/** The audit records a log entry carries (JobSubmitted commands, alone or in a batch). */
function auditRecordsOf(type: string, data: Uint8Array, index: number, problems: string[]): AuditRecord[] {
  if (type !== 'normal' || data.byteLength === 0) return [];
  let logged;
  try {
    logged = decodeCommand(data);
  } catch {
    problems.push(`log index ${index} is not a readable command: it was changed`);
    return [];
  }
  const commands: Command[] = logged.kind === CommandKind.CommandBatch ? logged.commands : [logged];
  return commands.flatMap((c) => (c.kind === CommandKind.JobSubmitted && c.audit ? [c.audit] : []));
}
