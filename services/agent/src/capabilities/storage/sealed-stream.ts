// Backup encryption at rest: the sealed-object format (docs/backup-encryption.md, byte by
// byte). A backup object or archived binlog is sealed by the agent on the host it comes
// from, before it leaves that host, with a per-object random 32-byte data key; the storage
// host only ever holds the sealed bytes (the manager keeps the data key wrapped by the
// storage's key-encryption key in the object's manifest meta).
//
//   header (20 bytes): "KCMSEAL1" | record_bytes u32be | nonce_prefix (7 random bytes) | 0x00
//   records: AES-256-GCM(data key, nonce = nonce_prefix | index u32be | last (0x00/0x01),
//            aad = the 20 header bytes) of each record_bytes of plaintext (the last may be
//            shorter, or empty), each followed by its 16-byte tag.
//
// The nonce of a record names its place and whether it is the last (the STREAM construction
// of Hoang, Reyhanitabar, Rogaway and Vizár): records swapped, dropped or cut off after any
// record fail authentication, since the record read as last must carry the last flag.
// Neither side ever releases plaintext whose tag has not been checked.

import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export const SEAL_MAGIC = Buffer.from('KCMSEAL1', 'ascii');
export const SEAL_HEADER_BYTES = 20;
export const SEAL_TAG_BYTES = 16;
export const DATA_KEY_BYTES = 32;
/** Plaintext bytes per record: 1 MiB, the size of a data plane frame. */
export const SEAL_RECORD_BYTES = 1024 * 1024;
const NONCE_PREFIX_BYTES = 7;
const MAX_RECORDS = 2 ** 32;

/** Authentication failed, or the bytes are not a sealed object: nothing read may be used. */
export class SealBroken extends Error {
  override name = 'SealBroken';
}

function nonceOf(prefix: Buffer, index: number, last: boolean): Buffer {
  const nonce = Buffer.alloc(12);
  prefix.copy(nonce, 0);
  nonce.writeUInt32BE(index, NONCE_PREFIX_BYTES);
  nonce[11] = last ? 1 : 0;
  return nonce;
}

function checkDataKey(key: Buffer): Buffer {
  if (!Buffer.isBuffer(key) || key.length !== DATA_KEY_BYTES) throw new Error(`a data key must be ${DATA_KEY_BYTES} bytes`);
  return key;
}

/** Pieces held back until whether they end the stream is known; never joined. */
class HeldBytes {
  pieces: Buffer[] = [];
  bytes = 0;
  push(piece: Buffer): void {
    this.pieces.push(piece);
    this.bytes += piece.length;
  }
  /** Removes and returns the first n bytes as pieces (views, no copy). */
  take(n: number): Buffer[] {
    const out: Buffer[] = [];
    while (n > 0) {
      const first = this.pieces[0];
      if (first.length <= n) {
        out.push(first);
        this.pieces.shift();
        n -= first.length;
        this.bytes -= first.length;
      } else {
        out.push(first.subarray(0, n));
        this.pieces[0] = first.subarray(n);
        this.bytes -= n;
        n = 0;
      }
    }
    return out;
  }
}

/**
 * Seals a stream: push() the plaintext as it comes, end() once; each returns the sealed
 * bytes ready to go (the first call's start with the header). A full record is sealed once
 * a byte after it arrives (only then is it known not to be the last).
 */
export class ObjectSealer {
  private readonly header: Buffer;
  private readonly prefix: Buffer;
  private readonly held = new HeldBytes();
  private index = 0;
  private headerSent = false;
  private ended = false;

  constructor(private readonly dataKey: Buffer, private readonly recordBytes = SEAL_RECORD_BYTES, prefix: Buffer = randomBytes(NONCE_PREFIX_BYTES)) {
    checkDataKey(dataKey);
    if (!Number.isInteger(recordBytes) || recordBytes < 1 || recordBytes > 2 ** 30) throw new Error('recordBytes must be from 1 to 2^30');
    this.prefix = Buffer.from(prefix);
    this.header = Buffer.alloc(SEAL_HEADER_BYTES);
    SEAL_MAGIC.copy(this.header, 0);
    this.header.writeUInt32BE(recordBytes, 8);
    this.prefix.copy(this.header, 12);
  }

  push(data: Buffer): Buffer[] {
    if (this.ended) throw new Error('push after end');
    const out = this.start();
    if (data.length > 0) this.held.push(data);
    while (this.held.bytes > this.recordBytes) out.push(...this.sealRecord(this.held.take(this.recordBytes), false));
    return out;
  }

  end(): Buffer[] {
    if (this.ended) throw new Error('end called twice');
    this.ended = true;
    const out = this.start();
    out.push(...this.sealRecord(this.held.take(this.held.bytes), true));
    return out;
  }

  private start(): Buffer[] {
    if (this.headerSent) return [];
    this.headerSent = true;
    return [this.header];
  }

  private sealRecord(pieces: Buffer[], last: boolean): Buffer[] {
    if (this.index >= MAX_RECORDS) throw new Error('a sealed object holds at most 2^32 records');
    const cipher = createCipheriv('aes-256-gcm', this.dataKey, nonceOf(this.prefix, this.index++, last));
    cipher.setAAD(this.header);
    const out = pieces.map((p) => cipher.update(p));
    const rest = cipher.final();
    if (rest.length > 0) out.push(rest);
    out.push(cipher.getAuthTag());
    return out;
  }
}

/**
 * Opens a sealed stream: push() the sealed bytes as they come, end() once; each returns only
 * plaintext whose record tag verified. Throws SealBroken on a bad header, a failed tag, or
 * a stream that ends without its last record (truncation), and on bytes after it.
 */
export class ObjectOpener {
  private readonly held = new HeldBytes();
  private header: Buffer | undefined;
  private prefix = Buffer.alloc(0);
  private recordBytes = 0;
  private index = 0;
  private ended = false;

  constructor(private readonly dataKey: Buffer) {
    checkDataKey(dataKey);
  }

  /** Plaintext bytes released so far belong to records whose tags verified. */
  push(data: Buffer): Buffer[] {
    if (this.ended) throw new SealBroken('bytes after the last record');
    if (data.length > 0) this.held.push(data);
    if (!this.header && !this.readHeader()) return [];
    const out: Buffer[] = [];
    // A full record is opened once a byte after it is here: only then is it known not to be the last.
    while (this.held.bytes > this.recordBytes + SEAL_TAG_BYTES) out.push(...this.openRecord(this.held.take(this.recordBytes + SEAL_TAG_BYTES), false));
    return out;
  }

  end(): Buffer[] {
    if (this.ended) throw new Error('end called twice');
    this.ended = true;
    if (!this.header && !this.readHeader()) throw new SealBroken('the object ends inside its header');
    if (this.held.bytes < SEAL_TAG_BYTES) throw new SealBroken('the object ends without its last record (truncated)');
    return this.openRecord(this.held.take(this.held.bytes), true);
  }

  private readHeader(): boolean {
    if (this.held.bytes < SEAL_HEADER_BYTES) return false;
    const header = Buffer.concat(this.held.take(SEAL_HEADER_BYTES));
    if (!header.subarray(0, 8).equals(SEAL_MAGIC)) throw new SealBroken('not a sealed object (no KCMSEAL1 header)');
    const recordBytes = header.readUInt32BE(8);
    if (recordBytes < 1 || recordBytes > 2 ** 30 || header[19] !== 0) throw new SealBroken('the sealed object\'s header is malformed');
    this.header = header;
    this.recordBytes = recordBytes;
    this.prefix = header.subarray(12, 19);
    return true;
  }

  private openRecord(pieces: Buffer[], last: boolean): Buffer[] {
    const total = pieces.reduce((n, p) => n + p.length, 0);
    const sealed = pieces.length === 1 ? pieces[0] : Buffer.concat(pieces, total);
    if (this.index >= MAX_RECORDS) throw new SealBroken('more than 2^32 records');
    const decipher = createDecipheriv('aes-256-gcm', this.dataKey, nonceOf(this.prefix, this.index++, last));
    decipher.setAAD(this.header!);
    decipher.setAuthTag(sealed.subarray(total - SEAL_TAG_BYTES));
    const plain = decipher.update(sealed.subarray(0, total - SEAL_TAG_BYTES));
    try {
      decipher.final();
    } catch {
      throw new SealBroken(`record ${this.index - 1}${last ? ' (read as the last)' : ''} fails authentication: the object was altered, cut short, or sealed with another key`);
    }
    return plain.length > 0 ? [plain] : [];
  }
}

/** The sealed bytes of `plain` at once (small objects, tests). */
export function sealAll(dataKey: Buffer, plain: Buffer, recordBytes?: number): Buffer {
  const sealer = new ObjectSealer(dataKey, recordBytes);
  return Buffer.concat([...sealer.push(plain), ...sealer.end()]);
}

/** The plaintext of a whole sealed object; throws SealBroken when any record fails. */
export function openAll(dataKey: Buffer, sealed: Buffer): Buffer {
  const opener = new ObjectOpener(dataKey);
  return Buffer.concat([...opener.push(sealed), ...opener.end()]);
}

/** Sealed size of `plainBytes` of plaintext. */
export function sealedBytesOf(plainBytes: number, recordBytes = SEAL_RECORD_BYTES): number {
  const records = Math.max(1, Math.ceil(plainBytes / recordBytes));
  return SEAL_HEADER_BYTES + plainBytes + records * SEAL_TAG_BYTES;
}
