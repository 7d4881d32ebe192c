// One test per claim of the Raft paper (Ongaro & Ousterhout, "In Search of an
// Understandable Consensus Algorithm"), sections 5.1 to 5.4, in the style of etcd-io/raft
// raft_paper_test.go. Pre-vote and check-quorum are off here: the paper has neither.

import { describe, expect, it } from 'vitest';
import { RawNode } from '../../src/core/raw-node';
import { MemoryStorage } from '../../src/core/storage';
import type { Message } from '../../src/core/types';
import { Network, seededRandom, type ConfigOverrides } from './harness';

const PAPER: ConfigOverrides = { preVote: false, checkQuorum: false };
const ABC = ['a', 'b', 'c'];

describe('Raft paper 5.1: terms', () => {
  it('every node starts as a follower of no one. Reference: Raft paper section 5.1', () => {
    const net = new Network(ABC, PAPER);
    for (const id of ABC) expect(net.raw(id).status()).toMatchObject({ role: 'follower', term: 0, leader: null });
  });

  it('a node seeing a higher term adopts it and a leader steps down. Reference: Raft paper section 5.1', () => {
    const net = new Network(ABC, PAPER);
    net.elect('a');
    expect(net.raw('a').status()).toMatchObject({ role: 'leader', term: 1 });
    net.raw('a').step({ type: 'AppResp', from: 'b', to: 'a', term: 5, index: 0 });
    expect(net.raw('a').status()).toMatchObject({ role: 'follower', term: 5, vote: null });
  });

  it('a request with a stale term is rejected and changes nothing. Reference: Raft paper section 5.1', () => {
    const net = new Network(ABC, PAPER);
    net.elect('a');
    net.elect('b'); // term 2
    const before = net.raw('c').status();
    net.raw('c').step({ type: 'App', from: 'a', to: 'c', term: 1, index: 1, logTerm: 1, commit: 5, entries: [] });
    net.raw('c').step({ type: 'Vote', from: 'a', to: 'c', term: 1, index: 99, logTerm: 99 });
    expect(net.raw('c').status()).toMatchObject({ term: before.term, leader: 'b', commit: before.commit, vote: before.vote });
  });
});

describe('Raft paper 5.2: leader election', () => {
  it('a follower that hears nothing for an election timeout becomes candidate, votes for itself and asks all. Reference: Raft paper section 5.2', () => {
    const n = new RawNode({ id: 'a', electionTick: 10, heartbeatTick: 1, random: seededRandom(3), ...PAPER }, MemoryStorage.bootstrap(ABC));
    for (let i = 0; i < 20 && n.status().role === 'follower'; i++) n.tick();
    const rd = n.ready();
    expect(rd.hardState).toMatchObject({ term: 1, vote: 'a' });
    expect(rd.messages.map((m) => `${m.type}->${m.to}@${m.term}`).sort()).toEqual(['Vote->b@1', 'Vote->c@1']);
    expect(n.status().role).toBe('candidate');
  });

  it('election timeouts are randomized in [electionTick, 2 * electionTick). Reference: Raft paper section 5.2', () => {
    const seen = new Set<number>();
    for (let seed = 1; seed <= 50; seed++) {
      const n = new RawNode({ id: 'a', electionTick: 10, heartbeatTick: 1, random: seededRandom(seed), ...PAPER }, MemoryStorage.bootstrap(ABC));
      let ticks = 0;
      while (n.status().role === 'follower') {
        n.tick();
        ticks++;
      }
      expect(ticks).toBeGreaterThanOrEqual(10);
      expect(ticks).toBeLessThan(20);
      seen.add(ticks);
    }
    expect(seen.size).toBeGreaterThan(3);
  });

  it('a candidate with votes from a majority becomes leader and asserts itself at once. Reference: Raft paper section 5.2', () => {
    const net = new Network(['a', 'b', 'c', 'd', 'e'], PAPER);
    net.crash('d');
    net.crash('e');
    net.raw('a').campaign();
    net.processAllReadies();
    net.stabilize();
    expect(net.raw('a').status().role).toBe('leader');
    expect(net.raw('b').status().leader).toBe('a');
  });

  it('each node grants at most one vote per term, first come first served. Reference: Raft paper section 5.2', () => {
    const net = new Network(ABC, PAPER);
    const c = net.raw('c');
    c.step({ type: 'Vote', from: 'a', to: 'c', term: 1, index: 0, logTerm: 0 });
    c.step({ type: 'Vote', from: 'b', to: 'c', term: 1, index: 0, logTerm: 0 });
    c.step({ type: 'Vote', from: 'a', to: 'c', term: 1, index: 0, logTerm: 0 }); // a retry is re-granted
    const answers = c.ready().messages.map((m) => `${m.to}:${m.reject ? 'no' : 'yes'}`);
    expect(answers).toEqual(['a:yes', 'b:no', 'a:yes']);
  });

  it('a candidate that hears from a leader of its term becomes its follower. Reference: Raft paper section 5.2', () => {
    const net = new Network(ABC, PAPER);
    net.raw('b').campaign(); // term 1, b is candidate
    net.raw('b').step({ type: 'App', from: 'a', to: 'b', term: 1, index: 0, logTerm: 0, commit: 0, entries: [] });
    expect(net.raw('b').status()).toMatchObject({ role: 'follower', leader: 'a', term: 1 });
  });

  it('a split vote times out and a new election runs in a higher term. Reference: Raft paper section 5.2', () => {
    const net = new Network(['a', 'b', 'c', 'd'], PAPER);
    net.partition(['a', 'b'], ['c', 'd']);
    net.raw('a').campaign();
    net.raw('c').campaign();
    net.stabilize();
    expect(net.leader()).toBeNull();
    expect(net.raw('a').status()).toMatchObject({ role: 'candidate', term: 1 });
    net.heal();
    for (let i = 0; i < 60 && net.leader() === null; i++) {
      net.tickAll();
      net.stabilize();
    }
    expect(net.leader()).not.toBeNull();
    expect(net.raw(net.leader()!).status().term).toBeGreaterThan(1);
  });
});

describe('Raft paper 5.3: log replication', () => {
  it('the leader commits an entry once a majority stores it, and followers learn the commit. Reference: Raft paper section 5.3', () => {
    const net = new Network(['a', 'b', 'c', 'd', 'e'], PAPER);
    net.elect('a');
    net.crash('d');
    net.crash('e');
    const { index } = net.propose('a', 'x');
    net.stabilize();
    expect(net.raw('a').status().commit).toBe(index);
    expect(net.raw('b').status().commit).toBe(index);
    expect(net.appliedData('c')).toEqual(['x']);
  });

  it('without a majority nothing commits. Reference: Raft paper section 5.3', () => {
    const net = new Network(['a', 'b', 'c', 'd', 'e'], PAPER);
    net.elect('a');
    const before = net.raw('a').status().commit;
    for (const id of ['c', 'd', 'e']) net.crash(id);
    net.propose('a', 'x');
    net.stabilize();
    expect(net.raw('a').status().commit).toBe(before);
  });

  it('a follower rejects an App whose previous entry does not match. Reference: Raft paper section 5.3 (consistency check)', () => {
    const net = Network.withLogs({ a: [1, 1], b: [1, 1] }, PAPER, { a: 2, b: 2 });
    net.raw('b').step({ type: 'App', from: 'a', to: 'b', term: 2, index: 2, logTerm: 2, commit: 0, entries: [] });
    const resp = net.raw('b').ready().messages[0];
    expect(resp).toMatchObject({ type: 'AppResp', reject: true, index: 2, rejectHint: 2, logTerm: 1 });
    expect(net.raw('b').status().lastIndex).toBe(2);
  });

  it('committed entries are applied in log order on every node. Reference: Raft paper section 5.3', () => {
    const net = new Network(ABC, PAPER);
    net.elect('a');
    for (let i = 0; i < 30; i++) {
      net.propose('a', `v${i}`);
      if (i % 7 === 0) net.stabilize();
    }
    net.stabilize();
    for (const id of ABC) {
      const indexes = net.node(id).applied.map((e) => e.index);
      expect(indexes).toEqual(indexes.map((_, i) => i + 1));
      expect(net.appliedData(id)).toEqual(Array.from({ length: 30 }, (_, i) => `v${i}`));
    }
  });

  it('the leader makes a follower log match its own: missing entries added, conflicting suffix replaced. Reference: Raft paper section 5.3, Figure 7', () => {
    // Figure 7's (d)/(f)-like followers: one with an extra uncommitted suffix of an old term, one missing entries.
    const net = Network.withLogs({ a: [1, 1, 1, 4, 4, 5, 5, 6, 6, 6], b: [1, 1, 1, 4, 4, 5, 5, 6, 6, 6], c: [1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3], d: [1, 1, 1, 4] }, PAPER);
    net.elect('a');
    net.propose('a', 'after');
    net.stabilize();
    const leaderLog = net.node('a').storage.entries(1, net.raw('a').status().lastIndex + 1).map((e) => e.term);
    for (const id of ['b', 'c', 'd']) {
      const s = net.node(id).storage;
      expect(s.entries(1, s.lastIndex() + 1).map((e) => e.term)).toEqual(leaderLog);
    }
  });
});

describe('Raft paper 5.4: safety', () => {
  it('a voter refuses a candidate whose log is less up to date (by last term, then by length). Reference: Raft paper section 5.4.1', () => {
    const net = Network.withLogs({ a: [1, 2], b: [1, 1, 1], c: [1, 2, 2] }, PAPER);
    const voteFrom = (voter: string, cand: string, index: number, logTerm: number): Message => {
      net.raw(voter).step({ type: 'Vote', from: cand, to: voter, term: 10, index, logTerm });
      return net.raw(voter).ready().messages[0];
    };
    expect(voteFrom('a', 'b', 3, 1).reject).toBe(true); // older last term, longer log
    expect(voteFrom('c', 'a', 2, 2).reject).toBe(true); // same last term, shorter log
    expect(voteFrom('b', 'a', 2, 2).reject).toBe(false); // newer last term wins
  });

  it('only entries of the current term are committed by counting replicas. Reference: Raft paper section 5.4.2, Figure 8', () => {
    // Figure 8 (c): s1 leads term 4 with an index-2 entry from term 2 that s2 and s3 hold.
    const net = Network.withLogs({ s1: [1, 2], s2: [1, 2], s3: [1, 2], s4: [1], s5: [1, 3] }, PAPER, { s1: 3, s5: 3 });
    net.isolate('s5');
    net.raw('s1').campaign();
    net.processReady('s1');
    for (const m of net.takeMessages()) net.deliver(m);
    net.processAllReadies();
    for (const m of net.takeMessages((m) => m.to === 's1')) net.deliver(m);
    const leader = net.raw('s1');
    expect(leader.status()).toMatchObject({ role: 'leader', term: 4 });
    // s2 and s3 acknowledge index 2 only: a majority stores it, yet it is of term 2.
    leader.step({ type: 'AppResp', from: 's2', to: 's1', term: 4, index: 2 });
    leader.step({ type: 'AppResp', from: 's3', to: 's1', term: 4, index: 2 });
    expect(leader.status().commit).toBe(0);
    // Once the term-4 no-op (index 3) is on a majority, it and everything before commit.
    leader.step({ type: 'AppResp', from: 's2', to: 's1', term: 4, index: 3 });
    leader.step({ type: 'AppResp', from: 's3', to: 's1', term: 4, index: 3 });
    expect(leader.status().commit).toBe(3);
  });

  it('a newly elected leader holds every committed entry (leader completeness). Reference: Raft paper section 5.4.3', () => {
    const net = new Network(['a', 'b', 'c', 'd', 'e'], PAPER);
    net.elect('a');
    net.partition(['a', 'b', 'c'], ['d', 'e']);
    for (let i = 0; i < 5; i++) net.propose('a', `v${i}`);
    net.stabilize();
    const committed = net.raw('a').status().commit;
    net.crash('a');
    net.heal();
    // d and e lack the committed entries: they cannot win; b or c will.
    net.raw('d').campaign();
    net.stabilize();
    expect(net.leader()).toBeNull();
    for (let i = 0; i < 100 && net.leader() === null; i++) {
      net.tickAll();
      net.stabilize();
    }
    const leader = net.leader()!;
    expect(['b', 'c']).toContain(leader);
    expect(net.raw(leader).status().lastIndex).toBeGreaterThanOrEqual(committed);
  });

  it('no two nodes apply different entries at the same index (state machine safety). Reference: Raft paper section 5.4.3', () => {
    const net = new Network(['a', 'b', 'c', 'd', 'e'], PAPER);
    net.elect('a');
    net.propose('a', 'first');
    net.stabilize();
    net.partition(['a', 'b'], ['c', 'd', 'e']);
    net.propose('a', 'lost'); // cannot commit: minority side
    net.elect('c');
    net.propose('c', 'won');
    net.stabilize();
    net.heal();
    net.tickAll(2);
    net.stabilize();
    const byIndex = new Map<number, string>();
    for (const n of net.nodes.values()) {
      for (const e of n.applied) {
        const key = `${e.term}:${new TextDecoder().decode(e.data)}`;
        expect(byIndex.get(e.index) ?? key).toBe(key);
        byIndex.set(e.index, key);
      }
    }
    expect(net.appliedData('a')).toEqual(['first', 'won']);
  });
});
