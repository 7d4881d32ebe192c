import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { KcmError } from '@kcm/protocol';
import type { RaftNode } from '@kcm/raft';
import { RaftMetaStore } from '../src/raft-meta-store';
import { CommandKind } from '../src/meta/commands';
import { MetaStateMachine } from '../src/meta/state-machine';

/** A node whose proposals and reads stay pending until the test settles them. */
class PendingNode extends EventEmitter {
  readonly proposals: { resolve: (v: unknown) => void }[] = [];
  propose(): Promise<unknown> {
    return new Promise((resolve) => this.proposals.push({ resolve }));
  }
  read(): Promise<void> {
    return new Promise(() => {});
  }
}

const cmd = { kind: CommandKind.JobProgress, at: 0, jobId: '1', step: 0, unitsDone: 1, unitsTotal: 2 } as const;

describe('RaftMetaStore', () => {
  it('fails every pending proposal at once with NO_LEADER when leadership moves, through a single listener on the node', async () => {
    const node = new PendingNode();
    const store = new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine());
    const listenersBefore = node.listenerCount('leaderChange');
    const pending = Array.from({ length: 50 }, () => store.propose(cmd));
    expect(node.listenerCount('leaderChange')).toBe(listenersBefore);
    node.emit('leaderChange', null, 2);
    for (const p of pending) await expect(p).rejects.toSatisfy((err) => KcmError.is(err, 'NO_LEADER'));
  });

  it('resolves with the apply outcome, and a settled proposal is not woken by a later leader change', async () => {
    const node = new PendingNode();
    const store = new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine());
    const first = store.propose(cmd);
    node.proposals[0].resolve({ ok: true, value: null });
    await expect(first).resolves.toEqual({ ok: true, value: null });
    const second = store.propose(cmd);
    node.emit('leaderChange', '127.0.1.2:1', 3);
    await expect(second).rejects.toSatisfy((err) => KcmError.is(err, 'NO_LEADER'));
  });

  it('starts a fresh read round when leadership moves during a read barrier', async () => {
    const node = new PendingNode();
    let rounds = 0;
    node.read = () => {
      rounds++;
      return rounds === 1 ? new Promise(() => {}) : Promise.resolve();
    };
    const store = new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine());
    const barrier = store.linearizableRead();
    await Promise.resolve();
    node.emit('leaderChange', '127.0.1.2:1', 3);
    await expect(barrier).resolves.toBeUndefined();
    expect(rounds).toBe(2);
  });
});
