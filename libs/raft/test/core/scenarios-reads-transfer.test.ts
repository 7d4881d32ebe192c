// ReadIndex (Raft thesis 6.4) and leadership transfer (thesis 3.10) scenarios.

import { describe, expect, it } from 'vitest';
import { ProposalDroppedError } from '../../src/core/errors';
import { Network, SLOW_ELECTIONS, bytes, text } from './harness';

const ABC = ['a', 'b', 'c'];


const reads = (net: Network, id: string) => net.node(id).readStates.map((r) => `${text(r.requestCtx)}@${r.index}`);

describe('ReadIndex', () => {
  it('a read is answered at an index covering every write committed before it. Reference: Raft thesis 6.4', () => {
    const net = new Network(ABC);
    net.elect('a');
    const { index } = net.propose('a', 'x');
    net.stabilize();
    net.raw('a').readIndex(bytes('r1'));
    net.stabilize();
    expect(reads(net, 'a')).toEqual([`r1@${index}`]);
  });

  it('ReadIndex on a new leader waits for its own-term commit. Reference: Raft thesis 6.4 step 1', () => {
    const net = new Network(ABC, SLOW_ELECTIONS);
    net.elect('a');
    net.propose('a', 'x');
    net.stabilize();
    net.isolate('a');
    net.expireLease(['b', 'c']);
    net.raw('b').campaign();
    // Hold b's Apps back: it leads, but its no-op (index 3) has not committed.
    net.filter = (m) => m.type !== 'App';
    net.stabilize();
    expect(net.raw('b').status()).toMatchObject({ role: 'leader', commit: 2 });
    net.raw('b').readIndex(bytes('early'));
    net.runFor(2); // heartbeats tell c who leads
    expect(net.raw('c').status().leader).toBe('b');
    net.raw('c').readIndex(bytes('forwarded'));
    net.runFor(2);
    expect(reads(net, 'b')).toEqual([]);
    expect(reads(net, 'c')).toEqual([]);
    net.filter = null;
    net.runFor(2);
    expect(net.raw('b').status().commit).toBe(3);
    expect(reads(net, 'b')).toEqual(['early@3']);
    expect(reads(net, 'c')).toEqual(['forwarded@3']);
  });

  it('a partitioned leader serves no reads. Reference: Raft thesis 6.4 step 3', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.isolate('a');
    net.raw('a').readIndex(bytes('stale?'));
    for (let i = 0; i < 30; i++) {
      net.tick('a');
      net.stabilize();
    }
    expect(reads(net, 'a')).toEqual([]);
    expect(net.raw('a').status().role).toBe('follower'); // check-quorum; the read was dropped
  });

  it('one heartbeat round confirms many concurrent reads; reads arriving meanwhile wait for the next round. Reference: Raft thesis 6.4 (batching)', () => {
    const net = new Network(ABC);
    net.elect('a');
    let heartbeats = 0;
    net.filter = (m) => {
      if (m.type === 'Heartbeat') heartbeats++;
      return true;
    };
    for (let i = 0; i < 5; i++) net.raw('a').readIndex(bytes(`r${i}`));
    net.raw('b').readIndex(bytes('from-b'));
    net.processAllReadies(); // a starts round 1 (r0-r4); b forwards its read
    for (const m of net.takeMessages()) net.deliver(m); // b's read reaches a mid-round
    net.stabilize();
    expect(reads(net, 'a')).toEqual(['r0@1', 'r1@1', 'r2@1', 'r3@1', 'r4@1']);
    expect(reads(net, 'b')).toEqual(['from-b@1']);
    expect(heartbeats).toBe(4); // two rounds of two heartbeats, not one round per read
  });

  it('a single-voter group answers reads at once. Reference: Raft thesis 6.4', () => {
    const net = new Network(['a']);
    net.elect('a');
    net.raw('a').readIndex(bytes('solo'));
    expect(net.raw('a').ready().readStates.map((r) => r.index)).toEqual([1]);
  });

  it('a follower with no known leader drops the read (the caller times out). Reference: etcd raft.go MsgReadIndex', () => {
    const net = new Network(ABC);
    net.raw('b').readIndex(bytes('nobody'));
    net.stabilize();
    expect(net.queue).toEqual([]);
    expect(reads(net, 'b')).toEqual([]);
  });

  it('heartbeat acks of an older round do not confirm a newer one. Reference: Raft thesis 6.4', () => {
    const net = new Network(['a', 'b', 'c', 'd', 'e']);
    net.elect('a');
    net.raw('a').readIndex(bytes('first'));
    net.processReady('a');
    const round1 = net.takeMessages((m) => m.type === 'Heartbeat');
    for (const m of round1) net.deliver(m);
    for (const id of ['b', 'c', 'd', 'e']) net.processReady(id);
    const acks1 = net.takeMessages((m) => m.type === 'HeartbeatResp');
    net.raw('a').step(acks1[0]);
    net.raw('a').step(acks1[1]);
    net.processReady('a');
    expect(reads(net, 'a')).toEqual(['first@1']);
    net.raw('a').readIndex(bytes('second'));
    net.processReady('a');
    net.queue = [];
    for (const m of acks1) net.raw('a').step(m); // replayed acks of round 1
    net.processReady('a');
    expect(reads(net, 'a')).toEqual(['first@1']);
  });
});

describe('leadership transfer', () => {
  it('to an up-to-date voter: it wins the next term at once. Reference: Raft thesis 3.10', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.raw('a').transferLeader('b');
    net.stabilize();
    expect(net.raw('b').status()).toMatchObject({ role: 'leader', term: 2 });
    expect(net.raw('a').status()).toMatchObject({ role: 'follower', leader: 'b' });
  });

  it('to a lagging voter: the leader first catches it up, dropping proposals meanwhile. Reference: Raft thesis 3.10', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.isolate('b');
    for (let i = 0; i < 10; i++) net.propose('a', `v${i}`);
    net.stabilize();
    net.heal();
    net.raw('a').transferLeader('b');
    expect(net.raw('a').status().leadTransferee).toBe('b');
    expect(() => net.propose('a', 'during')).toThrow(ProposalDroppedError);
    net.stabilize();
    expect(net.raw('b').status().role).toBe('leader');
    expect(net.appliedData('b')).toEqual(Array.from({ length: 10 }, (_, i) => `v${i}`));
  });

  it('a transfer that does not finish within an election timeout is abandoned and proposals resume. Reference: Raft thesis 3.10', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.crash('c');
    net.raw('a').transferLeader('c');
    expect(() => net.propose('a', 'during')).toThrow(ProposalDroppedError);
    net.runFor(10);
    expect(net.raw('a').status()).toMatchObject({ role: 'leader', term: 1, leadTransferee: null });
    net.propose('a', 'after');
    net.stabilize();
    expect(net.appliedData('b')).toEqual(['after']);
  });

  it('a transfer to itself or to a non-member is a no-op. Reference: etcd raft.go MsgTransferLeader', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.raw('a').transferLeader('a');
    net.raw('a').transferLeader('zz');
    expect(net.raw('a').status().leadTransferee).toBeNull();
    net.propose('a', 'fine');
    net.stabilize();
    expect(net.raw('a').status()).toMatchObject({ role: 'leader', term: 1 });
  });

  it('a transfer to a learner is a no-op. Reference: Raft thesis 4.2.1', () => {
    const net = new Network(ABC, {}, ['d']);
    net.elect('a');
    net.raw('a').transferLeader('d');
    expect(net.raw('a').status().leadTransferee).toBeNull();
  });

  it('the transfer campaign passes followers\' leader leases. Reference: Raft thesis 4.2.3, 3.10', () => {
    const net = new Network(['a', 'b', 'c', 'd', 'e']);
    net.elect('a');
    net.raw('a').transferLeader('c');
    net.stabilize();
    expect(net.leader()).toBe('c');
  });
});
