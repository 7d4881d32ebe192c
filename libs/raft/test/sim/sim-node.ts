// One simulated member: a RawNode (any class with the RawNode API, so mutated copies of
// the core can be plugged in), its crashable storage and its key-value state machine.
// It drives each Ready in the production driver's order, taken from the same planReady
// that node.ts uses (src/core/driver-order.ts), one pass at a time:
//   send App/Heartbeat -> write -> apply what was durable already -> ... the write is
//   in flight for 0..maxWriteTicks ticks, while the core keeps stepping messages, ticks
//   and proposals (they leave in the next Ready) ... -> durable -> send the rest ->
//   apply the rest -> advance -> next Ready.
// A crash inside that window tears the unsynced write with the early messages already
// on the network and the early applies already seen by clients: the case the production
// order must keep safe.
// A crash throws away the RawNode and the state machine; a restart rebuilds both from
// what survived in storage (the state machine from the snapshot, then the core replays
// the committed log above it).

import { planReady as productionPlan, type ReadyPlan } from '../../src/core/driver-order';
import type { LogReader, PersistUpdate } from '../../src/core/storage';
import { imageInMemory, type ConfState, type Entry, type HardState, type Message, type NodeId, type RaftConfig, type ReadState, type Ready, type Role } from '../../src/core/types';
import { CrashStorage } from './crash-storage';
import { KvMachine, type AppliedCommand } from './kv-machine';
import type { Prng } from './prng';

/** The part of the RawNode API the simulator drives. */
export interface RawNodeLike {
  tick(): void;
  campaign(): void;
  propose(data: Uint8Array): { index: number; term: number };
  step(m: Message): void;
  readIndex(ctx: Uint8Array): void;
  hasReady(): boolean;
  ready(): Ready;
  advance(rd: Ready): void;
  status(): { term: number; commit: number; leader: NodeId | null; role: Role; conf?: ConfState };
}

export type RawNodeClass = new (config: RaftConfig, storage: LogReader) => RawNodeLike;

/** The driver's ordering decision: the real planReady, or a mutated copy (mutants.ts). */
export type PlanReady = typeof productionPlan;

/** Where a node reports what it did, so the cluster can check and trace it. */
export interface NodeObserver {
  send(from: NodeId, m: Message): void;
  durable(node: NodeId, update: PersistUpdate, storage: CrashStorage): void;
  applied(node: NodeId, entry: Entry, command: AppliedCommand | null, term: number): void;
  readState(node: NodeId, rs: ReadState): void;
  crashedAtSync(node: NodeId, lostWrites: number): void;
  /** A leader's Ready moved the commit index (checked against the commit rule). */
  leaderCommitted(node: NodeId, term: number, from: number, to: number): void;
}

export interface NodeTuning {
  electionTick: number;
  heartbeatTick: number;
  maxSizePerMsg: number;
  maxInflightMsgs: number;
  /** Take a state machine snapshot and compact the log every this many applied entries. */
  compactEvery: number;
  preVote: boolean;
  checkQuorum: boolean;
  lazyCommitBroadcast: boolean;
  /** A synced write stays in flight for 0..maxWriteTicks ticks (drawn per write); 0 = durable before anything else happens here. */
  maxWriteTicks: number;
}

/**
 * What this node did in the production order that the textbook order never does, so a
 * soak can show it covered the window between "write started" and "write durable".
 */
export interface OrderStats {
  /** Messages sent while this node's own write of the same Ready was not durable. */
  sentBeforeDurable: number;
  /** Committed entries applied while a write was in flight. */
  appliedDuringWrite: number;
  /** Ticks, messages and client calls stepped into the core while a write was in flight. */
  steppedDuringWrite: number;
  /** Power failures with a write in flight whose pass had already sent messages. */
  crashesInWindow: number;
}

/** The pass whose write is in flight: nothing else is taken from the core until it is durable. */
interface Pass {
  rd: Ready;
  plan: ReadyPlan;
  ticksLeft: number;
}

export class SimNode {
  readonly storage: CrashStorage;
  private raft: RawNodeLike | null = null;
  private machine: KvMachine = new KvMachine();
  private _paused = false;
  private _role: Role = 'follower';
  private _term = 0;
  private _commit = 0;
  /** Set by crashAtSync: how many of the unsynced writes survive, given how many there are. */
  private crashAtNextSync: ((unsynced: number) => number) | null = null;
  private pass: Pass | null = null;
  readonly orderStats: OrderStats = { sentBeforeDurable: 0, appliedDuringWrite: 0, steppedDuringWrite: 0, crashesInWindow: 0 };
  /** A commit-only hard state the driver has not written yet (it rides with the next write). */
  private unwrittenHardState: HardState | undefined;

  constructor(
    readonly id: NodeId,
    voters: NodeId[],
    private readonly RawNode: RawNodeClass,
    private readonly tuning: NodeTuning,
    /** Election jitter: the node's own stream, kept across restarts. */
    private readonly rng: Prng,
    private readonly observer: NodeObserver,
    /** Write latencies: the node's own stream, kept across restarts. */
    private readonly diskRng: Prng,
    private readonly planReady: PlanReady = productionPlan,
  ) {
    this.storage = new CrashStorage(voters, (update) => observer.durable(id, update, this.storage));
    this.start();
  }

  get up(): boolean {
    return this.raft !== null;
  }

  get paused(): boolean {
    return this._paused;
  }

  /** Running and not paused: it ticks, receives messages and serves clients. */
  get live(): boolean {
    return this.raft !== null && !this._paused;
  }

  /** Role and term as of the last Ready handled (a role change always produces a Ready). */
  get role(): Role {
    return this._role;
  }

  get term(): number {
    return this._term;
  }

  get kv(): KvMachine {
    return this.machine;
  }

  /** The running core; throws if the node is down (callers check `live` first). */
  get core(): RawNodeLike {
    if (!this.raft) throw new Error(`node ${this.id} is down`);
    return this.raft;
  }

  tick(): void {
    this.countStepDuringWrite();
    this.core.tick();
    this.drainReady();
  }

  step(m: Message): void {
    this.countStepDuringWrite();
    this.core.step(m);
    this.drainReady();
  }

  /** Runs `action` on the core (propose, readIndex, ...) and then handles the resulting Ready. */
  act<T>(action: (core: RawNodeLike) => T): T {
    this.countStepDuringWrite();
    try {
      return action(this.core);
    } finally {
      if (this.raft) this.drainReady();
    }
  }

  /** Power loss now: unsynced writes are torn (a random prefix survives). */
  crash(keepUnsynced: number): void {
    this.countCrashInWindow();
    this.storage.crash(keepUnsynced);
    this.stop();
  }

  /**
   * Power loss at the next sync point: the write in flight (or the next one) never
   * becomes durable; `keepUnsynced(n)` says how many of the n unsynced writes survive.
   * The pass's early messages and applies have already happened by then.
   */
  crashAtSync(keepUnsynced: (unsynced: number) => number): void {
    this.crashAtNextSync = keepUnsynced;
  }

  /**
   * The disk's clock, once per tick while the node runs: a write in flight that is due
   * becomes durable, its pass finishes, and the next Readies are handled. A paused
   * process sees nothing complete.
   */
  diskTick(): void {
    const pass = this.pass;
    if (!pass || !this.raft || this._paused) return;
    if (--pass.ticksLeft > 0) return;
    this.finishPass();
    this.drainReady();
  }

  restart(): void {
    if (this.raft) throw new Error(`node ${this.id} is already running`);
    this.start();
  }

  pause(): void {
    this._paused = true;
  }

  resume(): void {
    this._paused = false;
  }

  private start(): void {
    const snap = this.storage.snapshot();
    this.machine = KvMachine.restore(imageInMemory(snap.data), snap.meta.index);
    this.crashAtNextSync = null;
    this.pass = null;
    this.unwrittenHardState = undefined;
    this._paused = false;
    const config: RaftConfig = {
      id: this.id,
      electionTick: this.tuning.electionTick,
      heartbeatTick: this.tuning.heartbeatTick,
      random: () => this.rng.float(),
      preVote: this.tuning.preVote,
      checkQuorum: this.tuning.checkQuorum,
      lazyCommitBroadcast: this.tuning.lazyCommitBroadcast,
      maxSizePerMsg: this.tuning.maxSizePerMsg,
      maxInflightMsgs: this.tuning.maxInflightMsgs,
      applied: snap.meta.index,
    };
    this.raft = new this.RawNode(config, this.storage);
    const st = this.raft.status();
    this._role = st.role;
    this._term = st.term;
    this._commit = st.commit;
  }

  private stop(): void {
    this.raft = null;
    this.crashAtNextSync = null;
    this.pass = null;
    this.unwrittenHardState = undefined;
    this._paused = false;
  }

  /** Handles Readies until the core has none or a pass waits for its write. */
  private drainReady(): void {
    // A core that never runs out of Readies would hang the run; fail it instead.
    for (let rounds = 0; this.raft && !this.pass && this.raft.hasReady(); rounds++) {
      if (rounds >= 1000) throw new Error(`node ${this.id}: still has a Ready after ${rounds} rounds (livelock)`);
      this.startPass(this.raft.ready());
    }
  }

  /** Everything the driver does before the write is durable; finishes at once when nothing waits. */
  private startPass(rd: Ready): void {
    const plan = this.planReady(rd, this.unwrittenHardState);
    this.unwrittenHardState = plan.unwrittenHardState;
    if (rd.softState) this._role = rd.softState.role;
    if (rd.hardState) {
      this._term = rd.hardState.term;
      if (rd.hardState.commit !== this._commit && this._role === 'leader') {
        this.observer.leaderCommitted(this.id, this._term, this._commit, rd.hardState.commit);
      }
      this._commit = rd.hardState.commit;
    }
    for (const m of plan.sendBeforeWrite) this.observer.send(this.id, m);
    if (plan.write) this.storage.write(plan.write);
    if (plan.applyDuringWrite) this.applyEntries(rd.committedEntries);
    if (plan.write) {
      this.orderStats.sentBeforeDurable += plan.sendBeforeWrite.length;
      if (plan.applyDuringWrite) this.orderStats.appliedDuringWrite += rd.committedEntries.length;
    }
    this.pass = { rd, plan, ticksLeft: plan.write ? this.diskRng.int(this.tuning.maxWriteTicks + 1) : 0 };
    if (this.pass.ticksLeft === 0) this.finishPass();
  }

  /** The write is durable (or the power fails instead): the rest of the pass. */
  private finishPass(): void {
    const { rd, plan } = this.pass!;
    if (plan.write) {
      if (this.crashAtNextSync) {
        this.countCrashInWindow();
        const { lost } = this.storage.crash(this.crashAtNextSync(this.storage.unsyncedWrites));
        this.stop();
        this.observer.crashedAtSync(this.id, lost);
        return;
      }
      this.storage.sync();
    }
    this.pass = null;
    for (const m of plan.sendAfterWrite) this.observer.send(this.id, m);
    if (rd.snapshot) this.machine = KvMachine.restore(imageInMemory(rd.snapshot.data), rd.snapshot.meta.index);
    if (!plan.applyDuringWrite) this.applyEntries(rd.committedEntries);
    for (const rs of rd.readStates) this.observer.readState(this.id, rs);
    this.raft!.advance(rd);
    this.maybeCompact();
  }

  private countStepDuringWrite(): void {
    if (this.pass) this.orderStats.steppedDuringWrite++;
  }

  private countCrashInWindow(): void {
    if (this.pass?.plan.write && this.pass.plan.sendBeforeWrite.length > 0) this.orderStats.crashesInWindow++;
  }

  private applyEntries(entries: Entry[]): void {
    for (const e of entries) {
      const command = this.machine.apply(e);
      this.observer.applied(this.id, e, command, this._term);
    }
  }

  private maybeCompact(): void {
    const applied = this.machine.applied;
    const snapIndex = this.storage.snapshot().meta.index;
    if (applied - snapIndex < this.tuning.compactEvery) return;
    const conf = this.core.status().conf ?? this.storage.initialState().confState;
    this.storage.compact(applied, conf, this.machine.snapshot());
  }
}
