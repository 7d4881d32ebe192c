// A tiny hand-driven network for the core's tests: N RawNodes over MemoryStorage and an
// in-test message queue. Each Ready is persisted with storage.persistNow before its
// messages enter the queue, as the real driver does. Nothing happens unless the test
// says so: tick, deliver, drop links, crash and restart.

import { RawNode } from '../../src/core/raw-node';
import { MemoryStorage } from '../../src/core/storage';
import type { Entry, Message, NodeId, RaftConfig, ReadState, Ready } from '../../src/core/types';

/** Elections are reproducible: every node draws from a seeded PRNG. */
import { seededRandom } from '../seeded-random';
export { seededRandom };

export interface TestNode {
  id: NodeId;
  raw: RawNode;
  storage: MemoryStorage;
  config: RaftConfig;
  /** Entries applied, in order (the test's state machine; survives crashes like a durable one). */
  applied: Entry[];
  appliedIndex: number;
  readStates: ReadState[];
  /** Every Ready this node produced (for tests that inspect them). */
  readies: Ready[];
  down: boolean;
}

export type ConfigOverrides = Partial<Omit<RaftConfig, 'id'>>;

export class Network {
  readonly nodes = new Map<NodeId, TestNode>();
  /** Messages sent and not yet delivered, in send order. */
  queue: Message[] = [];
  private readonly cut = new Set<string>();
  /** Optional hook to drop or rewrite messages as they are sent; return false to drop. */
  filter: ((m: Message) => boolean) | null = null;

  constructor(ids: NodeId[], overrides: ConfigOverrides = {}, learners: NodeId[] = []) {
    let seed = 1;
    for (const id of ids) this.addNode(id, MemoryStorage.bootstrap(ids, learners), overrides, seed++);
    for (const id of learners) this.addNode(id, MemoryStorage.bootstrap(ids, learners), overrides, seed++);
  }

  /**
   * A group whose nodes start with the given logs (entry terms, index 1 first), e.g.
   * `{ a: [1, 1, 2], b: [1, 1] }`, and term = their last term unless `terms` says more.
   */
  static withLogs(logs: Record<NodeId, number[]>, overrides: ConfigOverrides = {}, terms: Record<NodeId, number> = {}): Network {
    const ids = Object.keys(logs);
    const net = new Network([], overrides);
    let seed = 1;
    for (const id of ids) {
      const storage = MemoryStorage.bootstrap(ids);
      const entries = logs[id].map((term, i): Entry => ({ term, index: i + 1, type: 'normal', data: bytes(`${id}@${i + 1}t${term}`) }));
      const lastTerm = entries.length > 0 ? entries[entries.length - 1].term : 0;
      storage.persistNow({ entries, hardState: { term: Math.max(lastTerm, terms[id] ?? 0), vote: null, commit: 0 } });
      net.addNode(id, storage, overrides, seed++);
    }
    return net;
  }

  /** Adds a node with its own storage (e.g. an empty one for a node joining later). */
  addNode(id: NodeId, storage: MemoryStorage, overrides: ConfigOverrides = {}, seed = 100 + this.nodes.size): TestNode {
    // Eager commit broadcast unless a test asks otherwise: the paper's scenarios expect
    // followers to learn a commit without a heartbeat (lazy mode has its own tests).
    const config: RaftConfig = {
      id, electionTick: 10, heartbeatTick: 1, random: seededRandom(seed), lazyCommitBroadcast: false, ...overrides,
    };
    if (this.nodes.has(id)) throw new Error(`node ${id} exists`);
    const node: TestNode = {
      id, raw: new RawNode(config, storage), storage, config, applied: [], appliedIndex: 0, readStates: [], readies: [], down: false,
    };
    this.nodes.set(id, node);
    return node;
  }

  node(id: NodeId): TestNode {
    const n = this.nodes.get(id);
    if (!n) throw new Error(`no node ${id}`);
    return n;
  }

  raw(id: NodeId): RawNode {
    return this.node(id).raw;
  }

  // ---- faults -----------------------------------------------------------------------

  /** Drops every message between a and b, both ways. */
  dropBetween(a: NodeId, b: NodeId): void {
    this.cut.add(`${a}|${b}`);
    this.cut.add(`${b}|${a}`);
  }

  /** Cuts `id` off from every other node. */
  isolate(id: NodeId): void {
    for (const other of this.nodes.keys()) if (other !== id) this.dropBetween(id, other);
  }

  /** Splits the nodes into groups that cannot talk to each other. */
  partition(...groups: NodeId[][]): void {
    for (const g of groups) for (const h of groups) if (g !== h) for (const a of g) for (const b of h) this.cut.add(`${a}|${b}`);
  }

  heal(): void {
    this.cut.clear();
  }

  /** The node stops; only what it persisted survives. */
  crash(id: NodeId): void {
    this.node(id).down = true;
    this.queue = this.queue.filter((m) => m.to !== id && m.from !== id);
  }

  /** Rebuilds the node's RawNode from its storage (its state machine kept what it applied). */
  restart(id: NodeId): void {
    const n = this.node(id);
    n.config = { ...n.config, applied: n.appliedIndex };
    n.raw = new RawNode(n.config, n.storage);
    n.down = false;
  }

  // ---- driving ----------------------------------------------------------------------

  tick(id: NodeId, times = 1): void {
    for (let i = 0; i < times; i++) this.node(id).raw.tick();
  }

  tickAll(times = 1): void {
    for (let i = 0; i < times; i++) for (const n of this.nodes.values()) if (!n.down) n.raw.tick();
  }

  /** Processes one node's Ready: persist, enqueue its messages, apply, advance. */
  processReady(id: NodeId): boolean {
    const n = this.node(id);
    if (n.down || !n.raw.hasReady()) return false;
    const rd = n.raw.ready();
    n.readies.push(rd);
    n.storage.persistNow({ hardState: rd.hardState, entries: rd.entries, snapshot: rd.snapshot });
    for (const m of rd.messages) this.send(m);
    if (rd.snapshot) {
      n.applied = [];
      n.appliedIndex = rd.snapshot.meta.index;
    }
    for (const e of rd.committedEntries) {
      if (e.index !== n.appliedIndex + 1) throw new Error(`${id} applied ${e.index} after ${n.appliedIndex}`);
      n.applied.push(e);
      n.appliedIndex = e.index;
    }
    n.readStates.push(...rd.readStates);
    n.raw.advance(rd);
    return true;
  }

  processAllReadies(): boolean {
    let any = false;
    for (const id of this.nodes.keys()) if (this.processReady(id)) any = true;
    return any;
  }

  private send(m: Message): void {
    if (this.cut.has(`${m.from}|${m.to}`)) return;
    const to = this.nodes.get(m.to);
    if (!to || to.down) return;
    if (this.filter && !this.filter(m)) return;
    this.queue.push(m);
  }

  /** Takes the queued messages out (for tests that reorder, duplicate or inspect them). */
  takeMessages(pred: (m: Message) => boolean = () => true): Message[] {
    const taken = this.queue.filter(pred);
    this.queue = this.queue.filter((m) => !pred(m));
    return taken;
  }

  deliver(m: Message): void {
    const to = this.nodes.get(m.to);
    if (to && !to.down) to.raw.step(m);
  }

  /** Processes readies and delivers messages until the network is quiet. */
  stabilize(maxRounds = 1000): void {
    for (let round = 0; round < maxRounds; round++) {
      const worked = this.processAllReadies();
      if (this.queue.length === 0 && !worked) return;
      const batch = this.queue;
      this.queue = [];
      for (const m of batch) this.deliver(m);
    }
    throw new Error('network did not stabilize');
  }

  /** `rounds` times: tick every up node once, then run the network until quiet. */
  runFor(rounds: number): void {
    for (let i = 0; i < rounds; i++) {
      this.tickAll();
      this.stabilize();
    }
  }

  /**
   * Lets the leader lease of `ids` run out (check-quorum): they hear nothing for an
   * election timeout. Use with SLOW_ELECTIONS so they do not campaign themselves meanwhile.
   */
  expireLease(ids: NodeId[]): void {
    for (const id of ids) this.tick(id, this.node(id).config.electionTick);
  }

  /** Makes `id` campaign and runs the network until quiet. */
  elect(id: NodeId): void {
    this.raw(id).campaign();
    this.stabilize();
  }

  /** The node every up node agrees is leader, if it believes so itself. */
  leader(): NodeId | null {
    let best: { id: NodeId; term: number } | null = null;
    for (const n of this.nodes.values()) {
      if (n.down) continue;
      const s = n.raw.status();
      if (s.role === 'leader' && (!best || s.term > best.term)) best = { id: n.id, term: s.term };
    }
    return best?.id ?? null;
  }

  propose(id: NodeId, text: string): { index: number; term: number } {
    return this.raw(id).propose(new TextEncoder().encode(text));
  }

  /** The non-empty payloads a node applied, as text. */
  appliedData(id: NodeId): string[] {
    return this.node(id).applied.filter((e) => e.type === 'normal' && e.data.byteLength > 0).map((e) => new TextDecoder().decode(e.data));
  }
}

/** Every election timeout at its longest (2 * electionTick - 1): nobody campaigns on its own while a lease runs out. */
export const SLOW_ELECTIONS: ConfigOverrides = { random: () => 0.999 };

export const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
export const text = (b: Uint8Array): string => new TextDecoder().decode(b);
