import { describe, expect, it } from 'vitest';
import {
  decodeEntryValue,
  decodeHardState,
  decodeSnapshotMeta,
  encodeEntryValue,
  encodeHardState,
  encodeSnapshotMeta,
} from '../../src/codec/entry-codec';
import { entryIndexOfKey, entryKey } from '../../src/level-keys';
import type { Entry } from '../../src/core/types';

/** Bytewise comparison, LevelDB's default order. */
function compareBytes(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

describe('entry keys', () => {
  it('sort bytewise in index order, across byte boundaries', () => {
    const indices = [0, 1, 255, 256, 65_535, 65_536, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 40 + 3, Number.MAX_SAFE_INTEGER];
    const shuffled = [...indices].reverse().map(entryKey);
    expect(shuffled.sort(compareBytes).map(entryIndexOfKey)).toEqual(indices);
  });

  it('reject indices that are not non-negative safe integers', () => {
    expect(() => entryKey(-1)).toThrow(RangeError);
    expect(() => entryKey(1.5)).toThrow(RangeError);
    expect(() => entryKey(2 ** 53)).toThrow(RangeError);
  });
});

describe('entry values', () => {
  it('round-trip term, type and data, with a 9-byte header', () => {
    const cases: Entry[] = [
      { index: 1, term: 0, type: 'normal', data: new Uint8Array() },
      { index: 7, term: 2 ** 40 + 5, type: 'conf', data: Uint8Array.of(1, 2, 3) },
      { index: 9, term: Number.MAX_SAFE_INTEGER, type: 'normal', data: new Uint8Array(3000).fill(0xab) },
    ];
    for (const entry of cases) {
      const value = encodeEntryValue(entry);
      expect(value.byteLength).toBe(9 + entry.data.byteLength);
      const decoded = decodeEntryValue(entry.index, value);
      expect(decoded).toEqual(entry);
      expect(decoded.data.constructor).toBe(Uint8Array);
    }
  });

  it('reject a truncated value and an unknown type byte', () => {
    expect(() => decodeEntryValue(3, new Uint8Array(8))).toThrow(/truncated/);
    const value = encodeEntryValue({ index: 3, term: 1, type: 'normal', data: new Uint8Array() });
    value[0] = 9;
    expect(() => decodeEntryValue(3, value)).toThrow(/unknown entry type/);
  });
});

describe('hard state, snapshot meta and index values', () => {
  it('round-trip', () => {
    for (const hs of [
      { term: 0, vote: null, commit: 0 },
      { term: 2 ** 45, vote: '127.0.1.1:7001', commit: 2 ** 33 },
      { term: 3, vote: '', commit: 1 },
    ]) {
      expect(decodeHardState(encodeHardState(hs))).toEqual(hs);
    }
    const meta = { index: 2 ** 35, term: 12, conf: { voters: ['a', 'b'], learners: ['c'] } };
    expect(decodeSnapshotMeta(encodeSnapshotMeta(meta))).toEqual(meta);
  });
});
