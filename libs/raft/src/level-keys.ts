// The key space of one LevelDB database holding a Raft node's hard state, snapshot and log.
//
// Every key starts with a one-byte tag, so each kind lives in its own contiguous range
// and can be scanned or range-deleted alone. Log entry keys carry the index as a fixed
// 8-byte big-endian integer, so LevelDB's bytewise order is index order.

const TAG_HARD_STATE = 0x68; // 'h'
const TAG_SNAPSHOT_META = 0x73; // 's'
const TAG_SNAPSHOT_DATA = 0x64; // 'd': the image itself, as older directories kept it
const TAG_SNAPSHOT_FILE = 0x66; // 'f': the name of the file holding the image (snapshot-files.ts)
const TAG_ENTRY = 0x65; // 'e'
// 0x61 'a' and 0x6d 'm' held a state machine store that is gone (nothing used it); older
// directories may still hold such keys, never read. Do not reuse the two tags.

const TWO_POW_32 = 0x1_0000_0000;

export const hardStateKey = Uint8Array.of(TAG_HARD_STATE);
export const snapshotMetaKey = Uint8Array.of(TAG_SNAPSHOT_META);
export const snapshotDataKey = Uint8Array.of(TAG_SNAPSHOT_DATA);
export const snapshotFileKey = Uint8Array.of(TAG_SNAPSHOT_FILE);

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
