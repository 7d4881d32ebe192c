// Majority arithmetic over the voters of one configuration (learners never count).

import type { NodeId } from './types';

export type VoteResult = 'won' | 'lost' | 'pending';

export function majority(voterCount: number): number {
  return Math.floor(voterCount / 2) + 1;
}

/**
 * The highest index acknowledged by a majority of `voters`: sort the acknowledged
 * indexes descending and take the majority-th. `scratch` is reused to avoid allocating
 * on every AppResp.
 */
export function committedIndex(voters: readonly NodeId[], acked: (id: NodeId) => number, scratch: number[]): number {
  const n = voters.length;
  if (n === 0) return 0;
  scratch.length = n;
  for (let i = 0; i < n; i++) scratch[i] = acked(voters[i]);
  // Insertion sort: groups are small (3 to 7 voters), so this beats Array.prototype.sort.
  for (let i = 1; i < n; i++) {
    const v = scratch[i];
    let j = i - 1;
    while (j >= 0 && scratch[j] < v) {
      scratch[j + 1] = scratch[j];
      j--;
    }
    scratch[j + 1] = v;
  }
  return scratch[majority(n) - 1];
}

/** The outcome of an election given the votes received so far (true = granted). */
export function voteResult(voters: readonly NodeId[], votes: ReadonlyMap<NodeId, boolean>): VoteResult {
  if (voters.length === 0) return 'won';
  let granted = 0;
  let rejected = 0;
  for (const id of voters) {
    const v = votes.get(id);
    if (v === true) granted++;
    else if (v === false) rejected++;
  }
  const need = majority(voters.length);
  if (granted >= need) return 'won';
  if (voters.length - rejected < need) return 'lost';
  return 'pending';
}

/** Whether a majority of `voters` satisfy `ok`. */
export function hasQuorum(voters: readonly NodeId[], ok: (id: NodeId) => boolean): boolean {
  let n = 0;
  for (const id of voters) if (ok(id)) n++;
  return n >= majority(voters.length);
}
