// Election scenarios beyond the paper's basics: stale leaders, crash-restart, check-quorum
// and pre-vote (Raft thesis chapters 3, 4.2.3, 6.2, 9.6), with the default config
// (pre-vote and check-quorum on) unless a test says otherwise.

import { describe, expect, it } from 'vitest';
import { Network, SLOW_ELECTIONS } from './harness';

const ABC = ['a', 'b', 'c'];

/** Ticks everyone and runs the network until `done` or `rounds` runs out. */
function runUntil(net: Network, done: () => boolean, rounds = 200): void {
  for (let i = 0; i < rounds && !done(); i++) {
    net.tickAll();
    net.stabilize();
  }
}

describe('stale terms', () => {
  it('stale-term step-down: an old leader steps down when the new leader reaches it. Reference: Raft paper section 5.1', () => {
    const net = new Network(ABC, SLOW_ELECTIONS);
    net.elect('a');
    net.isolate('a');
    net.expireLease(['b', 'c']);
    net.elect('b');
    expect(net.raw('b').status()).toMatchObject({ role: 'leader', term: 2 });
    expect(net.raw('a').status()).toMatchObject({ role: 'leader', term: 1 }); // does not know yet
    net.heal();
    net.tick('b'); // heartbeat at term 2
    net.stabilize();
    expect(net.raw('a').status()).toMatchObject({ role: 'follower', term: 2, leader: 'b' });
  });

  it('stale-term step-down: an old leader that writes to a newer follower is told the newer term. Reference: Raft paper section 5.1; etcd raft.go (stale MsgApp answered under check-quorum)', () => {
    const net = new Network(ABC, SLOW_ELECTIONS);
    net.elect('a');
    net.isolate('a');
    net.expireLease(['b', 'c']);
    net.elect('b');
    net.heal();
    net.dropBetween('a', 'b'); // only c can tell a
    net.propose('a', 'stale');
    net.stabilize();
    expect(net.raw('a').status()).toMatchObject({ role: 'follower', term: 2 });
    expect(net.appliedData('c')).not.toContain('stale');
  });

  it('a partitioned old leader cannot commit, and its entries are discarded on heal. Reference: Raft paper section 5.4, Figure 7', () => {
    const net = new Network(['a', 'b', 'c', 'd', 'e'], SLOW_ELECTIONS);
    net.elect('a');
    net.partition(['a', 'b'], ['c', 'd', 'e']);
    const before = net.raw('a').status().commit;
    net.propose('a', 'minority');
    net.stabilize();
    expect(net.raw('a').status().commit).toBe(before);
    net.expireLease(['c', 'd', 'e']);
    net.elect('c');
    net.propose('c', 'majority');
    net.stabilize();
    net.heal();
    runUntil(net, () => net.appliedData('a').includes('majority'));
    for (const id of net.nodes.keys()) expect(net.appliedData(id)).toEqual(['majority']);
  });
});

describe('crash and restart', () => {
  it('one vote per term across crash-restart: the vote is rebuilt from storage. Reference: Raft paper section 5.2, Figure 2 (votedFor is persistent)', () => {
    const net = new Network(ABC, { preVote: false });
    net.dropBetween('a', 'b');
    net.raw('a').campaign(); // term 1: c votes for a
    net.stabilize();
    net.crash('c');
    net.restart('c');
    expect(net.raw('c').status()).toMatchObject({ term: 1, vote: 'a' });
    net.raw('c').step({ type: 'Vote', from: 'b', to: 'c', term: 1, index: 5, logTerm: 1 });
    const resp = net.raw('c').ready().messages.find((m) => m.type === 'VoteResp')!;
    expect(resp.reject).toBe(true);
  });

  it('a restarted node keeps its log, commit and applied state. Reference: Raft paper section 5.2, Figure 2', () => {
    const net = new Network(ABC);
    net.elect('a');
    for (let i = 0; i < 5; i++) net.propose('a', `v${i}`);
    net.stabilize();
    const before = net.raw('b').status();
    net.crash('b');
    net.restart('b');
    const after = net.raw('b').status();
    expect(after).toMatchObject({ term: before.term, commit: before.commit, applied: before.applied, lastIndex: before.lastIndex });
    net.propose('a', 'more');
    net.stabilize();
    expect(net.appliedData('b')).toEqual(['v0', 'v1', 'v2', 'v3', 'v4', 'more']);
  });
});

describe('check-quorum', () => {
  it('check-quorum step-down: a leader cut off from a quorum steps down within an election timeout. Reference: Raft thesis 6.2', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.isolate('a');
    for (let i = 0; i < 25 && net.raw('a').status().role === 'leader'; i++) {
      net.tick('a');
      net.stabilize();
    }
    expect(net.raw('a').status()).toMatchObject({ role: 'follower', leader: null });
  });

  it('a leader that hears from a quorum keeps leading. Reference: Raft thesis 6.2', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 50; i++) {
      net.tick('a');
      net.stabilize();
    }
    expect(net.raw('a').status().role).toBe('leader');
  });

  it('a follower in its leader lease ignores vote requests of a higher term. Reference: Raft thesis 4.2.3', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.raw('b').step({ type: 'Vote', from: 'c', to: 'b', term: 9, index: 100, logTerm: 9 });
    expect(net.raw('b').status()).toMatchObject({ term: 1, leader: 'a' });
    expect(net.raw('b').ready().messages).toEqual([]);
  });
});

describe('pre-vote', () => {
  it('pre-vote stops a rejoining node from deposing the leader. Reference: Raft thesis 9.6', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.isolate('c');
    net.tick('c', 100); // c pre-campaigns over and over but never raises its term
    net.stabilize();
    expect(net.raw('c').status().term).toBe(1);
    net.heal();
    runUntil(net, () => false, 30);
    expect(net.raw('a').status()).toMatchObject({ role: 'leader', term: 1 });
    expect(net.raw('c').status()).toMatchObject({ leader: 'a', term: 1 });
  });

  it('without pre-vote and check-quorum the same rejoin deposes the leader (what pre-vote prevents). Reference: Raft thesis 9.6', () => {
    const net = new Network(ABC, { preVote: false, checkQuorum: false });
    net.elect('a');
    net.isolate('c');
    net.tick('c', 100);
    net.stabilize();
    expect(net.raw('c').status().term).toBeGreaterThan(1);
    net.heal();
    runUntil(net, () => false, 30);
    expect(net.raw('a').status().term).toBeGreaterThan(1);
  });

  it('a node with a smaller term but an up-to-date log can still win an election. Reference: Raft thesis 9.6; etcd TestPreVoteWithSplitVote', () => {
    const net = new Network(ABC, SLOW_ELECTIONS);
    net.elect('a');
    net.propose('a', 'x');
    net.stabilize();
    net.crash('a');
    net.expireLease(['b', 'c']);
    // b wins the pre-vote, but its real vote requests never reach c: b sits at term 2.
    net.filter = (m) => !(m.type === 'Vote' && m.from === 'b');
    net.raw('b').campaign();
    net.stabilize();
    expect(net.raw('b').status()).toMatchObject({ role: 'candidate', term: 2 });
    expect(net.raw('c').status().term).toBe(1);
    net.filter = null;
    // c's pre-vote (for term 2) is refused by b at term 2; c learns term 2 from the refusal
    net.raw('c').campaign();
    net.stabilize();
    expect(net.raw('c').status()).toMatchObject({ role: 'follower', term: 2 });
    // and its next campaign, for term 3, wins.
    net.raw('c').campaign();
    net.stabilize();
    expect(net.raw('c').status()).toMatchObject({ role: 'leader', term: 3 });
    expect(net.appliedData('c')).toEqual(['x']);
  });

  it('a pre-candidate whose log is behind cannot even start a real election. Reference: Raft thesis 9.6, paper 5.4.1', () => {
    const net = new Network(ABC, SLOW_ELECTIONS);
    net.elect('a');
    net.isolate('c');
    net.propose('a', 'x');
    net.stabilize();
    net.crash('a');
    net.heal();
    net.expireLease(['b', 'c']);
    net.raw('c').campaign();
    net.stabilize();
    // b refused the pre-vote; with a down, c can neither win nor lose: it keeps term 1.
    expect(net.raw('c').status()).toMatchObject({ role: 'preCandidate', term: 1 });
    expect(net.raw('b').status().term).toBe(1);
    // b, whose log is complete, wins instead.
    net.elect('b');
    expect(net.raw('b').status()).toMatchObject({ role: 'leader', term: 2 });
    expect(net.appliedData('c')).toEqual(['x']);
  });
});
