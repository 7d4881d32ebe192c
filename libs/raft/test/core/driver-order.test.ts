// The driver's order for one Ready (planReady), shared by node.ts and the simulator.

import { describe, expect, it } from 'vitest';
import { planReady } from '../../src/core/driver-order';
import type { Entry, HardState, Message, MessageType, Ready } from '../../src/core/types';

const entry = (index: number, term = 1): Entry => ({ index, term, type: 'normal', data: new Uint8Array([index]) });
const msg = (type: MessageType): Message => ({ type, from: 'a', to: 'b', term: 1 });
const ready = (over: Partial<Ready>): Ready => ({ entries: [], committedEntries: [], messages: [], readStates: [], mustSync: false, ...over });

describe('planReady: what may happen before the write is durable', () => {
  it("sends only a leader's App and Heartbeat before the write; votes, acks and the rest wait for it", () => {
    const all: MessageType[] = ['App', 'Heartbeat', 'AppResp', 'HeartbeatResp', 'Vote', 'VoteResp', 'PreVote', 'PreVoteResp', 'Snap', 'TimeoutNow', 'ReadIndex', 'ReadIndexResp'];
    const plan = planReady(ready({ messages: all.map(msg), mustSync: true, hardState: { term: 1, vote: 'a', commit: 0 } }), undefined);
    expect(plan.sendBeforeWrite.map((m) => m.type)).toEqual(['App', 'Heartbeat']);
    expect(plan.sendAfterWrite.map((m) => m.type)).toEqual(all.filter((t) => t !== 'App' && t !== 'Heartbeat'));
  });

  it('writes (synced) exactly when the Ready must be synced, with its entries, snapshot and hard state', () => {
    const hs: HardState = { term: 2, vote: 'a', commit: 1 };
    const plan = planReady(ready({ entries: [entry(2)], hardState: hs, mustSync: true }), undefined);
    expect(plan.write).toEqual({ hardState: hs, entries: [entry(2)], snapshot: undefined });
    expect(planReady(ready({ messages: [msg('Heartbeat')] }), undefined).write).toBeUndefined();
  });

  it('does not write a commit-only hard state on its own: the next synced write carries it', () => {
    const commitOnly: HardState = { term: 1, vote: 'a', commit: 5 };
    const first = planReady(ready({ hardState: commitOnly }), undefined);
    expect(first.write).toBeUndefined();
    expect(first.unwrittenHardState).toEqual(commitOnly);

    const next = planReady(ready({ entries: [entry(6)], mustSync: true }), first.unwrittenHardState);
    expect(next.write?.hardState).toEqual(commitOnly);
    expect(next.unwrittenHardState).toBeUndefined();

    // A newer hard state in the synced Ready wins over the carried one.
    const newer: HardState = { term: 2, vote: null, commit: 5 };
    expect(planReady(ready({ hardState: newer, mustSync: true }), commitOnly).write?.hardState).toEqual(newer);
  });

  it('applies committed entries during the write only when an earlier Ready wrote them', () => {
    const during = (r: Partial<Ready>) => planReady(ready({ mustSync: true, ...r }), undefined).applyDuringWrite;
    expect(during({ committedEntries: [entry(3), entry(4)], entries: [entry(5)] })).toBe(true);
    expect(during({ committedEntries: [entry(3)] })).toBe(true);
    // A one-member group commits its own new entry in the same Ready: wait for the write.
    expect(during({ committedEntries: [entry(4), entry(5)], entries: [entry(5)] })).toBe(false);
    // A snapshot is restored after the write, and the entries after it.
    const snapshot = { meta: { index: 9, term: 1, conf: { voters: ['a'], learners: [] } }, data: new Uint8Array() };
    expect(during({ committedEntries: [entry(10)], snapshot })).toBe(false);
  });
});
