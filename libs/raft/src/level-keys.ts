// The key space of one LevelDB database holding a Raft node's log and its state machine.
//
// Every key starts with a one-byte tag, so each kind lives in its own contiguous range
// and can be scanned or range-deleted alone. Log entry keys carry the index as a fixed
// 8-byte big-endian integer, so LevelDB's bytewise order is index order.

const TAG_HARD_STATE = 0x68; // 'h'
const TAG_SNAPSHOT_META = 0x73; // 's'
const TAG_SNAPSHOT_DATA = 0x64; // 'd'
const TAG_ENTRY = 0x65; // 'e'
const TAG_APPLIED_INDEX = 0x61; // 'a'
const TAG_STATE_MACHINE = 0x6d; // 'm'

const TWO_POW_32 = 0x1_0000_0000;
const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder('utf-8', { fatal: true });

export const hardStateKey = Uint8Array.of(TAG_HARD_STATE);
export const snapshotMetaKey = Uint8Array.of(TAG_SNAPSHOT_META);
export const snapshotDataKey = Uint8Array.of(TAG_SNAPSHOT_DATA);
export const appliedIndexKey = Uint8Array.of(TAG_APPLIED_INDEX);

/** Writes a non-negative safe integer as 8 big-endian bytes at `offset`. */
export function writeUint64(view: DataView, offset: number, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`not a uint64-safe integer: ${value}`);
  view.setUint32(offset, Math.floor(value / TWO_POW_32));
  view.setUint32(offset + 4, value >>> 0);
}

export function readUint64(view: DataView, offset: number): number {
  return view.getUint32(offset) * TWO_POW_32 + view.getUint32(offset + 4);
}

export function entryKey(index: number): Uint8Array {
  const key = new Uint8Array(9);
  key[0] = TAG_ENTRY;
  writeUint64(new DataView(key.buffer), 1, index);
  return key;
}

export function entryIndexOfKey(key: Uint8Array): number {
  if (key.byteLength !== 9 || key[0] !== TAG_ENTRY) throw new Error('not a log entry key');
  return readUint64(new DataView(key.buffer, key.byteOffset, key.byteLength), 1);
}

/** Bounds covering every log entry key, for scans of the whole log. */
export const entryKeyRange = { gte: Uint8Array.of(TAG_ENTRY), lt: Uint8Array.of(TAG_ENTRY + 1) };

export function stateMachineKey(key: string): Uint8Array {
  const encoded = textEncoder.encode(key);
  const out = new Uint8Array(encoded.byteLength + 1);
  out[0] = TAG_STATE_MACHINE;
  out.set(encoded, 1);
  return out;
}

export function stateMachineKeyName(key: Uint8Array): string {
  if (key[0] !== TAG_STATE_MACHINE) throw new Error('not a state machine key');
  return textDecoder.decode(key.subarray(1));
}

/**
 * Bounds covering every state machine key starting with `prefix`. 0xFF never occurs
 * in UTF-8, so `prefix + 0xFF` sorts after every key that has the prefix.
 */
export function stateMachineKeyRange(prefix = ''): { gte: Uint8Array; lt: Uint8Array } {
  const gte = stateMachineKey(prefix);
  const lt = new Uint8Array(gte.byteLength + 1);
  lt.set(gte);
  lt[gte.byteLength] = 0xff;
  return { gte, lt };
}
