// Membership scenarios: single-server changes one at a time, learners that catch up
// before promotion, removed nodes that cannot disrupt, a leader removing itself.

import { describe, expect, it } from 'vitest';
import { ProposalDroppedError } from '../../src/core/errors';
import { MemoryStorage } from '../../src/core/storage';
import type { ConfChange } from '../../src/core/types';
import { Network } from './harness';

const ABC = ['a', 'b', 'c'];


function change(net: Network, leader: string, cc: ConfChange): void {
  net.raw(leader).proposeConfChange(cc);
  net.stabilize();
}

describe('membership changes', () => {
  it('one pending configuration change at a time: a second is dropped until the first is applied. Reference: Raft thesis 4.1', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.addNode('d', MemoryStorage.bootstrap([]));
    net.addNode('e', MemoryStorage.bootstrap([]));
    net.raw('a').proposeConfChange({ type: 'addLearner', node: 'd' });
    expect(() => net.raw('a').proposeConfChange({ type: 'addLearner', node: 'e' })).toThrow(ProposalDroppedError);
    net.stabilize();
    expect(net.raw('a').status().conf.learners).toEqual(['d']);
    net.raw('a').proposeConfChange({ type: 'addLearner', node: 'e' });
    net.stabilize();
    expect(net.raw('a').status().conf.learners).toEqual(['d', 'e']);
  });

  it('a new leader accepts no conf change until its predecessor\'s may be applied. Reference: Raft thesis 4.1; etcd raft.go pendingConfIndex', () => {
    // The old log (indexes 1-2) may hold a conf change the new leader has not applied yet.
    const net = Network.withLogs({ a: [1, 1], b: [1, 1], c: [1, 1] });
    net.addNode('d', MemoryStorage.bootstrap([]));
    net.raw('a').campaign();
    while (net.raw('a').status().role !== 'leader') {
      net.processAllReadies();
      for (const m of net.takeMessages()) net.deliver(m);
    }
    expect(net.raw('a').status().applied).toBe(0);
    expect(() => net.raw('a').proposeConfChange({ type: 'addLearner', node: 'd' })).toThrow(ProposalDroppedError);
    net.stabilize();
    net.raw('a').proposeConfChange({ type: 'addLearner', node: 'd' });
  });

  it('invalid changes are refused up front. Reference: Raft thesis 4.1', () => {
    const net = new Network(ABC);
    net.elect('a');
    const a = net.raw('a');
    expect(() => a.proposeConfChange({ type: 'addLearner', node: 'b' })).toThrow(ProposalDroppedError);
    expect(() => a.proposeConfChange({ type: 'promote', node: 'b' })).toThrow(ProposalDroppedError);
    expect(() => a.proposeConfChange({ type: 'remove', node: 'zz' })).toThrow(ProposalDroppedError);
    const single = new Network(['x']);
    single.elect('x');
    expect(() => single.raw('x').proposeConfChange({ type: 'remove', node: 'x' })).toThrow(ProposalDroppedError);
  });

  it('learner catch-up then promotion: promotion is refused while the learner lags, accepted once it caught up. Reference: Raft thesis 4.2.1', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.addNode('d', MemoryStorage.bootstrap([]));
    net.isolate('d');
    change(net, 'a', { type: 'addLearner', node: 'd' });
    for (let i = 0; i < 200; i++) net.propose('a', `v${i}`);
    net.stabilize();
    net.tick('d', 100); // a learner never campaigns
    expect(net.raw('d').status().term).toBe(0);
    expect(() => net.raw('a').proposeConfChange({ type: 'promote', node: 'd' })).toThrow(/has not caught up/);
    net.heal();
    net.runFor(3);
    expect(net.raw('d').status().conf).toEqual({ voters: ABC, learners: ['d'] });
    expect(net.appliedData('d').length).toBe(200);
    change(net, 'a', { type: 'promote', node: 'd' });
    net.runFor(2);
    for (const id of [...ABC, 'd']) expect(net.raw(id).status().conf).toEqual({ voters: [...ABC, 'd'], learners: [] });
  });

  it('a caught-up learner that went silent is not promoted. Reference: Raft thesis 4.2.1', () => {
    const net = new Network(ABC, {}, ['d']);
    net.elect('a');
    net.propose('a', 'x');
    net.runFor(2);
    net.isolate('d');
    net.runFor(25); // more than two election timeouts of silence
    expect(() => net.raw('a').proposeConfChange({ type: 'promote', node: 'd' })).toThrow(ProposalDroppedError);
    net.heal();
    net.runFor(3);
    net.raw('a').proposeConfChange({ type: 'promote', node: 'd' });
  });

  it('learners never count toward the commit quorum. Reference: Raft thesis 4.2.1', () => {
    const net = new Network(ABC, {}, ['d']);
    net.elect('a');
    net.crash('b');
    net.crash('c');
    const before = net.raw('a').status().commit;
    net.propose('a', 'x');
    net.stabilize();
    expect(net.raw('d').status().lastIndex).toBe(net.raw('a').status().lastIndex); // d has it
    expect(net.raw('a').status().commit).toBe(before); // but it does not commit
  });

  it('learners never count toward election quorums and never campaign. Reference: Raft thesis 4.2.1', () => {
    const net = new Network(['a', 'b'], {}, ['c', 'd']);
    net.crash('b');
    net.raw('c').campaign();
    net.tick('d', 100);
    net.stabilize();
    expect(net.raw('c').status().role).toBe('follower');
    expect(net.raw('d').status().role).toBe('follower');
    net.raw('a').campaign();
    net.stabilize();
    expect(net.raw('a').status().role).toBe('preCandidate'); // c and d's grants do not count
  });

  it('a removed node cannot disrupt: it stops campaigning once it applied its removal. Reference: Raft thesis 4.2.3', () => {
    const net = new Network(ABC);
    net.elect('a');
    change(net, 'a', { type: 'remove', node: 'c' });
    net.runFor(2);
    expect(net.raw('c').status().conf.voters).toEqual(['a', 'b']);
    const term = net.raw('a').status().term;
    net.tick('c', 200);
    net.stabilize();
    expect(net.raw('c').status().term).toBe(term);
    net.propose('a', 'x');
    net.stabilize();
    expect(net.appliedData('b')).toEqual(['x']);
  });

  it('a removed node that never learned of its removal cannot disrupt either (pre-vote and leases). Reference: Raft thesis 4.2.3, 9.6', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.isolate('c');
    change(net, 'a', { type: 'remove', node: 'c' });
    net.runFor(3);
    net.tick('c', 100); // c still believes it is a voter and keeps pre-campaigning
    net.stabilize();
    net.heal();
    net.runFor(50);
    expect(net.raw('a').status()).toMatchObject({ role: 'leader', term: 1 });
    expect(net.raw('b').status()).toMatchObject({ leader: 'a', term: 1 });
  });

  it('a leader that removes itself steps down once the change is applied and hands off to an up-to-date voter. Reference: Raft thesis 4.2.2', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.propose('a', 'before');
    net.stabilize();
    change(net, 'a', { type: 'remove', node: 'a' });
    net.stabilize();
    expect(net.raw('a').status().role).toBe('follower');
    const leader = net.leader();
    expect(['b', 'c']).toContain(leader);
    expect(net.raw(leader!).status()).toMatchObject({ term: 2, conf: { voters: ['b', 'c'], learners: [] } });
    net.propose(leader!, 'after');
    net.runFor(20);
    expect(net.appliedData('b')).toEqual(['before', 'after']);
    expect(net.raw('a').status().role).toBe('follower'); // it never campaigns again
    expect(net.leader()).toBe(leader);
  });
});
