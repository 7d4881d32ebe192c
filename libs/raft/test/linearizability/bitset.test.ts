import { describe, expect, it } from 'vitest';
import { Bitset } from './bitset';

describe('Bitset', () => {
  it('gives the same hash and snapshot for the same members, whatever the order of changes', () => {
    const a = new Bitset(100);
    const b = new Bitset(100);
    for (let i = 0; i < 70; i++) a.add(i);
    a.add(90);
    for (const i of [90, 5, 69, 3]) b.add(i);
    for (let i = 0; i < 70; i++) if (!b.has(i)) b.add(i);
    b.add(95);
    b.remove(95);
    expect(b.hash).toBe(a.hash);
    expect(b.snapshot()).toEqual(a.snapshot());
    expect(a.matches(b.snapshot())).toBe(true);
    expect(a.snapshot().length).toBeLessThan(4); // the two full words are not copied
  });

  it('tells apart sets that differ in one member, below or above the full prefix', () => {
    const full = new Bitset(64);
    for (let i = 0; i < 64; i++) full.add(i);
    const snapshot = full.snapshot();
    full.remove(3);
    expect(full.matches(snapshot)).toBe(false);
    full.add(3);
    expect(full.matches(snapshot)).toBe(true);
    const empty = new Bitset(64);
    expect(empty.matches(new Bitset(64).snapshot())).toBe(true);
    empty.add(63);
    expect(empty.matches(new Bitset(64).snapshot())).toBe(false);
  });
});
