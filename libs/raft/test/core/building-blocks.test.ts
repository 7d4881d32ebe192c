// The core's parts on their own: the flow-control window, quorum arithmetic, the log
// with its unstable tail, and the Ready/advance bookkeeping of RawNode.

import { describe, expect, it } from 'vitest';
import { Inflights } from '../../src/core/inflights';
import { RaftLog } from '../../src/core/log';
import { committedIndex, voteResult } from '../../src/core/quorum';
import { RawNode } from '../../src/core/raw-node';
import { MemoryStorage } from '../../src/core/storage';
import type { Entry } from '../../src/core/types';
import { Network, seededRandom } from './harness';

const ent = (index: number, term: number): Entry => ({ index, term, type: 'normal', data: new Uint8Array(0) });

describe('Inflights', () => {
  it('is full at the message count or the byte limit, and frees acknowledged messages in order. Reference: etcd tracker/inflights.go', () => {
    const w = new Inflights(3, 1000);
    w.add(1, 100);
    w.add(2, 100);
    expect(w.full()).toBe(false);
    w.add(5, 100);
    expect(w.full()).toBe(true);
    w.freeLE(2);
    expect([w.count, w.bytes, w.full()]).toEqual([1, 100, false]);
    w.add(7, 950);
    expect(w.full()).toBe(true); // bytes
    w.freeLE(100);
    expect([w.count, w.bytes]).toEqual([0, 0]);
    for (let i = 10; i < 13; i++) w.add(i, 1); // wraps around the ring
    w.freeLE(11);
    expect(w.count).toBe(1);
  });
});

describe('quorum', () => {
  it('the committed index is the highest index a majority acknowledged. Reference: Raft paper section 5.3', () => {
    const acked: Record<string, number> = { a: 9, b: 4, c: 7, d: 1, e: 7 };
    expect(committedIndex(['a', 'b', 'c', 'd', 'e'], (id) => acked[id], [])).toBe(7);
    expect(committedIndex(['a', 'b'], (id) => acked[id], [])).toBe(4);
    expect(committedIndex(['a'], (id) => acked[id], [])).toBe(9);
  });

  it('an election is won by a majority of grants and lost once a majority is out of reach. Reference: Raft paper section 5.2', () => {
    const v = (entries: [string, boolean][]) => voteResult(['a', 'b', 'c', 'd'], new Map(entries));
    expect(v([['a', true], ['b', true]])).toBe('pending');
    expect(v([['a', true], ['b', true], ['c', true]])).toBe('won');
    expect(v([['a', true], ['b', false], ['c', false]])).toBe('lost');
  });
});

describe('RaftLog', () => {
  function logWith(terms: number[]): RaftLog {
    const s = MemoryStorage.bootstrap(['a']);
    s.persistNow({ entries: terms.map((t, i) => ent(i + 1, t)) });
    return new RaftLog(s, 0);
  }

  it('reads across stable storage and the unstable tail, and a conflicting suffix is replaced. Reference: Raft paper section 5.3', () => {
    const log = logWith([1, 1, 2]);
    log.append([ent(4, 2), ent(5, 2)]);
    expect(log.slice(2, 6, Infinity).map((e) => e.index)).toEqual([2, 3, 4, 5]);
    expect(log.maybeAppend(3, 2, 0, [ent(4, 3)])).toBe(4);
    expect([log.lastIndex(), log.term(4)]).toEqual([4, 3]);
    expect(log.maybeAppend(3, 9, 0, [ent(4, 9)])).toBeUndefined(); // prev term mismatch
  });

  it('findConflictByTerm skips every entry of a higher term at once. Reference: etcd log.go findConflictByTerm', () => {
    const log = logWith([1, 1, 2, 2, 2, 5, 5]);
    expect(log.findConflictByTerm(7, 3)).toEqual({ index: 5, term: 2 });
    expect(log.findConflictByTerm(7, 1)).toEqual({ index: 2, term: 1 });
    expect(log.findConflictByTerm(7, 9)).toEqual({ index: 7, term: 5 });
  });

  it('entries persisted while a newer leader replaced them are not marked stable. Reference: etcd log_unstable.go stableTo', () => {
    const log = logWith([1]);
    log.append([ent(2, 1), ent(3, 1)]);
    log.unstable.acceptInProgress(); // handed out in a Ready
    log.maybeAppend(1, 1, 0, [ent(2, 2)]); // truncated before the write came back
    log.unstable.stableTo(3, 1);
    expect(log.unstable.nextEntries().map((e) => `${e.index}@${e.term}`)).toEqual(['2@2']);
  });
});

describe('Ready bookkeeping', () => {
  it('nothing is handed out twice, and entries appended during an outstanding Ready come in the next. Reference: etcd rawnode.go acceptReady', () => {
    const n = new RawNode({ id: 'a', electionTick: 10, heartbeatTick: 1, random: seededRandom(1) }, MemoryStorage.bootstrap(['a']));
    n.campaign();
    const rd1 = n.ready();
    n.propose(new Uint8Array([1]));
    const rd2 = n.ready();
    expect(rd1.entries.map((e) => e.index)).toEqual([1]);
    expect(rd2.entries.map((e) => e.index)).toEqual([2]);
    expect(rd2.committedEntries.map((e) => e.index)).toEqual([2]);
    n.advance(rd1);
    n.advance(rd2);
    expect(n.hasReady()).toBe(false);
    expect(n.status()).toMatchObject({ applied: 2, commit: 2 });
  });

  it('a Ready that only moves the commit index needs no sync. Reference: etcd node.go MustSync', () => {
    const net = new Network(['a', 'b', 'c']);
    net.elect('a');
    net.propose('a', 'x');
    net.stabilize();
    let prev = { term: 0, vote: null as string | null };
    let commitOnly = 0;
    for (const rd of net.node('b').readies) {
      if (rd.entries.length === 0 && !rd.snapshot && rd.hardState && rd.hardState.term === prev.term && rd.hardState.vote === prev.vote) {
        expect(rd.mustSync).toBe(false);
        commitOnly++;
      }
      if (rd.hardState) prev = rd.hardState;
    }
    expect(commitOnly).toBeGreaterThan(0);
  });

  it('a restart rebuilds membership from the snapshot conf plus applied conf entries. Reference: Raft thesis 4.1', () => {
    const net = new Network(['a', 'b', 'c']);
    net.elect('a');
    net.addNode('d', MemoryStorage.bootstrap([]));
    net.raw('a').proposeConfChange({ type: 'addLearner', node: 'd' });
    net.stabilize();
    for (const id of ['b', 'd']) {
      net.crash(id);
      net.restart(id);
      expect(net.raw(id).status().conf).toEqual({ voters: ['a', 'b', 'c'], learners: ['d'] });
    }
  });

  it('a node joining after compaction learns the membership from the snapshot. Reference: Raft paper section 7', () => {
    const net = new Network(['a', 'b', 'c']);
    net.elect('a');
    net.addNode('d', MemoryStorage.bootstrap([]));
    net.raw('a').proposeConfChange({ type: 'addLearner', node: 'd' });
    net.propose('a', 'x');
    net.isolate('d');
    net.stabilize();
    const a = net.node('a');
    a.storage.createSnapshotNow(a.appliedIndex, net.raw('a').status().conf, new Uint8Array([7]));
    net.heal();
    net.tickAll();
    net.stabilize();
    net.tickAll();
    net.stabilize();
    expect(net.node('d').storage.snapshot().meta.index).toBe(a.appliedIndex);
    expect(net.raw('d').status().conf).toEqual({ voters: ['a', 'b', 'c'], learners: ['d'] });
  });
});
