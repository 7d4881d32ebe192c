// The driver tests' harness: an in-process network, a MemoryStorage with slow writes and a
// last-writer-wins state machine, and helpers to start a group and wait for things.

import { MemoryStorage } from '../../src/core/storage';
import type { ImagePieces, PersistUpdate, Storage } from '../../src/core/storage';
import type { ConfState, Entry, Message, NodeId, SnapshotMeta } from '../../src/core/types';
import { RaftNode } from '../../src/node';
import type { DriverTransport } from '../../src/node';
import type { StateMachine } from '../../src/state-machine';

/** Stops every node in `running` (call from afterEach). */
export async function stopAll(): Promise<void> {
  await Promise.all(running.splice(0).map((n) => n.stop()));
}

/**
 * Delivers messages between in-process nodes on a later turn. Members can be cut off;
 * like a real transport, dropping a message reports the peer unreachable to the sender.
 */
export class LoopbackNetwork {
  private readonly handlers = new Map<NodeId, (m: Message) => void>();
  private readonly unreachable = new Map<NodeId, (peer: NodeId) => void>();
  readonly isolated = new Set<NodeId>();
  readonly sent: { from: NodeId; m: Message; syncedWritesInFlight: number }[] = [];
  /**
   * Messages of these types are lost without a word, the next one of each type only: like a
   * message written into a connection the peer already closed (a member SIGSTOPped past
   * the keepalive timeout), which the sender learns of only after the write.
   */
  readonly loseNext = new Set<Message['type']>();

  transport(id: NodeId, storage: CountingStorage): DriverTransport {
    return {
      start: async () => {},
      stop: async () => {
        this.handlers.delete(id);
      },
      onMessage: (h) => this.handlers.set(id, h),
      onUnreachable: (h) => this.unreachable.set(id, h),
      onSnapshotStatus: () => {},
      send: (msgs) => {
        for (const m of msgs) {
          this.sent.push({ from: id, m, syncedWritesInFlight: storage.syncedInFlight });
          if (this.isolated.has(m.from) || this.isolated.has(m.to)) {
            setImmediate(() => this.unreachable.get(id)?.(m.to));
            continue;
          }
          if (this.loseNext.delete(m.type)) continue;
          setImmediate(() => this.handlers.get(m.to)?.(m));
        }
      },
    };
  }
}

/** A MemoryStorage whose writes take a few ms, counting persists and synced ones. */
export class CountingStorage implements Storage {
  persists = 0;
  synced = 0;
  syncedInFlight = 0;
  protected constructor(protected readonly mem: MemoryStorage) {}

  static create(voters: string[]): CountingStorage {
    return new CountingStorage(MemoryStorage.bootstrap(voters));
  }

  async persist(update: PersistUpdate, sync: boolean): Promise<void> {
    this.persists++;
    if (sync) this.synced++;
    if (sync) this.syncedInFlight++;
    await new Promise((r) => setTimeout(r, 2));
    if (sync) this.syncedInFlight--;
    this.mem.persistNow(update);
  }
  createSnapshot(index: number, conf: ConfState, image: ImagePieces): Promise<void> {
    return this.mem.createSnapshot(index, conf, image);
  }
  async close(): Promise<void> {}
  /** Simulates a crash that lost the last commit-index write (it is not synced). */
  forgetCommitAfter(commit: number): void {
    this.mem.persistNow({ hardState: { ...this.mem.initialState().hardState, commit } });
  }
  initialState() {
    return this.mem.initialState();
  }
  firstIndex() {
    return this.mem.firstIndex();
  }
  lastIndex() {
    return this.mem.lastIndex();
  }
  term(i: number) {
    return this.mem.term(i);
  }
  entries(lo: number, hi: number, maxBytes?: number) {
    return this.mem.entries(lo, hi, maxBytes);
  }
  snapshot() {
    return this.mem.snapshot();
  }
}

/** Last-writer-wins register per key; results are the entry index. */
export class TestMachine implements StateMachine {
  readonly map = new Map<string, string>();
  applied = 0;
  restores = 0;
  readonly appliedIndexes: number[] = [];
  apply(entries: Entry[]): unknown[] {
    const out: unknown[] = [];
    for (const e of entries) {
      this.appliedIndexes.push(e.index);
      if (e.type === 'normal' && e.data.byteLength > 0) {
        const [k, v] = new TextDecoder().decode(e.data).split('=');
        this.map.set(k, v);
        out.push(e.index);
      } else out.push(undefined);
      this.applied = e.index;
    }
    return out;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(JSON.stringify([...this.map]));
  }
  restore(data: Uint8Array, meta: SnapshotMeta): void {
    this.restores++;
    this.map.clear();
    if (data.byteLength > 0) for (const [k, v] of JSON.parse(new TextDecoder().decode(data))) this.map.set(k, v);
    this.applied = meta.index;
  }
  appliedIndex(): number {
    return this.applied;
  }
}

export const ids = ['a', 'b', 'c'];
export const put = (k: string, v: string) => new TextEncoder().encode(`${k}=${v}`);
/** Every node started here, for afterEach to stop. */
export const running: RaftNode[] = [];

export interface Member {
  node: RaftNode;
  storage: CountingStorage;
  sm: TestMachine;
}

export async function startMember(
  net: LoopbackNetwork,
  id: NodeId,
  storage: CountingStorage,
  snapshotEntries = 0,
  sm = new TestMachine(),
): Promise<Member> {
  const node = await RaftNode.start({
    id,
    storage,
    stateMachine: sm,
    transport: net.transport(id, storage),
    tickMs: 5,
    electionTick: 10,
    snapshotEntries,
  });
  running.push(node);
  return { node, storage, sm };
}

export async function startGroup(snapshotEntries = 0): Promise<{ net: LoopbackNetwork; members: Member[] }> {
  const net = new LoopbackNetwork();
  const members = await Promise.all(ids.map((id) => startMember(net, id, CountingStorage.create(ids), snapshotEntries)));
  return { net, members };
}

export async function leaderOf(members: Member[], timeoutMs = 5_000): Promise<Member> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const leader = members.find((m) => m.node.status().role === 'leader');
    if (leader) return leader;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('no leader elected');
}

export async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

