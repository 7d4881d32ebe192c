// Compact binary encodings of what LevelStorage writes: log entries, hard state and
// snapshot metadata. Entries are hot (thousands per second), so their encoding is a
// fixed 9-byte header plus the data, written without intermediate objects:
//
//   entry value   = type (1 byte: 0 normal, 1 conf) | term (8 bytes, big-endian) | data
//   hard state    = term (8) | commit (8) | hasVote (1) | vote (UTF-8, rest of value)
//   snapshot meta = index (8) | term (8) | conf (UTF-8 JSON {voters, learners})
//
// The entry's index is not in its value: it is the key (see level-keys.ts).

import { readUint64, writeUint64 } from '../level-keys';
import type { ConfState, Entry, EntryType, HardState, SnapshotMeta } from '../core/types';

const ENTRY_HEADER_BYTES = 9;
const TYPE_NORMAL = 0;
const TYPE_CONF = 1;
const TWO_POW_32 = 0x1_0000_0000;
const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder('utf-8', { fatal: true });

export function encodeEntryValue(entry: Entry): Uint8Array {
  const { term, data } = entry;
  if (!Number.isSafeInteger(term) || term < 0) throw new RangeError(`entry ${entry.index}: bad term ${term}`);
  const out = new Uint8Array(ENTRY_HEADER_BYTES + data.byteLength);
  out[0] = entry.type === 'conf' ? TYPE_CONF : TYPE_NORMAL;
  const hi = Math.floor(term / TWO_POW_32);
  const lo = term >>> 0;
  out[1] = hi >>> 24;
  out[2] = (hi >>> 16) & 0xff;
  out[3] = (hi >>> 8) & 0xff;
  out[4] = hi & 0xff;
  out[5] = lo >>> 24;
  out[6] = (lo >>> 16) & 0xff;
  out[7] = (lo >>> 8) & 0xff;
  out[8] = lo & 0xff;
  out.set(data, ENTRY_HEADER_BYTES);
  return out;
}

/** Decodes an entry value; `data` is a plain Uint8Array view into `value` (no copy, never a Buffer). */
export function decodeEntryValue(index: number, value: Uint8Array): Entry {
  if (value.byteLength < ENTRY_HEADER_BYTES) throw new Error(`entry ${index}: value of ${value.byteLength} bytes is truncated`);
  const typeByte = value[0];
  let type: EntryType;
  if (typeByte === TYPE_NORMAL) type = 'normal';
  else if (typeByte === TYPE_CONF) type = 'conf';
  else throw new Error(`entry ${index}: unknown entry type byte ${typeByte}`);
  const hi = ((value[1] << 24) | (value[2] << 16) | (value[3] << 8) | value[4]) >>> 0;
  const lo = ((value[5] << 24) | (value[6] << 16) | (value[7] << 8) | value[8]) >>> 0;
  const data = new Uint8Array(value.buffer, value.byteOffset + ENTRY_HEADER_BYTES, value.byteLength - ENTRY_HEADER_BYTES);
  return { index, term: hi * TWO_POW_32 + lo, type, data };
}

export function encodeHardState(hs: HardState): Uint8Array {
  const vote = hs.vote === null ? new Uint8Array(0) : textEncoder.encode(hs.vote);
  const out = new Uint8Array(17 + vote.byteLength);
  const view = new DataView(out.buffer);
  writeUint64(view, 0, hs.term);
  writeUint64(view, 8, hs.commit);
  out[16] = hs.vote === null ? 0 : 1;
  out.set(vote, 17);
  return out;
}

export function decodeHardState(value: Uint8Array): HardState {
  if (value.byteLength < 17) throw new Error(`hard state of ${value.byteLength} bytes is truncated`);
  const view = new DataView(value.buffer, value.byteOffset, value.byteLength);
  const vote = value[16] === 0 ? null : textDecoder.decode(value.subarray(17));
  return { term: readUint64(view, 0), commit: readUint64(view, 8), vote };
}

export function encodeSnapshotMeta(meta: SnapshotMeta): Uint8Array {
  const conf = textEncoder.encode(JSON.stringify({ voters: meta.conf.voters, learners: meta.conf.learners }));
  const out = new Uint8Array(16 + conf.byteLength);
  const view = new DataView(out.buffer);
  writeUint64(view, 0, meta.index);
  writeUint64(view, 8, meta.term);
  out.set(conf, 16);
  return out;
}

export function decodeSnapshotMeta(value: Uint8Array): SnapshotMeta {
  if (value.byteLength < 16) throw new Error(`snapshot meta of ${value.byteLength} bytes is truncated`);
  const view = new DataView(value.buffer, value.byteOffset, value.byteLength);
  const conf = JSON.parse(textDecoder.decode(value.subarray(16))) as ConfState;
  if (!Array.isArray(conf.voters) || !Array.isArray(conf.learners)) throw new Error('snapshot meta: malformed conf');
  return { index: readUint64(view, 0), term: readUint64(view, 8), conf: { voters: conf.voters, learners: conf.learners } };
}
