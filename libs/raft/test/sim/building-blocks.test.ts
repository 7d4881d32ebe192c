// Unit tests of the simulator's parts that do not need the core: PRNG, trace, network,
// crash storage, state machine, and the invariant checker on hand-made logs.

import { describe, expect, it } from 'vitest';
import { imageInMemory, type Entry, type Message } from '../../src/core/types';
import { CrashStorage } from './crash-storage';
import { SafetyChecker } from './invariants';
import { KvMachine, encodeCommand } from './kv-machine';
import { Network } from './network';
import { Prng } from './prng';
import { Trace } from './trace';

const bytes = (s: string) => new TextEncoder().encode(s);
const entry = (index: number, term: number, data = `e${index}t${term}`): Entry => ({
  index,
  term,
  type: 'normal',
  data: bytes(data),
});
const msg = (from: string, to: string, term = 1): Message => ({ type: 'Heartbeat', from, to, term, commit: 0 });

describe('Prng', () => {
  it('gives the same stream for the same seed and a different one for another seed', () => {
    const draw = (seed: number) => Array.from({ length: 50 }, ((r) => () => r.nextUint32())(new Prng(seed)));
    expect(draw(7)).toEqual(draw(7));
    expect(draw(7)).not.toEqual(draw(8));
  });

  it('stays in range and covers it roughly uniformly', () => {
    const r = new Prng(1);
    const counts = new Array(10).fill(0);
    let outOfRange = 0;
    for (let i = 0; i < 20_000; i++) {
      const f = r.float();
      if (f < 0 || f >= 1) outOfRange++;
      counts[r.int(10)]++;
    }
    expect(outOfRange).toBe(0);
    for (const c of counts) expect(c).toBeGreaterThan(1700);
    const ranged = new Set(Array.from({ length: 1000 }, () => r.range(3, 5)));
    expect([...ranged].sort()).toEqual([3, 4, 5]);
  });

  it('forks child streams that differ from the parent and from each other', () => {
    const r = new Prng(99);
    const a = r.fork();
    const b = r.fork();
    expect(a.nextUint32()).not.toBe(b.nextUint32());
  });
});

describe('Trace', () => {
  it('hashes equal event logs equally and keeps only the tail in memory', () => {
    const make = (last: string) => {
      const t = new Trace(3);
      for (let i = 0; i < 10; i++) t.record(i, `event ${i}`);
      t.record(10, last);
      return t;
    };
    const a = make('end');
    expect(a.lastLines()).toEqual(['8 event 8', '9 event 9', '10 end']);
    expect(a.finish()).toBe(make('end').finish());
    expect(a.finish()).not.toBe(make('End').finish());
  });
});

describe('Network', () => {
  it('delivers every message exactly once when calm, in send order when delays are equal', () => {
    const net = new Network(new Prng(1), { dropRate: 0, duplicateRate: 0, minDelay: 2, maxDelay: 2 }, new Trace());
    net.send(0, msg('a', 'b', 1));
    net.send(0, msg('a', 'b', 2));
    expect(net.takeDue(1)).toEqual([]);
    expect(net.takeDue(2).map((m) => m.term)).toEqual([1, 2]);
    expect(net.takeDue(10)).toEqual([]);
  });

  it('reorders, duplicates and drops messages at the configured rates', () => {
    const net = new Network(new Prng(5), { dropRate: 0.2, duplicateRate: 0.2, minDelay: 0, maxDelay: 5 }, new Trace());
    for (let i = 0; i < 1000; i++) net.send(0, msg('a', 'b', i));
    const got = net.takeDue(100).map((m) => m.term);
    const distinct = new Set(got);
    expect(distinct.size).toBeGreaterThan(700);
    expect(distinct.size).toBeLessThan(900);
    expect(got.length - distinct.size).toBeGreaterThan(100); // duplicates
    expect(got.some((t, i) => i > 0 && t < got[i - 1])).toBe(true); // reordering
  });

  it('copies messages so the sender cannot change what is in flight', () => {
    const net = new Network(new Prng(1), { dropRate: 0, duplicateRate: 0, minDelay: 0, maxDelay: 0 }, new Trace());
    const m: Message = { ...msg('a', 'b'), entries: [entry(1, 1)] };
    net.send(0, m);
    m.entries![0].term = 9;
    expect(net.takeDue(0)[0].entries![0].term).toBe(1);
  });

  it('cuts links symmetrically with partition and one way with blockOneWay, until heal', () => {
    const net = new Network(new Prng(1), { dropRate: 0, duplicateRate: 0, minDelay: 0, maxDelay: 0 }, new Trace());
    net.partition([['a'], ['b', 'c']]);
    net.blockOneWay('b', 'c');
    for (const [f, t] of [['a', 'b'], ['b', 'a'], ['b', 'c'], ['c', 'b'], ['c', 'a']]) net.send(0, msg(f, t));
    expect(net.takeDue(0).map((m) => `${m.from}${m.to}`)).toEqual(['cb']);
    net.heal();
    net.send(1, msg('a', 'b'));
    expect(net.takeDue(1)).toHaveLength(1);
  });
});

describe('CrashStorage', () => {
  it('shows written entries to the core at once but keeps only synced ones across a crash', () => {
    const s = new CrashStorage(['a', 'b', 'c']);
    s.write({ entries: [entry(1, 1), entry(2, 1)], hardState: { term: 1, vote: 'a', commit: 0 } });
    s.sync();
    s.write({ hardState: { term: 1, vote: 'a', commit: 2 } });
    s.write({ entries: [entry(3, 1)], hardState: { term: 1, vote: 'a', commit: 2 } });
    expect(s.lastIndex()).toBe(3);
    const lost = s.crash(0);
    expect(lost.lost).toBe(2);
    expect(s.lastIndex()).toBe(2);
    expect(s.initialState().hardState).toEqual({ term: 1, vote: 'a', commit: 0 });
    expect(s.initialState().confState.voters).toEqual(['a', 'b', 'c']);
  });

  it('may keep a prefix of the unsynced writes (a torn tail), never a later write without an earlier one', () => {
    for (let keep = 0; keep <= 3; keep++) {
      const s = new CrashStorage(['a']);
      s.write({ entries: [entry(1, 1)] });
      s.write({ entries: [entry(2, 1)] });
      s.write({ entries: [entry(3, 1)] });
      expect(s.crash(keep).lost).toBe(3 - keep);
      expect(s.lastIndex()).toBe(keep);
    }
    expect(() => new CrashStorage(['a']).crash(1)).toThrow(RangeError);
  });

  it('keeps a compaction snapshot and the entries after it across a crash', () => {
    const s = new CrashStorage(['a']);
    s.write({ entries: [entry(1, 1), entry(2, 1), entry(3, 2)], hardState: { term: 2, vote: 'a', commit: 3 } });
    s.compact(2, { voters: ['a'], learners: [] }, bytes('image'));
    s.crash(0);
    expect(s.firstIndex()).toBe(3);
    expect(s.term(2)).toBe(1);
    expect(s.entries(3, 4)[0].term).toBe(2);
    expect(new TextDecoder().decode(imageInMemory(s.snapshot().data))).toBe('image');
  });
});

describe('KvMachine', () => {
  const cmd = (index: number, seq: number, op: 'put' | 'append', value: string): Entry => ({
    index,
    term: 1,
    type: 'normal',
    data: encodeCommand({ clientId: 1, seq, op, key: 'k', value }),
  });

  it('applies puts and appends once each even when a command is retried', () => {
    const m = new KvMachine();
    m.apply({ index: 1, term: 1, type: 'normal', data: new Uint8Array() });
    expect(m.apply(cmd(2, 1, 'put', 'x'))?.result).toBe('x');
    expect(m.apply(cmd(3, 2, 'append', 'y'))?.result).toBe('xy');
    expect(m.apply(cmd(4, 2, 'append', 'y'))).toMatchObject({ duplicate: true, result: 'xy' });
    expect(m.get('k')).toBe('xy');
    expect(() => m.apply(cmd(6, 3, 'put', 'z'))).toThrow(/applied 4/);
  });

  it('restores the same state from its snapshot image', () => {
    const m = new KvMachine();
    m.apply(cmd(1, 1, 'put', 'a'));
    const r = KvMachine.restore(m.snapshot(), 1);
    expect(r.get('k')).toBe('a');
    expect(r.apply(cmd(2, 1, 'put', 'b'))?.duplicate).toBe(true);
  });
});

describe('SafetyChecker on hand-made histories', () => {
  const view = (log: Entry[]) => ({ termAt: (i: number) => log.find((e) => e.index === i)?.term });
  const termOf = (log: Entry[]) => (i: number) => (i === 0 ? 0 : log.find((e) => e.index === i)?.term);

  it('accepts a correct history', () => {
    const c = new SafetyChecker();
    const log = [entry(1, 1), entry(2, 1), entry(3, 2)];
    c.observeRole('a', 1, true, view(log.slice(0, 2)));
    c.observeDurableEntries('a', log, termOf(log));
    c.observeDurableEntries('b', log.slice(0, 2), termOf(log));
    for (const e of log.slice(0, 2)) c.observeApplied('a', e, 1);
    c.observeRole('b', 2, true, view(log));
    c.observeApplied('b', log[2], 2);
    c.checkLogsPairwise(new Map([['a', { first: 1, entries: log }], ['b', { first: 1, entries: log.slice(0, 2) }]]));
    expect(c.violations).toEqual([]);
  });

  it('flags two leaders in one term', () => {
    const c = new SafetyChecker();
    c.observeRole('a', 3, true, view([]));
    c.observeRole('a', 3, false, view([]));
    c.observeRole('b', 3, true, view([]));
    expect(c.violations.map((v) => v.invariant)).toEqual(['election safety']);
  });

  it('flags the same index and term with different content, or a different prefix', () => {
    const c = new SafetyChecker();
    c.observeDurableEntries('a', [entry(1, 1)], () => 0);
    c.observeDurableEntries('b', [entry(1, 1, 'other')], () => 0);
    c.observeDurableEntries('a', [entry(5, 3)], () => 2);
    c.observeDurableEntries('b', [entry(5, 3)], () => 1);
    expect(c.violations.map((v) => v.invariant)).toEqual(['log matching', 'log matching']);
  });

  it('flags diverging durable logs in the pairwise comparison', () => {
    const c = new SafetyChecker();
    const a = [entry(1, 1), entry(2, 1), entry(3, 3)];
    const b = [entry(1, 1), entry(2, 2), entry(3, 3)];
    c.checkLogsPairwise(new Map([['a', { first: 1, entries: a }], ['b', { first: 1, entries: b }]]));
    expect(c.violations[0]).toMatchObject({ invariant: 'log matching' });
  });

  it('flags a leader of a later term that lacks a committed entry, whichever is seen first', () => {
    const c = new SafetyChecker();
    c.observeApplied('a', entry(1, 1), 1);
    c.observeRole('b', 2, true, view([]));
    const d = new SafetyChecker();
    d.observeRole('b', 2, true, view([]));
    d.observeApplied('a', entry(1, 1), 1);
    expect(c.violations.map((v) => v.invariant)).toEqual(['leader completeness']);
    expect(d.violations.map((v) => v.invariant)).toEqual(['leader completeness']);
  });

  it('does not require a stale leader of an earlier term to hold a later commit', () => {
    const c = new SafetyChecker();
    c.observeApplied('a', entry(1, 4), 4);
    c.observeRole('b', 3, true, view([]));
    expect(c.violations).toEqual([]);
  });

  it('flags a leader that moves its commit index onto an entry of an older term (figure 8)', () => {
    const c = new SafetyChecker();
    const log = [entry(1, 1), entry(2, 1), entry(3, 3)];
    c.observeLeaderCommit('a', 3, 0, 3, view(log)); // onto its own term: fine
    c.observeLeaderCommit('a', 3, 0, 2, view(log)); // onto a term-1 entry: the bug
    expect(c.violations.map((v) => v.invariant)).toEqual(['leader commit rule']);
  });

  it('flags two nodes applying different entries at one index', () => {
    const c = new SafetyChecker();
    c.observeApplied('a', entry(1, 1), 1);
    c.observeApplied('b', entry(1, 2), 2);
    expect(c.violations.map((v) => v.invariant)).toEqual(['state machine safety']);
  });
});
