import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { KcmError } from '@kcm/protocol';
import { NotLeaderError, TimeoutError, type RaftNode } from '@kcm/raft';
import { RaftMetaStore } from '../src/group/raft-meta-store';
import { CommandKind } from '../src/meta/commands';
import { MetaStateMachine } from '../src/meta/state-machine';

/** A node whose proposals and reads stay pending until the test settles them. */
class PendingNode extends EventEmitter {
  readonly proposals: { data: unknown; resolve: (v: unknown) => void; reject: (err: unknown) => void }[] = [];
  propose(bytes: Uint8Array): Promise<unknown> {
    const data: unknown = JSON.parse(new TextDecoder().decode(bytes));
    return new Promise((resolve, reject) => this.proposals.push({ data, resolve, reject }));
  }
  read(): Promise<void> {
    return new Promise(() => {});
  }
}

const cmd = { kind: CommandKind.JobProgress, at: 0, jobId: '1', step: 0, unitsDone: 1, unitsTotal: 2 } as const;

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('RaftMetaStore', () => {
  it('fails every pending proposal at once with NO_LEADER when leadership moves, through a single listener on the node', async () => {
    const node = new PendingNode();
    const store = new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine());
    const listenersBefore = node.listenerCount('leaderChange');
    const pending = Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? store.propose(cmd) : nextTurn().then(() => store.propose(cmd))));
    await nextTurn();
    await nextTurn();
    expect(node.proposals).toHaveLength(2); // the 25 of each turn in one entry
    expect(node.listenerCount('leaderChange')).toBe(listenersBefore);
    node.emit('leaderChange', null, 2);
    for (const p of pending) await expect(p).rejects.toSatisfy((err) => KcmError.is(err, 'NO_LEADER'));
  });

  it('resolves with the apply outcome, and a settled proposal is not woken by a later leader change', async () => {
    const node = new PendingNode();
    const store = new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine());
    const first = store.propose(cmd);
    await nextTurn();
    node.proposals[0].resolve({ ok: true, value: null });
    await expect(first).resolves.toEqual({ ok: true, value: null });
    const second = store.propose(cmd);
    await nextTurn();
    node.emit('leaderChange', '127.0.1.2:1', 3);
    await expect(second).rejects.toSatisfy((err) => KcmError.is(err, 'NO_LEADER'));
  });

  it('proposes the commands of one turn as one batch entry, in call order, each resolved with its own outcome', async () => {
    const node = new PendingNode();
    const store = new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine());
    const pending = [1, 2, 3].map((unitsDone) => store.propose({ ...cmd, unitsDone }));
    await nextTurn();
    expect(node.proposals).toHaveLength(1);
    expect(node.proposals[0].data).toMatchObject({ kind: CommandKind.CommandBatch, commands: [1, 2, 3].map((unitsDone) => ({ ...cmd, unitsDone })) });
    node.proposals[0].resolve([1, 2, 3].map((n) => ({ ok: true, value: n })));
    expect(await Promise.all(pending)).toEqual([1, 2, 3].map((n) => ({ ok: true, value: n })));

    // A command proposed alone is an entry of its own, as before batches existed.
    const alone = store.propose(cmd);
    await nextTurn();
    expect(node.proposals[1].data).toEqual(cmd);
    node.proposals[1].resolve({ ok: true, value: 'alone' });
    expect(await alone).toEqual({ ok: true, value: 'alone' });
  });

  it('fails every command of a batch whose entry fails, and keeps a batch under its byte limit', async () => {
    const node = new PendingNode();
    const store = new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine());
    const failing = [store.propose(cmd), store.propose(cmd)];
    await nextTurn();
    node.proposals[0].reject(new Error('disk gone'));
    for (const p of failing) await expect(p).rejects.toThrow('disk gone');

    // Three commands of ~100 KiB each: two fit under 256 KiB, the third goes in an entry of its own.
    const big = (n: number) => ({ ...cmd, jobId: String(n).repeat(100 * 1024) });
    void Promise.allSettled([1, 2, 3].map((n) => store.propose(big(n))));
    await nextTurn();
    expect(node.proposals.slice(1).map((p) => (p.data as { kind: number; commands?: unknown[] }).commands?.length ?? 1)).toEqual([2, 1]);
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

  it('reads again once the node announces a leader its core already knew, instead of failing with NO_LEADER', async () => {
    const node = new PendingNode();
    let rounds = 0;
    node.read = () => (++rounds === 1 ? Promise.reject(new NotLeaderError(null)) : Promise.resolve());
    const status = { leader: '127.0.1.2:1' as string | null };
    Object.assign(node, { status: () => status });
    const store = new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine());
    const barrier = store.linearizableRead();
    await nextTurn();
    expect(rounds).toBe(1); // waiting for the node to catch up
    node.emit('leaderChange', '127.0.1.2:1', 3);
    await expect(barrier).resolves.toBeUndefined();
    expect(rounds).toBe(2);
  });

  it('still fails with NO_LEADER at once when no leader is known anywhere, or when the announcement does not come in time', async () => {
    const node = new PendingNode();
    node.read = () => Promise.reject(new NotLeaderError(null));
    const status = { leader: null as string | null };
    Object.assign(node, { status: () => status });
    await expect(new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine()).linearizableRead()).rejects.toMatchObject({ errorName: 'NO_LEADER' });

    status.leader = '127.0.1.2:1';
    const started = Date.now();
    await expect(new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine(), 50).linearizableRead()).rejects.toMatchObject({ errorName: 'NO_LEADER' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });

  it('says a proposal that timed out has an unknown outcome, and a read that timed out only that it can be retried', async () => {
    const node = new PendingNode();
    node.read = () => Promise.reject(new TimeoutError('read', 10_000));
    node.propose = () => Promise.reject(new TimeoutError('proposal', 10_000));
    const store = new RaftMetaStore(node as unknown as RaftNode, new MetaStateMachine());
    await expect(store.propose(cmd)).rejects.toSatisfy((err) => KcmError.is(err, 'TIMEOUT') && /^outcome unknown: .*retry with the same request_id$/.test((err as Error).message));
    await expect(store.linearizableRead()).rejects.toSatisfy((err) => KcmError.is(err, 'TIMEOUT') && !/outcome|request_id/.test((err as Error).message));
  });
});
