// The pure half of the catch-up: reads the text `mariadb-binlog --verbose
// --base64-output=DECODE-ROWS` prints and yields, per row event of the moved table, the
// primary key of every row image (before and after), and the positions up to which
// everything is read: the end of each event group (a transaction, an XA PREPARE, a DDL
// statement) and of each event outside a group (a rotation, a new file's Format_description
// and Gtid_list, a Binlog_checkpoint), so any position SHOW MASTER STATUS gives is one it
// reaches, never one inside a group (a catch-up resumed there would start mid-transaction).
// Only primary keys are taken from the binlog: the catch-up then copies
// those rows' current state from the source (resync.ts), so no column value has to be
// decoded from this text (mariadb-binlog prints `'` and `\` inside strings unescaped, which
// is ambiguous for values but not for the integer and plain string keys we accept).
// Lines are given as latin1 strings, so every byte of the output is one character.

export type KeyValue = string | number | Buffer | null;

import type { BinlogPosition } from '@kcm/agent-api';

export type { BinlogPosition };

export type BinlogItem = { kind: 'key'; key: KeyValue[] } | { kind: 'boundary'; at: BinlogPosition };

// An event's header line: `#<date> <time> server id N  end_log_pos P [CRC32 0x..] \t<type and summary>`.
const HEADER = /^#\d{6}\s+\d{1,2}:\d{2}:\d{2} server id \d+\s+end_log_pos (\d+)(?: CRC32 0x[0-9a-f]+)?\s+(.*)$/;
const ROTATE = /^Rotate to (\S+)\s+pos: (\d+)/;
const GTID = /^GTID \d+-\d+-\d+/;
/** The Xid event that commits a transaction (`Xid = 14`), and the XA_prepare event that ends an XA one's first phase (`XID = X'78',X'',1`). */
const XID = /^Xid = /;
const XA_PREPARE = /^XID = /;
const QUERY = /^Query\s/;
/** Events that never belong to an event group: a rotation, a binlog file's first events, a checkpoint, a stop, an incident. */
const OUTSIDE_GROUPS = /^(?:Rotate to |Start: |Gtid list |Binlog checkpoint |Stop|Start_encryption|Incident)/;
/** What a GTID event prints when its group is a transaction rather than one statement. */
const BEGUN = /^(?:START TRANSACTION|BEGIN|XA START )/;
/** The text of the query event that ends a begun group (`ROLLBACK TO <savepoint>` does not). */
const GROUP_END_QUERY = /^(?:COMMIT|ROLLBACK)(?:\/\*!\*\/;)?$/;
const ROW_START = /^### (?:INSERT INTO|UPDATE|DELETE FROM) `((?:[^`]|``)+)`\.`((?:[^`]|``)+)`$/;
const COLUMN = /^###   @(\d+)=(.*)$/;

/** One value as mariadb-binlog prints it: NULL, a number (`-1 (4294967295)` for unsigned), or a quoted string with \xNN escapes. */
export function parseValue(text: string): KeyValue {
  if (text === 'NULL') return null;
  if (text.startsWith("'") && text.endsWith("'") && text.length >= 2) {
    const body = text.slice(1, -1);
    const bytes: number[] = [];
    for (let i = 0; i < body.length; i++) {
      if (body[i] === '\\' && body[i + 1] === 'x' && /^[0-9a-f]{2}$/i.test(body.slice(i + 2, i + 4))) {
        bytes.push(parseInt(body.slice(i + 2, i + 4), 16));
        i += 3;
      } else bytes.push(body.charCodeAt(i) & 0xff);
    }
    return Buffer.from(bytes);
  }
  const unsigned = /^-?\d+ \((\d+)\)$/.exec(text);
  if (unsigned) return unsigned[1];
  return text;
}

export class BinlogRowParser {
  private file: string;
  /**
   * The event group being read (a GTID event opens one): `begun` once its GTID event printed
   * START TRANSACTION / BEGIN / XA START (the group then ends at an Xid, an XA PREPARE or a
   * COMMIT/ROLLBACK query); without it the group is one statement (DDL, XA COMMIT/ROLLBACK).
   */
  private group: { begun: boolean } | null = null;
  /** The end of a query event of a begun group, until its text says whether it is the COMMIT/ROLLBACK. */
  private queryEnd = 0;
  /** The end of the last event whose header was read. */
  private lastEnd = 0;
  /** The row image being read: the key columns seen so far, by ordinal. */
  private image: Map<number, KeyValue> | null = null;
  private imageOfOurTable = false;

  /**
   * `keyOrdinals`: the 1-based ordinals of the primary key's columns, in key order.
   * Only row events on `database`.`table` yield keys.
   */
  constructor(
    private readonly database: string,
    private readonly table: string,
    private readonly keyOrdinals: number[],
    startFile: string,
  ) {
    this.file = startFile;
  }

  /** Everything one line tells. */
  feed(line: string): BinlogItem[] {
    const out: BinlogItem[] = [];
    const column = COLUMN.exec(line);
    if (column && this.image) {
      const ordinal = Number(column[1]);
      if (this.keyOrdinals.includes(ordinal)) this.image.set(ordinal, parseValue(column[2]));
      return out;
    }
    if (line === '### WHERE' || line === '### SET') {
      this.finishImage(out);
      this.image = new Map();
      return out;
    }
    this.finishImage(out);
    const row = ROW_START.exec(line);
    if (row) {
      this.imageOfOurTable = row[1].replaceAll('``', '`') === this.database && row[2].replaceAll('``', '`') === this.table;
      return out;
    }
    const header = HEADER.exec(line);
    if (header) {
      this.onEvent(Number(header[1]), header[2], out);
      return out;
    }
    if (this.group && !this.group.begun && BEGUN.test(line)) {
      this.group.begun = true;
    } else if (this.queryEnd > 0 && GROUP_END_QUERY.test(line)) {
      this.endGroup(this.queryEnd, out);
    }
    return out;
  }

  /** An event's header line: `end` is its end_log_pos (0 for the events a dump makes up), `what` its type and summary. */
  private onEvent(end: number, what: string, out: BinlogItem[]): void {
    this.queryEnd = 0;
    const groupEvent = !OUTSIDE_GROUPS.test(what);
    // A GTID event or an event that is never part of a group while a group is open: that
    // group ended with the event before (its end was not recognised), everything of it is read.
    if (this.group && (!groupEvent || GTID.test(what))) this.endGroup(this.lastEnd, out);
    if (end > 0) this.lastEnd = end;
    const rotate = ROTATE.exec(what);
    if (rotate) {
      this.file = rotate[1];
      out.push({ kind: 'boundary', at: { file: this.file, pos: Number(rotate[2]) } });
      return;
    }
    if (GTID.test(what)) {
      this.group = { begun: false };
      return;
    }
    if (!this.group) {
      // Outside a group an event is whole once its header is printed (row events only come inside one).
      if (end > 0) out.push({ kind: 'boundary', at: { file: this.file, pos: end } });
      return;
    }
    if (XID.test(what) || XA_PREPARE.test(what)) this.endGroup(end, out);
    else if (QUERY.test(what)) {
      if (this.group.begun) this.queryEnd = end;
      else this.endGroup(end, out);
    }
  }

  private endGroup(end: number, out: BinlogItem[]): void {
    this.group = null;
    this.queryEnd = 0;
    if (end > 0) out.push({ kind: 'boundary', at: { file: this.file, pos: end } });
  }

  private finishImage(out: BinlogItem[]): void {
    const image = this.image;
    this.image = null;
    if (!image || !this.imageOfOurTable) return;
    if (!this.keyOrdinals.every((o) => image.has(o))) return;
    out.push({ kind: 'key', key: this.keyOrdinals.map((o) => image.get(o) ?? null) });
  }
}

/** A binlog file's name split into its base and its number (mariadb-bin.000012 -> 12). */
function binlogNumber(file: string): { base: string; n: number } | null {
  const m = /^(.*)\.(\d+)$/.exec(file);
  return m ? { base: m[1], n: Number(m[2]) } : null;
}

/**
 * Whether `a` is at or past `b`. Binlog files are numbered (name.000001, name.000002, ...,
 * name.999999, name.1000000): compared by number, not as text, which orders name.1000000
 * before name.999999.
 */
export function atOrPast(a: BinlogPosition, b: BinlogPosition): boolean {
  if (a.file !== b.file) {
    const x = binlogNumber(a.file);
    const y = binlogNumber(b.file);
    if (x && y && x.base === y.base && x.n !== y.n) return x.n > y.n;
    return a.file > b.file;
  }
  return a.pos >= b.pos;
}
