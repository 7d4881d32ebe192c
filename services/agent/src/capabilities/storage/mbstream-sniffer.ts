// Reads the small files a mariabackup stream carries about its own position while the
// stream passes on to storage, without extracting it. mbstream (xbstream) is a sequence
// of chunks:
//
//   "XBSTCK01" | flags u8 | type u8 ('P' payload, 'E' end of file) | path_len u32le | path
//   type P only: payload_len u64le | offset u64le | checksum u32le | payload
//
// Only the payloads of the wanted paths are kept (a few bytes each); every other byte is
// skipped as it arrives, so the sniffer costs no copy of the backup.

import { GTID_POS_TEXT } from '@kcm/agent-api';

const MAGIC = Buffer.from('XBSTCK01');
const FIXED_HEADER = MAGIC.length + 1 + 1 + 4;
const PAYLOAD_HEADER = 8 + 8 + 4;
const MAX_KEPT = 64 * 1024;

export const POSITION_FILES = ['mariadb_backup_binlog_info', 'xtrabackup_binlog_info', 'mariadb_backup_slave_info', 'xtrabackup_slave_info'] as const;

type Phase = { kind: 'header' } | { kind: 'payload'; path: string; remaining: number };

export class MbstreamSniffer {
  private pending = Buffer.alloc(0);
  private phase: Phase = { kind: 'header' };
  private readonly files = new Map<string, Buffer[]>();
  /** Set when the bytes are not an mbstream as understood here: sniffing stops, the stream is untouched. */
  problem = '';

  constructor(private readonly wanted: readonly string[] = POSITION_FILES) {}

  push(data: Buffer): void {
    let at = 0;
    while (at < data.length && !this.problem) {
      if (this.phase.kind === 'payload') {
        const take = Math.min(this.phase.remaining, data.length - at);
        const kept = this.files.get(this.phase.path);
        if (kept && kept.reduce((n, b) => n + b.length, 0) < MAX_KEPT) kept.push(Buffer.from(data.subarray(at, at + take)));
        this.phase.remaining -= take;
        at += take;
        if (this.phase.remaining === 0) this.phase = { kind: 'header' };
        continue;
      }
      // A header may straddle pushes: gather exactly its bytes (a few dozen) until it is whole.
      const want = this.headerLength() - this.pending.length;
      if (want > 0) {
        const take = Math.min(want, data.length - at);
        this.pending = Buffer.concat([this.pending, data.subarray(at, at + take)]);
        at += take;
        if (this.pending.length >= MAGIC.length && !this.pending.subarray(0, MAGIC.length).equals(MAGIC)) this.problem = 'no XBSTCK01 chunk magic where a chunk should start';
        continue;
      }
      this.takeHeader();
    }
    if (!this.problem && this.phase.kind === 'header' && this.pending.length > 0 && this.headerLength() === this.pending.length) this.takeHeader();
  }

  /** How long the header being gathered is, as far as its bytes so far tell. */
  private headerLength(): number {
    const b = this.pending;
    if (b.length < FIXED_HEADER) return FIXED_HEADER;
    const type = String.fromCharCode(b[MAGIC.length + 1]);
    const pathLen = b.readUInt32LE(MAGIC.length + 2);
    return FIXED_HEADER + Math.min(pathLen, 4097) + (type === 'P' ? PAYLOAD_HEADER : 0);
  }

  /** Reads the whole header in pending and moves on to its payload. */
  private takeHeader(): void {
    const b = this.pending;
    this.pending = Buffer.alloc(0);
    if (!b.subarray(0, MAGIC.length).equals(MAGIC)) {
      this.problem = 'no XBSTCK01 chunk magic where a chunk should start';
      return;
    }
    const type = String.fromCharCode(b[MAGIC.length + 1]);
    const pathLen = b.readUInt32LE(MAGIC.length + 2);
    if (pathLen > 4096) {
      this.problem = `chunk path length ${pathLen} is implausible`;
      return;
    }
    if (type === 'E') return;
    if (type !== 'P') {
      this.problem = `chunk type ${JSON.stringify(type)} is not understood`;
      return;
    }
    const name = b.subarray(FIXED_HEADER, FIXED_HEADER + pathLen).toString('utf8');
    const payloadLen = Number(b.readBigUInt64LE(FIXED_HEADER + pathLen));
    if (this.wanted.includes(name) && !this.files.has(name)) this.files.set(name, []);
    if (payloadLen > 0) this.phase = { kind: 'payload', path: name, remaining: payloadLen };
  }

  /** The content of a wanted file seen in the stream, or '' when it was not there. */
  file(name: string): string {
    return Buffer.concat(this.files.get(name) ?? []).toString('utf8');
  }
}

/**
 * The GTID position the backup is consistent with: the binlog position mariabackup
 * recorded (`<file>\t<pos>\t<gtid>`), else the slave position a standby source wrote
 * (--slave-info). '' when the stream carries a position file whose GTID is empty (a shard
 * that never committed a transaction); undefined when it carries no position file at all
 * (or one that does not parse), which makes the backup unusable for a restore.
 */
export function gtidOfBackup(sniffer: MbstreamSniffer): string | undefined {
  const binlogInfo = sniffer.file('mariadb_backup_binlog_info') || sniffer.file('xtrabackup_binlog_info');
  const slaveInfo = sniffer.file('mariadb_backup_slave_info') || sniffer.file('xtrabackup_slave_info');
  const fromBinlog = binlogInfo.trim().split(/\s+/)[2] ?? '';
  if (GTID_POS_TEXT.test(fromBinlog)) return fromBinlog;
  const slaveMatch = /gtid_slave_pos\s*=\s*'([^']*)'/.exec(slaveInfo);
  if (slaveMatch && GTID_POS_TEXT.test(slaveMatch[1])) return slaveMatch[1];
  const emptyBinlog = binlogInfo.trim() !== '' && fromBinlog === '';
  const emptySlave = slaveMatch !== null && slaveMatch[1] === '';
  return emptyBinlog || emptySlave ? '' : undefined;
}
