// One deterministic simulated run: N nodes, a faulty network, clients, a fault schedule
// and the safety checker, all driven by one seed. Time is ticks; within a tick the order
// is fixed: faults, writes becoming durable, message delivery (each message stepped and
// its Ready handled at once, unless a write is still in flight), node ticks, clients. Invariants are checked after every node operation; the history is
// checked for linearizability at the end.

import type { PersistUpdate } from '../../src/core/storage';
import type { Entry, Message, NodeId, ReadState } from '../../src/core/types';
import { checkOperations, kvModel, formatReport, type Verdict } from '../linearizability';
import { Clients, type ClientOptions, type ClientStats } from './client';
import type { CrashStorage } from './crash-storage';
import { defaultFaultOptions, FaultInjector, type FaultOptions, type FaultTarget } from './faults';
import { SafetyChecker, type LogView, type Violation } from './invariants';
import type { AppliedCommand } from './kv-machine';
import { describeMessage, Network, calmNetwork } from './network';
import { Prng } from './prng';
import { SimNode, type NodeObserver, type NodeTuning, type OrderStats, type PlanReady, type RawNodeClass } from './sim-node';
import { drawRunProfile } from './profile';
import { Trace } from './trace';

export interface SimOptions {
  seed: number;
  /** The RawNode class under test (the real one, or a mutated copy). */
  RawNode: RawNodeClass;
  /** The driver's ordering decision under test: the production planReady unless a mutant's. */
  planReady?: PlanReady;
  nodes?: number; // default 3
  ticks?: number; // default 2000
  /** Overrides of the settings drawn for this seed (see profile.ts). */
  tuning?: Partial<NodeTuning>;
  clients?: Partial<ClientOptions>;
  faults?: Partial<FaultOptions>;
  /** Budget for the linearizability check; 'unknown' if exceeded. */
  lincheckTimeoutMs?: number;
  traceTail?: number;
  /** Check the leader commit rule directly (default true); see invariants.ts. */
  checkCommitRule?: boolean;
}

export interface SimStats extends ClientStats, OrderStats {
  ticks: number;
  committedEntries: number;
  leaderTerms: number;
  faults: number;
  messagesSent: number;
  messagesDropped: number;
  historyOps: number;
}

export interface SimResult {
  seed: number;
  /** No invariant violation, no core exception, and the history is linearizable ('unknown' counts as not ok). */
  ok: boolean;
  violations: Violation[];
  linearizability: Verdict | 'skipped';
  /** A readable explanation when the history is illegal. */
  linearizabilityReport?: string;
  /** The core (or the driver) threw: a crash of the code under test. */
  error?: string;
  stats: SimStats;
  traceHash: string;
  traceTail: string[];
}

// Writes are retried (deduplicated by the state machine) for a long time before the
// client gives up: unknown outcomes are real but rare, which keeps the histories cheap
// to check (each unknown write may be placed anywhere after its call).
const defaultClients: ClientOptions = {
  clients: 4,
  keys: ['a', 'b', 'c', 'd', 'e'],
  attemptTimeout: 40,
  opTimeout: 400,
  maxThinkTicks: 6,
  reconnectRate: 0.2,
};

/** Far above what a healthy run ever has in flight (a few hundred messages). */
const maxInFlight = 100_000;

export function runSimulation(options: SimOptions): SimResult {
  const sim = new Simulation(options);
  return sim.run();
}

class Simulation implements FaultTarget, NodeObserver {
  readonly nodeIds: NodeId[];
  readonly network: Network;
  private readonly nodes = new Map<NodeId, SimNode>();
  private readonly trace: Trace;
  private readonly checker: SafetyChecker;
  private readonly faultRng: Prng;
  private readonly faults: FaultInjector;
  private readonly clients: Clients;
  private readonly ticks: number;
  private readonly tuning: NodeTuning;
  private now = 0;
  private readonly lastRole = new Map<NodeId, string>();
  private tracedViolations = 0;
  /** What the checker reads of a node's log: what the node has written (its core's view). */
  private readonly logViews = new Map<NodeId, LogView>();

  constructor(private readonly options: SimOptions) {
    const root = new Prng(options.seed);
    this.checker = new SafetyChecker({ checkCommitRule: options.checkCommitRule ?? true });
    this.trace = new Trace(options.traceTail ?? 200);
    const n = options.nodes ?? 3;
    this.nodeIds = Array.from({ length: n }, (_, i) => `n${i + 1}`);
    this.ticks = options.ticks ?? 2000;
    const profile = drawRunProfile(root.fork());
    this.tuning = { ...profile.tuning, ...options.tuning };
    this.network = new Network(root.fork(), { ...calmNetwork }, this.trace);
    for (const id of this.nodeIds) {
      const node = new SimNode(id, this.nodeIds, options.RawNode, this.tuning, root.fork(), this, root.fork(), options.planReady);
      this.nodes.set(id, node);
      this.logViews.set(id, {
        termAt: (i) => {
          if (i < node.storage.firstIndex()) return 'compacted';
          return i <= node.storage.lastIndex() ? node.storage.term(i) : undefined;
        },
      });
    }
    this.faultRng = root.fork();
    const chaosUntil = Math.floor(this.ticks * 0.75);
    this.faults = new FaultInjector(this.faultRng, this, this.trace, {
      ...defaultFaultOptions(this.tuning.electionTick, chaosUntil),
      ...profile.faults,
      ...options.faults,
    });
    this.clients = new Clients(root.fork(), this.nodes, this.trace, {
      ...defaultClients,
      ...profile.clients,
      ...options.clients,
    });
    this.trace.record(0, `start seed=${options.seed} nodes=${n} ticks=${this.ticks} ${profile.flavour} ${JSON.stringify(this.tuning)}`);
  }

  run(): SimResult {
    let error: string | undefined;
    // Clients stop issuing a little before the end so most operations can finish.
    const lastIssue = this.ticks - Math.floor(this.ticks / 10);
    try {
      for (this.now = 1; this.now <= this.ticks && this.checker.ok; this.now++) {
        this.faults.step(this.now);
        // Writes due now become durable before this tick's messages arrive; messages that
        // arrive while a write is in flight step the core, as in the production driver.
        for (const node of this.nodes.values()) {
          if (node.live) this.operate(node, () => node.diskTick());
        }
        for (const m of this.network.takeDue(this.now)) this.deliver(m);
        for (const node of this.nodes.values()) {
          if (node.live) this.operate(node, () => node.tick());
        }
        this.clients.step(this.now, this.now < lastIssue);
        // A core (or a planted bug) that answers every message with more messages would
        // exhaust memory before any checker sees a violation: stop the run instead.
        if (this.network.inFlightCount > maxInFlight) {
          throw new Error(`message storm: ${this.network.inFlightCount} messages in flight at tick ${this.now}`);
        }
        if (this.now % 250 === 0) this.checkDurableLogs();
      }
      if (this.checker.ok) this.checkDurableLogs();
    } catch (err) {
      error = err instanceof Error ? `${err.name}: ${err.message}\n${err.stack ?? ''}` : String(err);
      this.trace.record(this.now, `exception ${error.split('\n')[0]}`);
    }
    this.clients.abandonAll(this.now);

    let linearizability: Verdict | 'skipped' = 'skipped';
    let linearizabilityReport: string | undefined;
    if (!error) {
      const history = this.clients.history.operations();
      const check = checkOperations(kvModel, history, { timeoutMs: this.options.lincheckTimeoutMs ?? 10_000 });
      linearizability = check.result;
      if (check.result === 'illegal') linearizabilityReport = formatReport(kvModel, check);
    }
    const ok = !error && this.checker.ok && linearizability === 'ok';
    const traceTail = this.trace.lastLines();
    return {
      seed: this.options.seed,
      ok,
      violations: [...this.checker.violations],
      linearizability,
      linearizabilityReport,
      error,
      stats: {
        ...this.clients.stats,
        ticks: Math.min(this.now, this.ticks),
        committedEntries: this.checker.committedCount,
        leaderTerms: this.checker.leadersSeen,
        faults: this.faults.faultsInjected,
        messagesSent: this.network.sent,
        messagesDropped: this.network.dropped,
        historyOps: this.clients.history.operations().length,
        ...this.orderStats(),
      },
      traceHash: this.trace.finish(),
      traceTail,
    };
  }

  private orderStats(): OrderStats {
    const sum: OrderStats = { sentBeforeDurable: 0, appliedDuringWrite: 0, steppedDuringWrite: 0, crashesInWindow: 0 };
    for (const node of this.nodes.values()) {
      for (const k of Object.keys(sum) as (keyof OrderStats)[]) sum[k] += node.orderStats[k];
    }
    return sum;
  }

  private deliver(m: Message): void {
    const node = this.nodes.get(m.to);
    if (!node || !node.live) {
      this.trace.record(this.now, `lost ${describeMessage(m)} (${node?.up ? 'paused' : 'down'})`);
      return;
    }
    this.operate(node, () => node.step(m));
  }

  /** Runs one operation on a node (its Ready included), then checks what can be checked. */
  private operate(node: SimNode, op: () => void): void {
    op();
    this.observe(node);
  }

  private observe(node: SimNode): void {
    if (!node.up) return;
    const role = `${node.role} t${node.term}`;
    if (this.lastRole.get(node.id) !== role) {
      this.lastRole.set(node.id, role);
      this.trace.record(this.now, `role ${node.id} ${role}`);
      if (node.role === 'leader') this.faults.onBecameLeader(node.id, this.now);
    }
    this.checker.observeRole(node.id, node.term, node.role === 'leader', this.logViews.get(node.id)!);
    while (this.tracedViolations < this.checker.violations.length) {
      this.trace.record(this.now, `violation ${JSON.stringify(this.checker.violations[this.tracedViolations++])}`);
    }
  }

  private checkDurableLogs(): void {
    const logs = new Map<NodeId, { first: number; entries: Entry[] }>();
    for (const node of this.nodes.values()) {
      const s = node.storage;
      logs.set(node.id, { first: s.durableFirstIndex(), entries: s.durableEntries(s.durableFirstIndex(), s.durableLastIndex() + 1) });
    }
    this.checker.checkLogsPairwise(logs);
  }

  // --- NodeObserver ---
  send(_from: NodeId, m: Message): void {
    this.network.send(this.now, m);
    if (m.type === 'VoteResp' && !m.reject) this.faults.onVoteGranted(m.from, this.now);
  }

  durable(node: NodeId, update: PersistUpdate, storage: CrashStorage): void {
    if (update.entries && update.entries.length > 0) {
      this.checker.observeDurableEntries(node, update.entries, (i) => storage.durableTerm(i));
    }
  }

  applied(node: NodeId, entry: Entry, command: AppliedCommand | null, term: number): void {
    this.trace.record(this.now, `apply ${node} ${entry.index}/${entry.term}${command ? ` c${command.command.clientId}s${command.command.seq}` : ''}`);
    this.checker.observeApplied(node, entry, term);
    if (command) this.clients.onApplied(node, command, this.now);
  }

  readState(node: NodeId, rs: ReadState): void {
    this.clients.onReadState(node, rs, this.now);
  }

  crashedAtSync(node: NodeId, lostWrites: number): void {
    this.trace.record(this.now, `crashed ${node} at sync, lost ${lostWrites} unsynced writes`);
    this.nodeWentDown(node);
  }

  leaderCommitted(node: NodeId, term: number, from: number, to: number): void {
    this.checker.observeLeaderCommit(node, term, from, to, this.logViews.get(node)!);
  }

  // --- FaultTarget ---
  isUp(id: NodeId): boolean {
    return this.nodes.get(id)!.up;
  }

  isPaused(id: NodeId): boolean {
    return this.nodes.get(id)!.paused;
  }

  currentLeader(): NodeId | null {
    let best: { id: NodeId; term: number } | null = null;
    for (const node of this.nodes.values()) {
      if (node.live && node.role === 'leader' && (!best || node.term > best.term)) best = { id: node.id, term: node.term };
    }
    return best?.id ?? null;
  }

  crash(id: NodeId, atNextSync: boolean): void {
    const node = this.nodes.get(id)!;
    if (atNextSync) {
      node.crashAtSync((unsynced) => this.faultRng.int(unsynced + 1));
      return;
    }
    const lost = node.storage.unsyncedWrites;
    node.crash(this.faultRng.int(lost + 1));
    this.trace.record(this.now, `crashed ${id} (${lost} unsynced writes at risk)`);
    this.nodeWentDown(id);
  }

  restart(id: NodeId): void {
    this.nodes.get(id)!.restart();
    this.trace.record(this.now, `restarted ${id}`);
    this.observe(this.nodes.get(id)!);
  }

  pause(id: NodeId): void {
    this.nodes.get(id)!.pause();
    this.checker.forgetNode(id);
  }

  resume(id: NodeId): void {
    const node = this.nodes.get(id)!;
    node.resume();
    this.clients.onNodeResumed(id, this.now);
    this.observe(node);
  }

  private nodeWentDown(id: NodeId): void {
    this.lastRole.delete(id);
    this.checker.forgetNode(id);
    this.clients.onNodeDown(id, this.now);
  }
}
