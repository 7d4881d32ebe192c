// The lazy commit broadcast (RaftConfig.lazyCommitBroadcast, on by default): a new
// commit index travels with the next App or heartbeat instead of a message of its own,
// and a follower's ReadIndex answer carries it so follower reads do not wait for a tick.

import { describe, expect, it } from 'vitest';
import type { Message } from '../../src/core/types';
import { Network, bytes, text } from './harness';

const ABC = ['a', 'b', 'c'];
const LAZY = { lazyCommitBroadcast: true };

describe('lazy commit broadcast', () => {
  it('a commit sends no message of its own; followers learn it from the next App. Reference: etcd raft.go bcastAppend after maybeCommit (the eager variant)', () => {
    const net = new Network(ABC, LAZY);
    net.elect('a');
    let appsAfterCommit = 0;
    net.propose('a', 'one');
    net.stabilize();
    expect(net.raw('a').status().commit).toBe(2);
    expect(net.raw('b').status().commit).toBe(1); // not told yet

    net.filter = (m: Message) => {
      if (m.type === 'App' && (m.entries?.length ?? 0) === 0) appsAfterCommit++;
      return true;
    };
    net.propose('a', 'two');
    net.stabilize();
    expect(appsAfterCommit).toBe(0); // every App carried entries
    expect(net.appliedData('b')).toEqual(['one']); // learned with the App of 'two'
    expect(net.raw('b').status().commit).toBe(2);
  });

  it('an idle follower learns the commit index from the next heartbeat. Reference: Raft paper section 5.3 (commit index in AppendEntries)', () => {
    const net = new Network(ABC, LAZY);
    net.elect('a');
    net.propose('a', 'one');
    net.stabilize();
    expect(net.appliedData('c')).toEqual([]);
    net.tick('a', net.node('a').config.heartbeatTick);
    net.stabilize();
    expect(net.appliedData('b')).toEqual(['one']);
    expect(net.appliedData('c')).toEqual(['one']);
  });

  it('a ReadIndex answer to a follower carries the commit index, so the follower can serve the read at once. Reference: Raft thesis 6.4', () => {
    const net = new Network(ABC, LAZY);
    net.elect('a');
    net.propose('a', 'one');
    net.stabilize();
    expect(net.raw('b').status().commit).toBe(1);

    net.raw('b').readIndex(bytes('r'));
    net.stabilize(); // no tick
    const reads = net.node('b').readStates.map((r) => `${text(r.requestCtx)}@${r.index}`);
    expect(reads).toEqual(['r@2']);
    expect(net.raw('b').status().commit).toBeGreaterThanOrEqual(2);
    expect(net.appliedData('b')).toEqual(['one']);
  });

  it('the eager mode (lazyCommitBroadcast: false) tells followers without waiting. Reference: Raft paper section 5.3', () => {
    const net = new Network(ABC, { lazyCommitBroadcast: false });
    net.elect('a');
    net.propose('a', 'one');
    net.stabilize();
    expect(net.appliedData('b')).toEqual(['one']);
    expect(net.appliedData('c')).toEqual(['one']);
  });
});
