// The protobuf wire format (varints and length-delimited fields), just enough for the
// hand-written hot-path codec in message-codec.ts. Numbers are JS numbers: uint64 values
// above 2^53 cannot occur in Raft terms and indices, and are rejected when decoding.

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LEN = 2;
export const WIRE_FIXED32 = 5;

const TWO_POW_32 = 4294967296;

export function varintSize(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  let size = 4;
  let rest = Math.floor(value / 0x10000000);
  while (rest > 0) {
    size++;
    rest = Math.floor(rest / 0x80);
  }
  return size;
}

/** Size of a length-delimited field's tag + length prefix + body. */
export function lenFieldSize(fieldTagSize: number, bodySize: number): number {
  return fieldTagSize + varintSize(bodySize) + bodySize;
}

/** Writes into a buffer whose exact size was computed beforehand. */
export class WireWriter {
  readonly buf: Buffer;
  pos = 0;

  constructor(size: number) {
    // allocUnsafe: every byte is overwritten; the size was computed exactly.
    this.buf = Buffer.allocUnsafe(size);
  }

  varint(value: number): void {
    const buf = this.buf;
    if (value < 0x80) {
      buf[this.pos++] = value; // tags, types, small lengths: the common case
      return;
    }
    if (value < TWO_POW_32) {
      let v = value >>> 0;
      while (v > 0x7f) {
        buf[this.pos++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
      buf[this.pos++] = v;
      return;
    }
    let v = value;
    while (v > 0x7f) {
      buf[this.pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    buf[this.pos++] = v;
  }

  bytes(data: Uint8Array): void {
    this.varint(data.byteLength);
    this.buf.set(data, this.pos);
    this.pos += data.byteLength;
  }
}

export function tagOf(field: number, wireType: number): number {
  return (field << 3) | wireType;
}

export class WireDecodeError extends Error {
  override readonly name = 'WireDecodeError';
}

export class WireReader {
  readonly buf: Buffer;
  pos: number;
  end: number;

  constructor(buf: Buffer, start = 0, end = buf.byteLength) {
    this.buf = buf;
    this.pos = start;
    this.end = end;
  }

  done(): boolean {
    return this.pos >= this.end;
  }

  varint(): number {
    const buf = this.buf;
    let result = 0;
    let shift = 0;
    // The first 28 bits with bit operations, the rest with multiplication (no 32-bit overflow).
    while (shift < 28) {
      if (this.pos >= this.end) throw new WireDecodeError('truncated varint');
      const b = buf[this.pos++];
      result |= (b & 0x7f) << shift;
      if (b < 0x80) return result >>> 0;
      shift += 7;
    }
    let value = result >>> 0;
    let factor = 0x10000000;
    for (;;) {
      if (this.pos >= this.end) throw new WireDecodeError('truncated varint');
      const b = buf[this.pos++];
      value += (b & 0x7f) * factor;
      if (b < 0x80) break;
      factor *= 0x80;
      if (factor > 2 ** 63) throw new WireDecodeError('varint too long');
    }
    if (value > Number.MAX_SAFE_INTEGER) throw new WireDecodeError('integer above 2^53');
    return value;
  }

  /** Returns [start, end) of a length-delimited body and moves past it. */
  lenRange(): [number, number] {
    const len = this.varint();
    const start = this.pos;
    const end = start + len;
    if (end > this.end) throw new WireDecodeError('truncated length-delimited field');
    this.pos = end;
    return [start, end];
  }

  string(): string {
    const [start, end] = this.lenRange();
    return this.buf.toString('utf8', start, end);
  }

  /**
   * A plain Uint8Array view (not a Buffer, no copy) into the reader's buffer: the caller
   * owns the buffer it passed in.
   */
  bytes(): Uint8Array {
    const [start, end] = this.lenRange();
    return new Uint8Array(this.buf.buffer, this.buf.byteOffset + start, end - start);
  }

  /** Reads a nested message in place: `read` sees only its body. */
  nested<R>(read: (r: WireReader) => R): R {
    const len = this.varint();
    const end = this.pos + len;
    if (end > this.end) throw new WireDecodeError('truncated nested message');
    const outerEnd = this.end;
    this.end = end;
    try {
      return read(this);
    } finally {
      this.pos = end;
      this.end = outerEnd;
    }
  }

  /** Skips a field this decoder does not know (a newer sender's addition). */
  skip(wireType: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        this.varint();
        return;
      case WIRE_FIXED64:
        this.pos += 8;
        break;
      case WIRE_LEN:
        this.lenRange();
        return;
      case WIRE_FIXED32:
        this.pos += 4;
        break;
      default:
        throw new WireDecodeError(`unsupported wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new WireDecodeError('truncated fixed-width field');
  }
}
