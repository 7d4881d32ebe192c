// The simulator drives the production driver's order (src/core/driver-order.ts, the plan
// node.ts follows), with a write that stays in flight: a leader's appends leave before
// its own write is durable and may be lost with it; votes and acks wait for the write.

import { describe, expect, it } from 'vitest';
import type { PersistUpdate } from '../../src/core/storage';
import type { Message } from '../../src/core/types';
import { RawNode } from '../../src/core/raw-node';
import { Prng } from './prng';
import { formatSummary, runSeeds } from './seed-runner';
import { SimNode, type NodeObserver, type NodeTuning } from './sim-node';

/** Every write stays in flight for exactly `ticks` ticks. */
class FixedDisk extends Prng {
  constructor(private readonly ticks: number) {
    super(1);
  }
  override int(n: number): number {
    return Math.min(this.ticks, n - 1);
  }
}

const tuning: NodeTuning = {
  electionTick: 10,
  heartbeatTick: 1,
  maxSizePerMsg: 1024 * 1024,
  maxInflightMsgs: 64,
  compactEvery: 1000,
  preVote: false,
  checkQuorum: false,
  lazyCommitBroadcast: true,
  maxWriteTicks: 1,
};

/** One node of n1..n3 whose sends are recorded with the last index its disk held durably at that moment. */
function node(id: string) {
  const sent: { m: Message; durableLast: number }[] = [];
  let self: SimNode | undefined;
  const observer: NodeObserver = {
    send: (_from, m) => sent.push({ m, durableLast: self!.storage.durableLastIndex() }),
    durable: (_node: string, _update: PersistUpdate) => {},
    applied: () => {},
    readState: () => {},
    crashedAtSync: () => {},
    leaderCommitted: () => {},
  };
  self = new SimNode(id, ['n1', 'n2', 'n3'], RawNode, tuning, new Prng(7), observer, new FixedDisk(1));
  return { n: self, sent };
}

describe('the simulated node follows the production driver order', () => {
  it("sends a leader's App before its write is durable, and a crash in that window loses the entry it sent", () => {
    const { n, sent } = node('n1');
    n.act((core) => core.campaign());
    expect(sent, 'the vote requests wait for the term and vote to be durable').toEqual([]);
    n.diskTick();
    expect(sent.map((s) => s.m.type)).toEqual(['Vote', 'Vote']);
    expect(n.storage.unsyncedWrites).toBe(0);

    n.step({ type: 'VoteResp', from: 'n2', to: 'n1', term: 1 });
    expect(n.role).toBe('leader');
    const apps = sent.filter((s) => s.m.type === 'App');
    expect(apps).toHaveLength(2);
    const noop = apps[0].m.entries![0];
    expect(apps.every((s) => s.durableLast < noop.index), 'the Apps left before the no-op was durable').toBe(true);
    expect(n.storage.unsyncedWrites, 'the no-op is still being written').toBe(1);

    n.crash(0);
    expect(n.storage.durableLastIndex()).toBeLessThan(noop.index);
    expect(n.orderStats.crashesInWindow).toBe(1);
  });

  it("holds a follower's ack until its write is durable, while the core keeps stepping", () => {
    const { n, sent } = node('n2');
    const e = { index: 1, term: 1, type: 'normal' as const, data: new Uint8Array([1]) };
    n.step({ type: 'App', from: 'n1', to: 'n2', term: 1, index: 0, logTerm: 0, commit: 0, entries: [e] });
    expect(sent, 'no ack before the fsync').toEqual([]);
    n.step({ type: 'Heartbeat', from: 'n1', to: 'n2', term: 1, commit: 0 });
    expect(sent, 'stepped during the write; it answers in the next Ready').toEqual([]);
    expect(n.orderStats.steppedDuringWrite).toBe(1);

    n.diskTick();
    expect(sent[0]).toMatchObject({ m: { type: 'AppResp', index: 1 }, durableLast: 1 });
  });

  it('covers the window in seeded runs: early sends, applies during a write, steps during a write, crashes inside it', () => {
    const summary = runSeeds({ RawNode, firstSeed: 1, count: 6, nodes: 3, ticks: 1000 });
    console.log(formatSummary('production order, seeds 1..6', summary));
    expect(summary.failures).toHaveLength(0);
    const o = summary.order;
    expect(o.sentBeforeDurable).toBeGreaterThan(0);
    expect(o.appliedDuringWrite).toBeGreaterThan(0);
    expect(o.steppedDuringWrite).toBeGreaterThan(0);
    expect(o.crashesInWindow).toBeGreaterThan(0);
  });
});
