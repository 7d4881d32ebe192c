import { describe, expect, it } from 'vitest';
import { NotLeaderError } from '../../src/core/errors';
import { RawNode } from '../../src/core/raw-node';
import { MemoryStorage } from '../../src/core/storage';
import { Network, bytes, seededRandom } from './harness';

describe('RawNode basics', () => {
  it('a single-voter group elects itself and commits proposals at once. Reference: Raft paper section 5.2', () => {
    const net = new Network(['a']);
    net.elect('a');
    expect(net.raw('a').status().role).toBe('leader');
    const { index } = net.propose('a', 'x');
    net.stabilize();
    expect(net.raw('a').status().commit).toBe(index);
    expect(net.appliedData('a')).toEqual(['x']);
  });

  it('three nodes elect a leader and replicate a proposal to all. Reference: Raft paper section 5.3', () => {
    const net = new Network(['a', 'b', 'c']);
    net.elect('a');
    expect(net.leader()).toBe('a');
    for (let i = 0; i < 10; i++) net.propose('a', `v${i}`);
    net.stabilize();
    for (const id of ['a', 'b', 'c']) {
      expect(net.appliedData(id)).toEqual(Array.from({ length: 10 }, (_, i) => `v${i}`));
    }
  });

  it('elections happen by ticks alone, with randomized timeouts. Reference: Raft paper section 5.2', () => {
    const net = new Network(['a', 'b', 'c']);
    for (let i = 0; i < 40 && net.leader() === null; i++) {
      net.tickAll();
      net.stabilize();
    }
    expect(net.leader()).not.toBeNull();
  });

  it('a follower refuses proposals with NotLeaderError naming the leader', () => {
    const net = new Network(['a', 'b', 'c']);
    net.elect('a');
    expect(() => net.propose('b', 'x')).toThrow(NotLeaderError);
    try {
      net.propose('b', 'x');
    } catch (e) {
      expect((e as NotLeaderError).leader).toBe('a');
    }
  });

  it('a Ready with new entries or a vote must be synced before its messages leave', () => {
    const s = MemoryStorage.bootstrap(['a', 'b', 'c']);
    const n = new RawNode({ id: 'a', electionTick: 10, heartbeatTick: 1, random: seededRandom(1), preVote: false }, s);
    n.campaign();
    const rd = n.ready();
    expect(rd.hardState).toEqual({ term: 1, vote: 'a', commit: 0 });
    expect(rd.mustSync).toBe(true);
    expect(rd.messages.map((m) => m.type)).toEqual(['Vote', 'Vote']);
    n.advance(rd);
    expect(n.hasReady()).toBe(false);
    void bytes;
  });
});
