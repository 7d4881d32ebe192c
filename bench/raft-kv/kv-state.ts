// The raft-kv state machine: an in-memory map rebuilt on start from the stored snapshot
// plus the committed log after it (the driver replays them because appliedIndex()
// starts at the snapshot's index). Chosen over a durable map because applying
// in memory costs nothing next to the fsync on the write path, and the snapshot every
// `snapshotEntries` entries bounds the replay on restart. Re-applying a put is
// idempotent (last write wins, in log order), which is all the restart contract needs.
//
// Entry encoding (a put): u16 key length, key bytes (UTF-8), value bytes.
// Snapshot image: u32 count, then per key: u16 key length, key, u32 value length, value.

import type { Entry, SnapshotMeta } from '../../libs/raft/src/core/types';
import type { StateMachine } from '../../libs/raft/src/state-machine';

export function encodePut(key: string, value: Uint8Array): Uint8Array {
  const keyBytes = Buffer.from(key, 'utf8');
  if (keyBytes.length > 0xffff) throw new RangeError('key longer than 65535 bytes');
  const out = Buffer.allocUnsafe(2 + keyBytes.length + value.byteLength);
  out.writeUInt16BE(keyBytes.length, 0);
  keyBytes.copy(out, 2);
  out.set(value, 2 + keyBytes.length);
  return out;
}

export function decodePut(data: Uint8Array): { key: string; value: Buffer } {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const keyLength = buf.readUInt16BE(0);
  return { key: buf.toString('utf8', 2, 2 + keyLength), value: buf.subarray(2 + keyLength) };
}

/** Bytes of image per piece of snapshotChunks(): about a millisecond of copying. */
const CHUNK_BYTES = 256 * 1024;

export class KvStateMachine implements StateMachine {
  private readonly map = new Map<string, Buffer>();
  private applied = 0;
  /**
   * While a snapshot reader is open: the value each key had when it opened (undefined:
   * the key did not exist), recorded by apply the first time it changes the key. The
   * reader shows these instead of the live values: copy-on-write, per key.
   */
  private before: Map<string, Buffer | undefined> | undefined;

  /** Results: the entry's index for a put, undefined for no-ops and conf entries. */
  apply(entries: Entry[]): unknown[] {
    const results: unknown[] = new Array(entries.length);
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i];
      if (e.type === 'normal' && e.data.byteLength > 0) {
        const { key, value } = decodePut(e.data);
        if (this.before && !this.before.has(key)) this.before.set(key, this.map.get(key));
        // Copy: the entry's buffer may be a slice of a larger network or disk buffer.
        this.map.set(key, Buffer.from(value));
        results[i] = e.index;
      }
    }
    if (entries.length > 0) this.applied = entries[entries.length - 1].index;
    return results;
  }

  get(key: string): Buffer | undefined {
    return this.map.get(key);
  }

  get size(): number {
    return this.map.size;
  }

  appliedIndex(): number {
    return this.applied;
  }

  snapshot(): Uint8Array {
    let bytes = 4;
    const keys: Buffer[] = [];
    for (const [key, value] of this.map) {
      const k = Buffer.from(key, 'utf8');
      keys.push(k);
      bytes += 2 + k.length + 4 + value.length;
    }
    const out = Buffer.allocUnsafe(bytes);
    let at = out.writeUInt32BE(this.map.size, 0);
    let i = 0;
    for (const value of this.map.values()) {
      const k = keys[i++];
      at = out.writeUInt16BE(k.length, at);
      at += k.copy(out, at);
      at = out.writeUInt32BE(value.length, at);
      at += value.copy(out, at);
    }
    return out;
  }

  /**
   * The image of snapshot(), in pieces of about CHUNK_BYTES, as of this call: apply may
   * run between pieces (see `before`). Keys added meanwhile are appended to the map's
   * iteration order and skipped; puts never delete, so the count is known up front.
   */
  snapshotChunks(): { chunks: Iterator<Uint8Array>; copyOnWrite: boolean } {
    const before = new Map<string, Buffer | undefined>();
    this.before = before;
    const count = this.map.size;
    const live = this.map.entries();
    const done = () => {
      if (this.before === before) this.before = undefined;
    };
    function* pieces(): Generator<Uint8Array> {
      try {
        const header = Buffer.allocUnsafe(4);
        header.writeUInt32BE(count, 0);
        yield header;
        let parts: Buffer[] = [];
        let bytes = 0;
        for (const [key, current] of live) {
          const value = before.has(key) ? before.get(key) : current;
          if (value === undefined) continue; // added after the reader opened
          const k = Buffer.from(key, 'utf8');
          const lengths = Buffer.allocUnsafe(2);
          lengths.writeUInt16BE(k.length, 0);
          const valueLength = Buffer.allocUnsafe(4);
          valueLength.writeUInt32BE(value.length, 0);
          parts.push(lengths, k, valueLength, value);
          bytes += 6 + k.length + value.length;
          if (bytes >= CHUNK_BYTES) {
            yield Buffer.concat(parts, bytes);
            parts = [];
            bytes = 0;
          }
        }
        if (bytes > 0) yield Buffer.concat(parts, bytes);
      } finally {
        done();
      }
    }
    return { chunks: pieces(), copyOnWrite: true };
  }

  restore(data: Uint8Array, meta: SnapshotMeta): void {
    this.map.clear();
    this.before = undefined;
    const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    if (buf.length > 0) {
      const count = buf.readUInt32BE(0);
      let at = 4;
      for (let n = 0; n < count; n++) {
        const keyLength = buf.readUInt16BE(at);
        const key = buf.toString('utf8', at + 2, at + 2 + keyLength);
        at += 2 + keyLength;
        const valueLength = buf.readUInt32BE(at);
        this.map.set(key, Buffer.from(buf.subarray(at + 4, at + 4 + valueLength)));
        at += 4 + valueLength;
      }
    }
    this.applied = meta.index;
  }
}
