// Simulated clients. Each has one operation at a time: put, append, or a linearizable
// get (ReadIndex, then read the local state machine once it has applied that index).
// A client sends to the node it believes leads, follows NotLeader hints, and retries
// on another node after an attempt timeout. Retried writes keep their (client, seq), so
// the state machine applies them at most once. An operation that runs out of time is
// recorded with unknown outcome (a write may have happened or not); a get that never
// returned had no effect and is left out of the history.

import type { NotLeaderError } from '../../src/core/errors';
import type { NodeId, ReadState } from '../../src/core/types';
import { HistoryRecorder, type KvInput, type KvOutput } from '../linearizability';
import { encodeCommand, type AppliedCommand } from './kv-machine';
import type { Prng } from './prng';
import type { SimNode } from './sim-node';
import type { Trace } from './trace';

export interface ClientOptions {
  clients: number;
  keys: string[];
  /** Ticks an attempt on one node may take before the client tries another. */
  attemptTimeout: number;
  /** Ticks after which the operation is given up (unknown outcome for a write). */
  opTimeout: number;
  /** Pause between operations, uniform in [0, maxThinkTicks]. */
  maxThinkTicks: number;
  /**
   * Probability that a client starts an operation on a random node instead of its
   * leader guess (a reconnect through a load balancer). This is what sends reads to
   * deposed leaders and followers in a minority, where stale reads would show.
   */
  reconnectRate: number;
}

interface Attempt {
  node: NodeId;
  /** False while the node is paused: the request sits in its socket until it resumes. */
  submitted: boolean;
  deadline: number;
  readCtx?: string;
  readIndex?: number;
}

interface PendingOp {
  input: KvInput;
  seq: number;
  deadline: number;
  attempt: Attempt | null;
  attempts: number;
  retryAt: number;
}

interface ClientState {
  id: number;
  seq: number;
  leaderGuess: NodeId;
  op: PendingOp | null;
  nextOpAt: number;
}

export interface ClientStats {
  writesOk: number;
  readsOk: number;
  unknown: number;
  readsAbandoned: number;
}

export class Clients {
  readonly history = new HistoryRecorder<KvInput, KvOutput>();
  readonly stats: ClientStats = { writesOk: 0, readsOk: 0, unknown: 0, readsAbandoned: 0 };
  private readonly clients: ClientState[];
  private readonly nodeIds: NodeId[];

  constructor(
    private readonly rng: Prng,
    private readonly nodes: Map<NodeId, SimNode>,
    private readonly trace: Trace,
    private readonly opts: ClientOptions,
  ) {
    this.nodeIds = [...nodes.keys()];
    this.clients = Array.from({ length: opts.clients }, (_, i) => ({
      id: i + 1,
      seq: 0,
      leaderGuess: rng.pick(this.nodeIds),
      op: null,
      nextOpAt: rng.range(0, opts.maxThinkTicks),
    }));
  }

  get idle(): boolean {
    return this.clients.every((c) => c.op === null);
  }

  /** Once per tick: start operations (unless `issueNew` is false), time out, retry, finish reads. */
  step(now: number, issueNew: boolean): void {
    for (const c of this.clients) {
      if (!c.op) {
        if (issueNew && now >= c.nextOpAt) this.startOperation(c, now);
        continue;
      }
      const op = c.op;
      if (op.attempt?.readIndex !== undefined) this.tryFinishRead(c, now);
      if (!c.op) continue;
      if (now >= op.deadline) {
        this.giveUp(c, now);
        continue;
      }
      if (op.attempt && now >= op.attempt.deadline) {
        this.trace.record(now, `client ${c.id} attempt timeout on ${op.attempt.node}`);
        op.attempt = null;
        c.leaderGuess = this.otherNode(c.leaderGuess);
        op.retryAt = now;
      }
      if (!op.attempt && now >= op.retryAt) this.startAttempt(c, now);
      else if (op.attempt && !op.attempt.submitted) this.submit(c, now);
    }
  }

  /** A node's state machine applied a command: the client attached to that node hears of it. */
  onApplied(node: NodeId, applied: AppliedCommand, now: number): void {
    const c = this.clients[applied.command.clientId - 1];
    const op = c?.op;
    if (!op || op.input.op === 'get' || op.seq !== applied.command.seq) return;
    if (op.attempt?.node !== node || !op.attempt.submitted) return;
    this.history.ok(c.id, { value: applied.result });
    this.stats.writesOk++;
    this.trace.record(now, `client ${c.id} ok ${op.input.op} ${op.input.key} seq${op.seq} via ${node}`);
    this.finish(c, now);
  }

  onReadState(node: NodeId, rs: ReadState, now: number): void {
    const ctx = new TextDecoder().decode(rs.requestCtx);
    for (const c of this.clients) {
      const a = c.op?.attempt;
      if (a && a.node === node && a.readCtx === ctx && a.readIndex === undefined) {
        a.readIndex = rs.index;
        this.trace.record(now, `client ${c.id} read index ${rs.index} from ${node}`);
        this.tryFinishRead(c, now);
      }
    }
  }

  /** The node crashed: the connection breaks, the outcome of a submitted write is unknown, so retry. */
  onNodeDown(node: NodeId, now: number): void {
    for (const c of this.clients) {
      if (c.op?.attempt?.node !== node) continue;
      c.op.attempt = null;
      c.op.retryAt = now + 1;
      c.leaderGuess = this.otherNode(node);
    }
  }

  /** A paused node resumed: requests buffered in its socket reach it first. */
  onNodeResumed(node: NodeId, now: number): void {
    for (const c of this.clients) {
      if (c.op?.attempt?.node === node && !c.op.attempt.submitted) this.submit(c, now);
    }
  }

  /** End of the run: whatever is still pending has an unknown outcome. */
  abandonAll(now: number): void {
    for (const c of this.clients) if (c.op) this.giveUp(c, now);
  }

  private startOperation(c: ClientState, now: number): void {
    if (this.rng.chance(this.opts.reconnectRate)) c.leaderGuess = this.rng.pick(this.nodeIds);
    const key = this.rng.pick(this.opts.keys);
    const roll = this.rng.float();
    const seq = ++c.seq;
    const input: KvInput =
      roll < 0.4
        ? { op: 'get', key, value: '' }
        : roll < 0.7
          ? { op: 'put', key, value: `${c.id}.${seq}` }
          : { op: 'append', key, value: `[${c.id}.${seq}]` };
    this.history.invoke(c.id, input);
    c.op = { input, seq, deadline: now + this.opts.opTimeout, attempt: null, attempts: 0, retryAt: now };
    this.trace.record(now, `client ${c.id} invoke ${input.op} ${key} ${input.value} seq${seq}`);
    this.startAttempt(c, now);
  }

  private startAttempt(c: ClientState, now: number): void {
    const op = c.op!;
    const node = this.nodes.get(c.leaderGuess)!;
    if (!node.up) {
      // Connection refused: nothing was sent, try elsewhere next tick.
      c.leaderGuess = this.otherNode(node.id);
      op.retryAt = now + 1;
      return;
    }
    op.attempts++;
    op.attempt = { node: node.id, submitted: false, deadline: now + this.opts.attemptTimeout };
    if (op.input.op === 'get') op.attempt.readCtx = `r${c.id}.${op.seq}.${op.attempts}`;
    this.submit(c, now);
  }

  private submit(c: ClientState, now: number): void {
    const op = c.op!;
    const attempt = op.attempt!;
    const node = this.nodes.get(attempt.node)!;
    if (!node.live) return; // paused: stays buffered until it resumes (or the attempt times out)
    attempt.submitted = true;
    if (op.input.op === 'get') {
      this.trace.record(now, `client ${c.id} readIndex ${attempt.readCtx} at ${node.id}`);
      node.act((core) => core.readIndex(new TextEncoder().encode(attempt.readCtx)));
      return;
    }
    const cmd = { clientId: c.id, seq: op.seq, op: op.input.op, key: op.input.key, value: op.input.value };
    try {
      const at = node.act((core) => core.propose(encodeCommand(cmd)));
      this.trace.record(now, `client ${c.id} proposed seq${op.seq} at ${node.id} as ${at.index}/${at.term}`);
    } catch (err) {
      // Refused before reaching the log: definitely not proposed here, so retry freely.
      // Branch on `code`, not the class: a mutated copy of the core has its own classes.
      op.attempt = null;
      const code = (err as { code?: string }).code;
      if (code === 'NOT_LEADER') {
        const hint = (err as NotLeaderError).leader;
        c.leaderGuess = hint ?? this.otherNode(node.id);
        // No leader known anywhere (an election is on): back off instead of spinning.
        op.retryAt = now + (hint ? 1 : 3);
      } else if (code === 'DROPPED' || code === 'OVERLOADED') {
        op.retryAt = now + 2;
      } else {
        throw err;
      }
      this.trace.record(now, `client ${c.id} refused by ${node.id}: ${(err as Error).name}`);
    }
  }

  private tryFinishRead(c: ClientState, now: number): void {
    const attempt = c.op!.attempt!;
    const node = this.nodes.get(attempt.node)!;
    if (!node.live || node.kv.applied < attempt.readIndex!) return;
    const value = node.kv.get(c.op!.input.key);
    this.history.ok(c.id, { value });
    this.stats.readsOk++;
    this.trace.record(now, `client ${c.id} ok get ${c.op!.input.key}=${value} via ${node.id} at ${attempt.readIndex}`);
    this.finish(c, now);
  }

  private giveUp(c: ClientState, now: number): void {
    const op = c.op!;
    if (op.input.op === 'get') {
      this.history.fail(c.id);
      this.stats.readsAbandoned++;
    } else {
      this.history.info(c.id);
      this.stats.unknown++;
    }
    this.trace.record(now, `client ${c.id} gave up ${op.input.op} seq${op.seq}`);
    this.finish(c, now);
  }

  private finish(c: ClientState, now: number): void {
    c.op = null;
    c.nextOpAt = now + this.rng.range(0, this.opts.maxThinkTicks);
  }

  /** A random node other than `avoid` (any node when avoid is null). */
  private otherNode(avoid: NodeId | null): NodeId {
    const choices = this.nodeIds.filter((id) => id !== avoid);
    return this.rng.pick(choices.length > 0 ? choices : this.nodeIds);
  }
}
