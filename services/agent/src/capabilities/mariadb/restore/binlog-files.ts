// An instance's binlog files as the archiving round sees them: which exist, which is still
// being written, and per file the GTID state at its start and the times of its first and
// last events, read from the file's event headers (no tool is spawned for a listing).

import { open, stat } from 'node:fs/promises';
import path from 'node:path';
import { AgentFailure, type MariaDbBinlogFile, type MariaDbListBinlogsReply } from '@kcm/agent-api';
import type { InstanceLayout } from '../instance/instance-layout';
import { loadAdminAccount } from '../instance/instance-layout';
import { withAdmin } from '../instance/sql';

/** What my-cnf.ts names the binlogs (log_bin = <binlogDir>/mariadb-bin). */
const BINLOG_NAME = /^mariadb-bin\.\d{6,}$/;
const MAGIC = Buffer.from([0xfe, 0x62, 0x69, 0x6e]);
const HEADER_BYTES = 19;
const GTID_LIST_EVENT = 163;

export function checkBinlogName(name: string): string {
  if (!BINLOG_NAME.test(name)) throw new AgentFailure('invalid_argument', `binlog name ${JSON.stringify(name)} must look like mariadb-bin.000001`);
  return name;
}

export interface BinlogSummary {
  startGtidState: string;
  firstEventTime: number;
  lastEventTime: number;
}

/** Bytes read from the file at a time: one read per block, not one per event header. */
const READ_BLOCK_BYTES = 1024 * 1024;

/**
 * Walks the event headers of a binlog file: timestamp (u32) at 0, type at 4, event size
 * (u32) at 9. A file still being written may end in a partial event: the walk stops there.
 * The file is read in 1 MiB blocks: an archiving round lists every binlog of a busy master,
 * and one read per event (hundreds of thousands in a full file) took longer than the round.
 */
export async function summariseBinlog(file: string): Promise<BinlogSummary> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    const magic = Buffer.alloc(4);
    await handle.read(magic, 0, 4, 0);
    if (!magic.equals(MAGIC)) throw new AgentFailure('instance_failed', `${path.basename(file)} is not a binlog file`);
    const summary: BinlogSummary = { startGtidState: '', firstEventTime: 0, lastEventTime: 0 };
    let sawGtidList = false;
    const block = Buffer.alloc(READ_BLOCK_BYTES);
    let blockStart = 0; // file offset of block[0]
    let blockBytes = 0; // valid bytes in block
    /** Makes [at, at + n) of the file readable in `block`; false past the file's end. */
    const load = async (at: number, n: number): Promise<Buffer | false> => {
      if (at + n > size) return false;
      if (n > block.length) {
        const big = Buffer.alloc(n);
        await handle.read(big, 0, n, at);
        return big;
      }
      if (at < blockStart || at + n > blockStart + blockBytes) {
        blockStart = at;
        blockBytes = (await handle.read(block, 0, Math.min(block.length, size - at), at)).bytesRead;
        if (at + n > blockStart + blockBytes) return false;
      }
      return block.subarray(at - blockStart, at - blockStart + n);
    };
    for (let pos = 4; pos + HEADER_BYTES <= size; ) {
      const header = await load(pos, HEADER_BYTES);
      if (!header) break;
      const timestamp = header.readUInt32LE(0);
      const type = header.readUInt8(4);
      const eventSize = header.readUInt32LE(9);
      if (eventSize < HEADER_BYTES || pos + eventSize > size) break;
      if (timestamp > 0) {
        if (!summary.firstEventTime) summary.firstEventTime = timestamp;
        summary.lastEventTime = Math.max(summary.lastEventTime, timestamp);
      }
      if (type === GTID_LIST_EVENT && !sawGtidList) {
        const body = await load(pos + HEADER_BYTES, eventSize - HEADER_BYTES);
        if (!body) break;
        summary.startGtidState = parseGtidList(Buffer.from(body));
        sawGtidList = true;
      }
      pos += eventSize;
    }
    return summary;
  } finally {
    await handle.close();
  }
}

/**
 * Summaries of closed binlog files, by path, size and mtime: a closed file never changes,
 * so each is walked once, not at every archiving round (the round lists them all).
 */
const closedSummaries = new Map<string, BinlogSummary>();
const MAX_CACHED_SUMMARIES = 4096;

async function summaryOf(file: string, closed: boolean): Promise<BinlogSummary> {
  if (!closed) return summariseBinlog(file);
  const { size, mtimeMs } = await stat(file);
  const key = `${file}\0${size}\0${mtimeMs}`;
  const cached = closedSummaries.get(key);
  if (cached) return cached;
  const summary = await summariseBinlog(file);
  if (closedSummaries.size >= MAX_CACHED_SUMMARIES) closedSummaries.delete(closedSummaries.keys().next().value!);
  closedSummaries.set(key, summary);
  return summary;
}

/** A Gtid_list event's body: count (low 28 bits of a u32), then (domain u32, server u32, seq u64) each. */
export function parseGtidList(body: Buffer): string {
  const count = body.readUInt32LE(0) & 0x0fffffff;
  const gtids: string[] = [];
  for (let i = 0; i < count && 4 + (i + 1) * 16 <= body.length; i++) {
    const at = 4 + i * 16;
    gtids.push(`${body.readUInt32LE(at)}-${body.readUInt32LE(at + 4)}-${body.readBigUInt64LE(at + 8)}`);
  }
  return gtids.join(',');
}

/** SHOW BINARY LOGS with each file summarised; the last file is the one being written. */
export async function listBinlogs(layout: InstanceLayout, flush: boolean): Promise<MariaDbListBinlogsReply> {
  const admin = await loadAdminAccount(layout);
  const { names, serverId } = await withAdmin(layout, admin, [], async (s) => {
    if (flush) await s.run('close the current binlog', 'FLUSH BINARY LOGS');
    const rows = await s.rows<{ Log_name: string }>('list binlogs', 'SHOW BINARY LOGS');
    const [id] = await s.rows<{ id: string }>('read server_id', 'SELECT @@server_id AS id');
    return { names: rows.map((r) => r.Log_name), serverId: Number(id?.id ?? 0) };
  });
  const files: MariaDbBinlogFile[] = [];
  for (const [i, name] of names.entries()) {
    const file = path.join(layout.binlogDir, checkBinlogName(name));
    const closed = i < names.length - 1;
    const summary = await summaryOf(file, closed);
    files.push({
      name,
      size: (await stat(file)).size,
      closed,
      start_gtid_state: summary.startGtidState,
      first_event_time: summary.firstEventTime,
      last_event_time: summary.lastEventTime,
    });
  }
  return { files, server_id: serverId };
}

/** The path of a closed binlog file of the instance; the one being written is refused. */
export async function closedBinlogPath(layout: InstanceLayout, name: string): Promise<{ file: string; summary: MariaDbBinlogFile }> {
  checkBinlogName(name);
  const listing = await listBinlogs(layout, false);
  const summary = listing.files.find((f) => f.name === name);
  if (!summary) throw new AgentFailure('not_found', `binlog ${name} does not exist on the instance on port ${layout.port}`);
  if (!summary.closed) throw new AgentFailure('invalid_argument', `binlog ${name} is still being written; flush it first`);
  return { file: path.join(layout.binlogDir, name), summary };
}
