import { describe, expect, it } from 'vitest';
import { gtidCovers, gtidProgress, gtidsBeyond, parseGtidPos } from '../src/gtid';

describe('GTID positions', () => {
  it('a position covers another when it is at least as far in every domain', () => {
    expect(gtidCovers('0-1-10,1-2-5', '0-1-10')).toBe(true);
    expect(gtidCovers('0-1-10', '0-1-10,1-2-5')).toBe(false);
    expect(gtidCovers('0-2-11', '0-1-10')).toBe(true);
    expect(gtidCovers('', '')).toBe(true);
    expect(gtidProgress('0-1-10,1-2-5')).toBe(15);
  });

  it('names the transactions an old master has beyond the position its successor was promoted at', () => {
    expect(gtidsBeyond('0-1-105', '0-1-103')).toEqual(['0-1-104..105']);
    expect(gtidsBeyond('0-1-104', '0-1-103')).toEqual(['0-1-104']);
    expect(gtidsBeyond('0-1-103', '0-1-103')).toEqual([]);
    expect(gtidsBeyond('0-1-100,2-1-3', '0-1-103')).toEqual(['2-1-1..3']);
  });

  it('refuses text that is not a position', () => {
    expect(() => parseGtidPos('0-1-x')).toThrow(/not a GTID/);
  });
});
