// The driver (RaftNode) and the real core over GrpcTransport: what the transport is for.
// A group elects and replicates over gRPC, and a member that joins after the leader
// compacted its log is caught up with a snapshot streamed by the transport.

import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStorage } from '../../src/core/storage';
import type { Entry, NodeId, SnapshotMeta } from '../../src/core/types';
import { GrpcTransport } from '../../src/grpc-transport';
import { RaftNode } from '../../src/node';
import type { StateMachine } from '../../src/state-machine';
import { freePort, loopbackBlock, waitFor } from './helpers';
import { testCredentials } from './credentials';

/** Remembers every command it applied; its snapshot is the whole list. */
class CommandLog implements StateMachine {
  commands: string[] = [];
  private applied = 0;
  restoredFrom = 0;

  apply(entries: Entry[]): unknown[] {
    for (const e of entries) if (e.type === 'normal' && e.data.byteLength > 0) this.commands.push(new TextDecoder().decode(e.data));
    this.applied = entries.at(-1)?.index ?? this.applied;
    return entries.map(() => this.commands.length);
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(JSON.stringify(this.commands));
  }
  restore(data: Uint8Array, meta: SnapshotMeta): void {
    this.commands = JSON.parse(new TextDecoder().decode(data)) as string[];
    this.applied = meta.index;
    this.restoredFrom = meta.index;
  }
  appliedIndex(): number {
    return this.applied;
  }
}

interface Member {
  id: NodeId;
  node: RaftNode;
  sm: CommandLog;
  transport: GrpcTransport;
}

const members: Member[] = [];
afterEach(async () => {
  await Promise.all(members.splice(0).map((m) => m.node.stop()));
});

async function startMember(id: NodeId, address: string, book: Record<NodeId, string>, voters: NodeId[]): Promise<Member> {
  const transport = new GrpcTransport({ ...testCredentials, id, listen: address, peers: book });
  const sm = new CommandLog();
  const node = await RaftNode.start({
    id, storage: MemoryStorage.bootstrap(voters), transport, stateMachine: sm,
    tickMs: 20, electionTick: 10, heartbeatTick: 1, snapshotEntries: 50,
  });
  const member = { id, node, sm, transport };
  members.push(member);
  return member;
}

describe('Raft over GrpcTransport', () => {
  it('replicates a group over gRPC and catches up a late member with a streamed snapshot', async () => {
    const address = loopbackBlock();
    const ids = ['m1', 'm2', 'm3'];
    // Fixed ports are needed up front (the members' ids are known before they listen).
    const book: Record<NodeId, string> = {};
    for (const [i, id] of ids.entries()) book[id] = `${address(i + 1)}:${await freePort(address(i + 1))}`;

    const first = [await startMember('m1', book.m1, book, ids), await startMember('m2', book.m2, book, ids)];
    await waitFor('a leader among the first two', () => first.some((m) => m.node.status().role === 'leader'));
    const leader = first.find((m) => m.node.status().role === 'leader') as Member;

    for (let i = 0; i < 200; i++) await leader.node.propose(new TextEncoder().encode(`cmd-${i}`));
    const expected = Array.from({ length: 200 }, (_, i) => `cmd-${i}`);
    await waitFor('both members applied 200 commands', () => first.every((m) => m.sm.commands.length === 200));
    expect(first.map((m) => m.sm.commands)).toEqual([expected, expected]);

    // m3 starts empty; the leader's log no longer reaches back to index 1.
    const late = await startMember('m3', book.m3, book, ids);
    await waitFor('the late member caught up', () => late.sm.commands.length === 200, 20_000);
    expect(late.sm.commands).toEqual(expected);
    expect(late.sm.restoredFrom).toBeGreaterThan(0); // by snapshot, not by replaying the log
    const sent = leader.transport.stats().snapshotTransfers.filter((t) => t.peer === 'm3' && t.ok);
    expect(sent.length).toBeGreaterThanOrEqual(1);
  });
});
