// The pure half of the catch-up: reads the text `mariadb-binlog --verbose
// --base64-output=DECODE-ROWS` prints and yields, per row event of the moved table, the
// primary key of every row image (before and after), and the positions at which a
// transaction ended. Only primary keys are taken from the binlog: the catch-up then copies
// those rows' current state from the source (resync.ts), so no column value has to be
// decoded from this text (mariadb-binlog prints `'` and `\` inside strings unescaped, which
// is ambiguous for values but not for the integer and plain string keys we accept).
// Lines are given as latin1 strings, so every byte of the output is one character.

export type KeyValue = string | number | Buffer | null;

export interface BinlogPosition {
  file: string;
  pos: number;
}

export type BinlogItem = { kind: 'key'; key: KeyValue[] } | { kind: 'boundary'; at: BinlogPosition };

const HEADER = /^#\d{6}\s+\d{1,2}:\d{2}:\d{2} server id \d+\s+end_log_pos (\d+)/;
const ROTATE = /\tRotate to (\S+)\s+pos: (\d+)/;
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
  private inTransaction = false;
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
    if (line.startsWith('START TRANSACTION') || line.startsWith('BEGIN')) {
      this.inTransaction = true;
      return out;
    }
    const header = HEADER.exec(line);
    if (header) {
      const rotate = ROTATE.exec(line);
      if (rotate) {
        this.file = rotate[1];
        out.push({ kind: 'boundary', at: { file: this.file, pos: Number(rotate[2]) } });
        return out;
      }
      const end = Number(header[1]);
      // Outside a transaction every event is whole once its header is printed (row events only come inside one).
      if (!this.inTransaction && end > 0) out.push({ kind: 'boundary', at: { file: this.file, pos: end } });
      this.lastEnd = end;
      return out;
    }
    if (line.startsWith('COMMIT') || line.startsWith('ROLLBACK')) {
      this.inTransaction = false;
      if (this.lastEnd > 0) out.push({ kind: 'boundary', at: { file: this.file, pos: this.lastEnd } });
    }
    return out;
  }

  private lastEnd = 0;

  private finishImage(out: BinlogItem[]): void {
    const image = this.image;
    this.image = null;
    if (!image || !this.imageOfOurTable) return;
    if (!this.keyOrdinals.every((o) => image.has(o))) return;
    out.push({ kind: 'key', key: this.keyOrdinals.map((o) => image.get(o) ?? null) });
  }
}

/** Whether `a` is at or past `b` (binlog files are numbered: name.000001, name.000002, ...). */
export function atOrPast(a: BinlogPosition, b: BinlogPosition): boolean {
  if (a.file !== b.file) return a.file > b.file;
  return a.pos >= b.pos;
}
