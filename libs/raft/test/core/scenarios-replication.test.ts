// Replication scenarios: log repair with fast backtracking, flow control and probing,
// snapshots for followers behind compaction, reordered/duplicated responses, and the
// uncommitted-size cap.

import { describe, expect, it } from 'vitest';
import { ProposalOverloadedError } from '../../src/core/errors';
import { imageInMemory, type Message } from '../../src/core/types';
import { Network, bytes } from './harness';

const ABC = ['a', 'b', 'c'];
const isApp = (to: string) => (m: Message) => m.type === 'App' && m.to === to;

describe('log repair', () => {
  it('conflicting-suffix repair: a follower drops its uncommitted old-term suffix for the leader\'s entries, skipping a whole term per round trip. Reference: Raft paper section 5.3; etcd raft.go findConflictByTerm', () => {
    const net = Network.withLogs({ a: [1, 1, 3, 3], b: [1, 1, 2, 2, 2, 2, 2, 2, 2, 2], c: [1, 1, 3, 3] }, {}, { a: 3, b: 3, c: 3 });
    let rejects = 0;
    net.filter = (m) => {
      if (m.type === 'AppResp' && m.from === 'b' && m.reject) rejects++;
      return true;
    };
    net.elect('a');
    net.propose('a', 'x');
    net.stabilize();
    net.tickAll();
    net.stabilize();
    const terms = (id: string) => {
      const s = net.node(id).storage;
      return s.entries(1, s.lastIndex() + 1).map((e) => e.term);
    };
    expect(terms('b')).toEqual(terms('a'));
    expect(terms('b')).toEqual([1, 1, 3, 3, 4, 4]);
    expect(rejects).toBe(1); // eight divergent entries, one rejection
    expect(net.appliedData('b')).toContain('x');
  });
});

describe('flow control', () => {
  function replicatingGroup(overrides = {}) {
    const net = new Network(ABC, { maxSizePerMsg: 1, ...overrides });
    net.elect('a');
    expect(net.raw('a').status().progress!.b.state).toBe('replicate');
    return net;
  }

  it('in replicate state at most maxInflightMsgs Apps are in flight per follower. Reference: etcd tracker/inflights.go', () => {
    const net = replicatingGroup({ maxInflightMsgs: 3 });
    for (let i = 0; i < 10; i++) net.propose('a', `v${i}`);
    net.processReady('a');
    const toB = net.takeMessages(isApp('b'));
    expect(toB.length).toBe(3);
    expect(toB.map((m) => m.entries!.length)).toEqual([1, 1, 1]); // pipelined, one entry each
    expect(net.raw('a').status().progress!.b.inflight).toBe(3);
    // Acks open the window again.
    for (const m of toB) net.deliver(m);
    net.processReady('b');
    for (const m of net.takeMessages((m) => m.to === 'a')) net.deliver(m);
    net.processReady('a');
    expect(net.takeMessages(isApp('b')).length).toBe(3);
  });

  it('in replicate state the bytes in flight per follower are bounded by maxInflightBytes. Reference: etcd raft Config.MaxInflightBytes', () => {
    const entry = 100 + 24; // payload + per-entry overhead
    const net = replicatingGroup({ maxInflightMsgs: 100, maxInflightBytes: 2 * entry });
    for (let i = 0; i < 10; i++) net.raw('a').propose(new Uint8Array(100));
    net.processReady('a');
    expect(net.takeMessages(isApp('b')).length).toBe(2);
  });

  it('a follower whose whole pipelined window was lost is found out by the next heartbeat and repaired. Reference: etcd tracker/progress.go MsgAppFlowPaused', () => {
    const net = replicatingGroup({ maxInflightMsgs: 2 });
    net.filter = (m) => !(m.type === 'App' && m.to === 'b'); // every App to b vanishes
    for (let i = 0; i < 6; i++) net.propose('a', `v${i}`);
    net.stabilize();
    expect(net.raw('a').status().progress!.b).toMatchObject({ state: 'replicate', inflight: 2 });
    net.filter = null;
    for (let i = 0; i < 3; i++) {
      net.tickAll();
      net.stabilize();
    }
    expect(net.appliedData('b')).toEqual(['v0', 'v1', 'v2', 'v3', 'v4', 'v5']);
  });

  it('a follower in probe state gets one App per heartbeat interval until it answers. Reference: etcd tracker/progress.go StateProbe', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 3; i++) net.propose('a', `v${i}`);
    net.stabilize();
    net.heal();
    net.raw('a').reportUnreachable('c'); // the transport says c is unreachable: probe
    expect(net.raw('a').status().progress!.c.state).toBe('probe');
    // c's answers never arrive: the leader probes once per heartbeat, not once per proposal.
    net.filter = (m) => !(m.from === 'c' && m.to === 'a');
    let apps = 0;
    for (let tick = 0; tick < 5; tick++) {
      for (let i = 0; i < 4; i++) net.propose('a', `p${tick}.${i}`);
      net.processReady('a');
      apps += net.takeMessages(isApp('c')).length;
      net.queue = [];
      net.tick('a');
      net.processReady('a');
      net.queue = net.queue.filter((m) => m.type !== 'Heartbeat' || m.to !== 'c');
      // b answers heartbeats; c is silent
      net.stabilize();
    }
    expect(apps).toBeLessThanOrEqual(1);
    // Once c answers a heartbeat, probing resumes and c catches up.
    net.filter = null;
    net.tickAll();
    net.stabilize();
    net.tickAll();
    net.stabilize();
    expect(net.raw('c').status().commit).toBe(net.raw('a').status().commit);
    expect(net.raw('a').status().progress!.c.state).toBe('replicate');
  });
});

describe('snapshots', () => {
  it('a follower behind compaction gets a snapshot, restores from it and then replicates normally. Reference: Raft paper section 7', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 20; i++) net.propose('a', `v${i}`);
    net.stabilize();
    const a = net.node('a');
    a.storage.createSnapshotNow(a.appliedIndex, net.raw('a').status().conf, bytes('image@' + a.appliedIndex));
    net.heal();
    let snaps = 0;
    net.filter = (m) => {
      if (m.type === 'Snap') snaps++;
      return true;
    };
    net.tickAll();
    net.stabilize();
    expect(snaps).toBe(1);
    const c = net.node('c');
    expect(c.storage.snapshot().meta.index).toBe(a.storage.snapshot().meta.index);
    expect(new TextDecoder().decode(imageInMemory(c.storage.snapshot().data))).toBe('image@' + a.storage.snapshot().meta.index);
    expect(net.raw('c').status().conf.voters).toEqual(ABC);
    net.propose('a', 'after');
    net.stabilize();
    expect(net.appliedData('c')).toEqual(['after']);
    expect(net.raw('a').status().progress!.c.state).toBe('replicate');
  });

  it('a failed snapshot (reportSnapshot false) returns the follower to probe, and the snapshot is resent. Reference: etcd raft.go MsgSnapStatus', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.isolate('c');
    for (let i = 0; i < 5; i++) net.propose('a', `v${i}`);
    net.stabilize();
    const a = net.node('a');
    a.storage.createSnapshotNow(a.appliedIndex, net.raw('a').status().conf, bytes('image'));
    net.heal();
    net.filter = (m) => m.type !== 'Snap'; // the stream fails
    net.tickAll();
    net.stabilize();
    expect(net.raw('a').status().progress!.c.state).toBe('snapshot');
    net.raw('a').reportSnapshot('c', false);
    expect(net.raw('a').status().progress!.c.state).toBe('probe');
    net.filter = null;
    net.tickAll();
    net.stabilize();
    expect(net.node('c').storage.snapshot().meta.index).toBe(a.storage.snapshot().meta.index);
  });
});

describe('reordered and stale responses', () => {
  it('duplicated, reordered and stale-term AppResps do not move match backwards or double-free the window. Reference: Raft paper section 5.3 (idempotent RPCs); etcd tracker/progress.go MaybeDecrTo', () => {
    const net = new Network(ABC, { maxSizePerMsg: 1, maxInflightMsgs: 4 });
    net.elect('a');
    for (let i = 0; i < 4; i++) net.propose('a', `v${i}`);
    net.processReady('a');
    const apps = net.takeMessages(isApp('b'));
    net.queue = [];
    for (const m of apps) net.deliver(m);
    net.processReady('b');
    const acks = net.takeMessages((m) => m.to === 'a' && m.type === 'AppResp');
    const leader = net.raw('a');
    const matchB = () => leader.status().progress!.b;
    leader.step(acks[3]); // newest first
    expect(matchB().match).toBe(acks[3].index);
    expect(matchB().inflight).toBe(0);
    for (const m of [acks[0], acks[1], acks[3], acks[2]]) leader.step(m); // older and duplicates
    expect(matchB().match).toBe(acks[3].index);
    // a rejection of an index already matched is stale and ignored
    leader.step({ type: 'AppResp', from: 'b', to: 'a', term: 1, index: 2, reject: true, rejectHint: 0, logTerm: 0 });
    expect(matchB()).toMatchObject({ match: acks[3].index, state: 'replicate' });
    // an answer from an older term is ignored entirely
    leader.step({ type: 'AppResp', from: 'b', to: 'a', term: 0, index: 1, reject: true });
    expect(leader.status()).toMatchObject({ role: 'leader', term: 1 });
    expect(matchB().match).toBe(acks[3].index);
  });

  it('a duplicated vote is counted once. Reference: Raft paper section 5.2', () => {
    const net = new Network(['a', 'b', 'c', 'd', 'e'], { preVote: false });
    net.raw('a').campaign();
    const grant: Message = { type: 'VoteResp', from: 'b', to: 'a', term: 1, reject: false };
    net.raw('a').step(grant);
    net.raw('a').step(grant);
    expect(net.raw('a').status().role).toBe('candidate'); // 2 of 5, not 3
    net.raw('a').step({ ...grant, from: 'c' });
    expect(net.raw('a').status().role).toBe('leader');
  });

  it('a delayed App from an earlier point of the same term does not truncate newer entries. Reference: Raft paper section 5.3; etcd raftLog.maybeAppend', () => {
    const net = new Network(ABC);
    net.elect('a');
    net.propose('a', 'one');
    net.processReady('a');
    const first = net.takeMessages(isApp('b'));
    net.stabilize();
    net.propose('a', 'two');
    net.stabilize();
    const last = net.raw('b').status().lastIndex;
    for (const m of first) net.deliver(m); // arrives late
    net.stabilize();
    expect(net.raw('b').status().lastIndex).toBe(last);
    expect(net.appliedData('b')).toEqual(['one', 'two']);
  });
});

describe('uncommitted cap', () => {
  it('proposals beyond maxUncommittedEntriesSize are rejected with ProposalOverloadedError until entries apply; empty ones always pass. Reference: etcd raft Config.MaxUncommittedEntriesSize', () => {
    const net = new Network(ABC, { maxUncommittedEntriesSize: 100 });
    net.elect('a');
    net.isolate('a'); // nothing can commit
    const a = net.raw('a');
    a.propose(new Uint8Array(60));
    expect(() => a.propose(new Uint8Array(60))).toThrow(ProposalOverloadedError);
    a.propose(new Uint8Array(40)); // exactly at the cap
    expect(() => a.propose(new Uint8Array(1))).toThrow(ProposalOverloadedError);
    a.propose(new Uint8Array(0)); // empty entries do not count
    net.heal();
    net.stabilize();
    net.tickAll();
    net.stabilize();
    expect(a.status().applied).toBe(a.status().lastIndex);
    a.propose(new Uint8Array(90)); // room again once applied
  });

  it('a single proposal larger than the cap is accepted when nothing is uncommitted (progress is always possible). Reference: etcd raft.go increaseUncommittedSize', () => {
    const net = new Network(['a'], { maxUncommittedEntriesSize: 10 });
    net.elect('a');
    net.raw('a').propose(new Uint8Array(50));
    net.stabilize();
    expect(net.node('a').appliedIndex).toBe(2);
  });
});
