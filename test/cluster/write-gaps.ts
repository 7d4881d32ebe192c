// How long writes failed around an event, read off an insert load's acknowledged inserts
// (ha-fixture.ts InsertLoad): used by the manual_switch test and bench/failover.

import type { InsertLoad } from './ha-fixture';

/**
 * The longest time (ms) between two acknowledged inserts in [from, to], with 500 ms either
 * side (inserts are acknowledged every few ms while writes work; a wider margin reached back
 * into the previous switch of a bench run).
 */
export function longestGap(load: InsertLoad, from: number, to: number): number {
  const acks = load.acked.filter((a) => a.at >= from - 500 && a.at <= to + 500).map((a) => a.at);
  let gap = 0;
  for (let i = 1; i < acks.length; i++) gap = Math.max(gap, acks[i] - acks[i - 1]);
  return gap;
}
