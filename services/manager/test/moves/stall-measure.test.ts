// bench/move's write stall of a cut-over: the longest gap between consecutive acknowledged
// writes that overlaps the cut-over's span. It used to be the longest gap anywhere in the
// whole move, which blamed the cut-over for gaps during the copy and the verify.

import { describe, expect, it } from 'vitest';
import { stallAcross } from '../../../../test/cluster/move-load';

describe('the write stall across a cut-over', () => {
  // Acks every 10 ms, a 300 ms gap during the copy (at 100), a 70 ms gap across the cut-over (at 1000-1070).
  const acks = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 400, 410, 420, 980, 990, 1000, 1070, 1080, 1090];

  it('is the gap that overlaps the cut-over, not a longer one elsewhere in the move', () => {
    expect(stallAcross(acks, 1010, 1050)).toBe(70);
  });

  it('counts a gap that begins before the span and ends after it', () => {
    expect(stallAcross(acks, 1020, 1030)).toBe(70);
  });

  it('takes the longest of the gaps a span covers', () => {
    expect(stallAcross(acks, 95, 1075)).toBe(560);
  });

  it('is the normal gap when the span falls between two ordinary acks', () => {
    expect(stallAcross(acks, 32, 38)).toBe(10);
  });
});
