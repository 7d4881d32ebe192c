// One simulated member: a RawNode (any class with the RawNode API, so mutated copies of
// the core can be plugged in), its crashable storage and its key-value state machine.
// It runs the driver loop the contract prescribes, one Ready at a time:
//   write -> sync (if mustSync) -> send -> apply -> advance.
// A crash throws away the RawNode and the state machine; a restart rebuilds both from
// what survived in storage (the state machine from the snapshot, then the core replays
// the committed log above it).

import type { LogReader, PersistUpdate } from '../../src/core/storage';
import type { ConfState, Entry, Message, NodeId, RaftConfig, ReadState, Ready, Role } from '../../src/core/types';
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

  constructor(
    readonly id: NodeId,
    voters: NodeId[],
    private readonly RawNode: RawNodeClass,
    private readonly tuning: NodeTuning,
    /** Election jitter: the node's own stream, kept across restarts. */
    private readonly rng: Prng,
    private readonly observer: NodeObserver,
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
    this.core.tick();
    this.drainReady();
  }

  step(m: Message): void {
    this.core.step(m);
    this.drainReady();
  }

  /** Runs `action` on the core (propose, readIndex, ...) and then handles the resulting Ready. */
  act<T>(action: (core: RawNodeLike) => T): T {
    try {
      return action(this.core);
    } finally {
      if (this.raft) this.drainReady();
    }
  }

  /** Power loss now: unsynced writes are torn (a random prefix survives). */
  crash(keepUnsynced: number): void {
    this.storage.crash(keepUnsynced);
    this.stop();
  }

  /**
   * Power loss at the next sync point: the next mustSync Ready is written but the sync
   * never completes; `keepUnsynced(n)` says how many of the n unsynced writes survive.
   */
  crashAtSync(keepUnsynced: (unsynced: number) => number): void {
    this.crashAtNextSync = keepUnsynced;
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
    this.machine = KvMachine.restore(snap.data, snap.meta.index);
    this.crashAtNextSync = null;
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
    this._paused = false;
  }

  private drainReady(): void {
    // A core that never runs out of Readies would hang the run; fail it instead.
    for (let rounds = 0; this.raft && this.raft.hasReady(); rounds++) {
      if (rounds >= 1000) throw new Error(`node ${this.id}: still has a Ready after ${rounds} rounds (livelock)`);
      const rd = this.raft.ready();
      this.storage.write({ hardState: rd.hardState, entries: rd.entries, snapshot: rd.snapshot });
      if (rd.softState) this._role = rd.softState.role;
      if (rd.hardState) {
        this._term = rd.hardState.term;
        if (rd.hardState.commit !== this._commit && this._role === 'leader') {
          this.observer.leaderCommitted(this.id, this._term, this._commit, rd.hardState.commit);
        }
        this._commit = rd.hardState.commit;
      }
      if (rd.mustSync) {
        if (this.crashAtNextSync) {
          const { lost } = this.storage.crash(this.crashAtNextSync(this.storage.unsyncedWrites));
          this.stop();
          this.observer.crashedAtSync(this.id, lost);
          return;
        }
        this.storage.sync();
      }
      for (const m of rd.messages) this.observer.send(this.id, m);
      this.apply(rd);
      for (const rs of rd.readStates) this.observer.readState(this.id, rs);
      this.raft.advance(rd);
      this.maybeCompact();
    }
  }

  private apply(rd: Ready): void {
    if (rd.snapshot) this.machine = KvMachine.restore(rd.snapshot.data, rd.snapshot.meta.index);
    for (const e of rd.committedEntries) {
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
