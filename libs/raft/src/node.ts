// The driver: owns the RawNode, a clock, the storage and the transport, and runs the
// Ready loop that turns the pure core into a working Raft member, in the order of
// core/driver-order.ts (a leader's appends leave before its own fsync; committed entries
// already on disk are applied during it). Application code talks to RaftNode only.
//
// One processing pass at a time. Ticks, incoming messages, proposals and reads only step
// the core synchronously and schedule a pass; the pass drains rawNode.hasReady(). While
// a pass awaits its fsync, everything that arrives piles up in the core and leaves as the
// NEXT Ready, so one synced write covers every proposal that arrived meanwhile. That
// batching is where the throughput comes from; never two persists in flight.

import { EventEmitter } from 'node:events';
import { planReady } from './core/driver-order';
import { RawNode } from './core/raw-node';
import { NotLeaderError, ProposalDroppedError, StoppedError, TimeoutError } from './core/errors';
import type { Storage } from './core/storage';
import type { ConfChange, Entry, HardState, Message, NodeId, RaftConfig, Ready, Role, Snapshot } from './core/types';
import { ReadRounds } from './read-rounds';
import { readImage } from './snapshot-files';
import { readSnapshotImage } from './snapshot-image';
import type { StateMachine } from './state-machine';
import type { Transport } from './transport';

/** The part of a Transport the driver uses (GrpcTransport, or an in-process one in tests). */
export type DriverTransport = Pick<Transport, 'start' | 'send' | 'onMessage' | 'onUnreachable' | 'onSnapshotStatus' | 'stop'>;

export interface DriverLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface RaftNodeOptions {
  id: NodeId;
  /** Owned by the node from start() on: closed by stop(). */
  storage: Storage;
  /** Owned by the node from start() on: started by start(), stopped by stop(). */
  transport: DriverTransport;
  stateMachine: StateMachine;
  tickMs?: number; // default 100
  electionTick?: number; // default 10
  heartbeatTick?: number; // default 1
  /** Take a snapshot (and compact the log) every this many applied entries; 0 = never. Default 10,000. */
  snapshotEntries?: number;
  /**
   * A follower asks the leader again for a read round it has not answered within this many
   * ticks (the request or its answer may be lost: see read-rounds.ts). Default 5.
   */
  readRetryTicks?: number;
  /** Timeout of propose()/read() when the call gives none. Default 5,000 ms. */
  defaultTimeoutMs?: number;
  /** Further core tunables (preVote, checkQuorum, flow control). */
  raft?: Partial<Omit<RaftConfig, 'id' | 'electionTick' | 'heartbeatTick' | 'applied'>>;
  logger?: DriverLogger;
}

export type RaftNodeStatus = ReturnType<RawNode['status']>;

export interface RaftNodeEvents {
  /** The known leader changed (null: none known), with the term it was learned in. */
  leaderChange: [leader: NodeId | null, term: number];
  roleChange: [role: Role, term: number];
  /**
   * A hard state is now on stable storage; emitted before any message of that Ready
   * leaves, so a listener may record it (the kill test logs every (term, vote) this way).
   */
  hardStatePersisted: [hs: HardState];
  /** Storage or the state machine failed inside the loop; the node is stopping (the process should usually exit). */
  fatal: [err: unknown];
}

interface PendingProposal {
  term: number;
  startedAt: number;
  resolve: (result: unknown) => void;
  reject: (err: unknown) => void;
  timer: NodeJS.Timeout;
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** After a snapshot held apply: how long the backlog is applied in one event-loop turn before others get theirs. */
export const APPLY_AFTER_HOLD_MS_PER_TURN = 8;

const quietLogger: DriverLogger = { info() {}, warn() {}, error() {} };

export class RaftNode extends EventEmitter<RaftNodeEvents> {
  private raw!: RawNode;
  private readonly storage: Storage;
  private readonly transport: DriverTransport;
  private readonly sm: StateMachine;
  private readonly log: DriverLogger;
  private readonly tickMs: number;
  private readonly snapshotEntries: number;
  private readonly defaultTimeoutMs: number;
  private readonly readRetryTicks: number;

  private ticker: NodeJS.Timeout | undefined;
  private passScheduled = false;
  private currentPass: Promise<void> | undefined;
  private stopped = false;

  private applied = 0;
  /** The state machine's applied index when the node started: entries up to it are not applied again. */
  private smAppliedAtStart = 0;
  private lastSnapshotIndex = 0;
  /** The latest commit-only hard state, not written yet: the next write carries it (see driver-order.ts). */
  private unwrittenHardState: HardState | undefined;
  /**
   * A snapshot being read from the state machine and recorded by storage, in the
   * background: log writes never wait for it (storage writes the image outside its write
   * queue). At most one at a time.
   */
  private snapshotWrite: Promise<void> | undefined;
  /**
   * Set while a snapshot's pieces are read from the live state (not copy-on-write):
   * committed entries wait here, in order, instead of being applied; resolves once they are.
   */
  private applyHold: { entries: Entry[][]; released: Promise<void> } | undefined;
  /** The snapshot image being read, until it is whole: a restore must not swap the state under it. */
  private imageRead: Promise<unknown> | undefined;

  private leader: NodeId | null = null;
  private role: Role = 'follower';

  private readonly proposals = new Map<number, PendingProposal[]>();
  private readonly reads: ReadRounds;

  private constructor(private readonly opts: RaftNodeOptions) {
    super();
    this.storage = opts.storage;
    this.transport = opts.transport;
    this.sm = opts.stateMachine;
    this.log = opts.logger ?? quietLogger;
    this.tickMs = opts.tickMs ?? 100;
    this.snapshotEntries = opts.snapshotEntries ?? 10_000;
    this.defaultTimeoutMs = opts.defaultTimeoutMs ?? 5_000;
    this.readRetryTicks = Math.max(1, opts.readRetryTicks ?? 5);
    this.reads = new ReadRounds(opts.id);
  }

  /** Restores the state machine from the stored snapshot if it is behind, then starts the clock and the transport. */
  static async start(opts: RaftNodeOptions): Promise<RaftNode> {
    const node = new RaftNode(opts);
    await node.init();
    return node;
  }

  private async init(): Promise<void> {
    const snap = this.storage.snapshot();
    // A stored image is read from its file for the restore only, not kept in memory.
    if (snap.meta.index > this.sm.appliedIndex()) await this.sm.restore(await readImage(snap.data), snap.meta);
    // Apply does not wait for the commit index to be written (a commit-only change is
    // written with the next entries, see handleReady), so a durable state machine may
    // come back ahead of the stored commit. Those entries were
    // committed; the core must still start at or below its commit, so it hands them out
    // again and applyCommitted skips them.
    this.smAppliedAtStart = this.sm.appliedIndex();
    const storedCommit = this.storage.initialState().hardState.commit;
    this.applied = Math.max(snap.meta.index, Math.min(this.smAppliedAtStart, storedCommit));
    this.lastSnapshotIndex = snap.meta.index;
    this.raw = new RawNode(
      {
        random: Math.random,
        ...this.opts.raft,
        id: this.opts.id,
        electionTick: this.opts.electionTick ?? 10,
        heartbeatTick: this.opts.heartbeatTick ?? 1,
        applied: this.applied, // may be below smAppliedAtStart, see above
      },
      this.storage,
    );
    this.transport.onMessage((m) => this.stepMessage(m));
    this.transport.onUnreachable((peer) => {
      if (this.stopped) return;
      // The connection that carried our read rounds to the leader broke: ask again soon.
      if (peer === this.leader) this.reads.askAgainSoon(this.readRetryTicks);
      this.raw.reportUnreachable(peer);
      this.schedule();
    });
    this.transport.onSnapshotStatus((peer, ok) => {
      if (this.stopped) return;
      this.raw.reportSnapshot(peer, ok);
      this.schedule();
    });
    await this.transport.start();
    this.ticker = setInterval(() => this.tick(), this.tickMs);
    this.schedule(); // entries committed before a restart are applied right away
  }

  // ---- public API -------------------------------------------------------------------

  /**
   * Proposes `data` and resolves with the state machine's result for that entry once it
   * is applied here. Rejects with NotLeaderError (with the leader hint),
   * ProposalDroppedError (another leader's entry took its index), ProposalOverloadedError,
   * TimeoutError (outcome unknown: it may still commit) or StoppedError.
   */
  propose(data: Uint8Array, options: { timeoutMs?: number } = {}): Promise<unknown> {
    return this.track(() => this.raw.propose(data), options.timeoutMs);
  }

  /** Proposes a membership change; resolves once it is applied (status().conf then includes it). */
  proposeConfChange(cc: ConfChange, options: { timeoutMs?: number } = {}): Promise<unknown> {
    return this.track(() => this.raw.proposeConfChange(cc), options.timeoutMs);
  }

  /**
   * Linearizable read barrier (ReadIndex): resolves once this node has applied everything
   * committed when the read was issued; the caller then reads its local state machine.
   * Reads issued before the next loop pass share one round.
   */
  read(options: { timeoutMs?: number } = {}): Promise<void> {
    if (this.stopped) return Promise.reject(new StoppedError());
    if (this.leader === null) return Promise.reject(new NotLeaderError(null));
    const barrier = this.reads.wait(options.timeoutMs ?? this.defaultTimeoutMs);
    this.schedule();
    return barrier;
  }

  /** Asks the leader (this node) to hand leadership to `to`; the core aborts after an election timeout. */
  transferLeader(to: NodeId): void {
    if (this.stopped) throw new StoppedError();
    this.raw.transferLeader(to);
    this.schedule();
  }

  /** Starts an election now (e.g. to pick the first leader of a fresh group faster). */
  campaign(): void {
    if (this.stopped) throw new StoppedError();
    this.raw.campaign();
    this.schedule();
  }

  status(): RaftNodeStatus {
    return this.raw.status();
  }

  get id(): NodeId {
    return this.opts.id;
  }

  /** The leader as of the last processed Ready (cheap: no status() snapshot). */
  get knownLeader(): NodeId | null {
    return this.leader;
  }

  /** Stops the clock, fails every pending call with StoppedError, lets the current pass finish, then closes transport and storage. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.ticker);
    this.failPending(() => new StoppedError());
    await this.currentPass;
    await this.snapshotWrite;
    await this.applyHold?.released;
    // A clean stop leaves the latest commit index on disk (a restart then applies at once).
    const hardState = this.unwrittenHardState;
    this.unwrittenHardState = undefined;
    if (hardState) {
      await this.storage.persist({ hardState }, true).catch((err) => this.log.warn({ err }, 'raft: commit index not written at stop'));
    }
    await this.transport.stop();
    await this.storage.close();
  }

  // ---- inputs -----------------------------------------------------------------------

  private tick(): void {
    if (this.stopped) return;
    this.raw.tick();
    this.reads.forgetSettled();
    // A leader's own rounds ride on every heartbeat; a follower's need asking again.
    if (this.role === 'follower' && this.leader !== null) {
      for (const ctx of this.reads.dueForAskingAgain(this.readRetryTicks)) this.raw.readIndex(ctx);
    }
    this.schedule();
  }

  private stepMessage(m: Message): void {
    if (this.stopped) return;
    try {
      this.raw.step(m);
    } catch (err) {
      this.log.warn({ err, type: m.type, from: m.from }, 'raft: message rejected by the core');
      return;
    }
    this.schedule();
  }

  private track(submit: () => { index: number; term: number }, timeoutMs = this.defaultTimeoutMs): Promise<unknown> {
    if (this.stopped) return Promise.reject(new StoppedError());
    let at: { index: number; term: number };
    try {
      at = submit();
    } catch (err) {
      return Promise.reject(err);
    }
    this.schedule();
    return new Promise((resolve, reject) => {
      const p: PendingProposal = {
        term: at.term,
        startedAt: Date.now(),
        resolve,
        reject,
        timer: setTimeout(() => {
          this.forgetProposal(at.index, p);
          reject(new TimeoutError('proposal', timeoutMs));
        }, timeoutMs),
      };
      // Usually one per index. Several when we lost and regained leadership and proposed
      // again at an index whose older entry may still commit through another leader.
      const atIndex = this.proposals.get(at.index);
      if (atIndex) atIndex.push(p);
      else this.proposals.set(at.index, [p]);
    });
  }

  private forgetProposal(index: number, p: PendingProposal): void {
    const atIndex = this.proposals.get(index);
    if (!atIndex) return;
    const rest = atIndex.filter((q) => q !== p);
    if (rest.length > 0) this.proposals.set(index, rest);
    else this.proposals.delete(index);
  }

  // ---- the loop ---------------------------------------------------------------------

  private schedule(): void {
    if (this.passScheduled || this.stopped) return;
    this.passScheduled = true;
    setImmediate(() => {
      this.passScheduled = false;
      if (this.currentPass || this.stopped) return; // the running pass re-checks hasReady() before it ends
      this.currentPass = this.runPass().finally(() => {
        this.currentPass = undefined;
      });
    });
  }

  private async runPass(): Promise<void> {
    try {
      this.startReadRound();
      while (!this.stopped && this.raw.hasReady()) {
        await this.handleReady(this.raw.ready());
        this.startReadRound();
      }
    } catch (err) {
      // Storage or state machine failure: continuing could break Raft's guarantees.
      this.log.error({ err }, 'raft: fatal error in the ready loop; stopping the node');
      void this.stop().catch(() => {});
      this.emit('fatal', err);
    }
  }

  private async handleReady(rd: Ready): Promise<void> {
    const leaderChanged = rd.softState ? this.noteSoftState(rd.softState.leader, rd.softState.role) : false;

    // The order of this pass (what leaves or is applied before the write is durable, and
    // why that is safe) is decided by planReady, which the simulator follows too.
    const plan = planReady(rd, this.unwrittenHardState);
    if (plan.sendBeforeWrite.length > 0) {
      this.transport.send(plan.sendBeforeWrite);
      // Let the Apps reach the socket before the write wakes a storage thread, which on
      // two cores often takes this thread's CPU. Node's HTTP/2 sends in the next turn's
      // check phase, ahead of JS immediates, so one turn is enough; the followers'
      // round trip takes far longer than this turn, so our own fsync still finishes first.
      if (plan.write) await nextTurn();
    }

    // A commit-only hard state is not written now: the next write carries it.
    this.unwrittenHardState = plan.unwrittenHardState;
    const update = plan.write;
    const write = update ? this.storage.persist(update, true) : undefined;
    const committed = rd.committedEntries;
    if (plan.applyDuringWrite) await this.applyCommitted(committed);

    // The synced write guards what the later messages promise (a vote, an append ack): wait for it.
    if (write) await this.written(write, update?.hardState);
    if (plan.sendAfterWrite.length > 0) this.transport.send(plan.sendAfterWrite);

    if (rd.snapshot) await this.restoreSnapshot(rd.snapshot);
    if (!plan.applyDuringWrite) await this.applyCommitted(committed);
    this.raw.advance(rd); // only after the write: storage shows its entries from then on
    // Conf changes settle after advance, so their callers see them in status().conf.
    this.settleProposals(committed, undefined, 'conf');

    for (const rs of rd.readStates) this.reads.answered(rs.requestCtx, rs.index);
    // Rounds asked of the previous leader (or of us while we led) will never be answered
    // now: fail them at once instead of at their timeout, so callers retry elsewhere.
    // Rounds already answered stay: a leader of the time confirmed their read index.
    if (leaderChanged) this.reads.failUnanswered(() => new NotLeaderError(this.leader), this.leader === null);
    this.reads.release(this.applied);
    await this.maybeSnapshot();
  }

  /** Applies committed entries, then settles the proposals of the normal ones and the reads they unblock. */
  private async applyCommitted(entries: Entry[]): Promise<void> {
    if (entries.length === 0) return;
    if (entries[0].index <= this.smAppliedAtStart) entries = entries.filter((e) => e.index > this.smAppliedAtStart);
    if (entries.length === 0) return;
    if (this.applyHold) {
      this.applyHold.entries.push(entries); // applied in order once the snapshot's pieces are read
      return;
    }
    await this.applyCommittedNow(entries);
  }

  private async applyCommittedNow(entries: Entry[]): Promise<void> {
    const results = await this.sm.apply(entries);
    this.applied = entries[entries.length - 1].index;
    this.settleProposals(entries, results, 'normal');
    this.reads.release(this.applied);
  }

  private settleProposals(entries: Entry[], results: unknown[] | undefined, type: Entry['type']): void {
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i];
      if (e.type !== type) continue;
      const atIndex = this.proposals.get(e.index);
      if (!atIndex) continue;
      this.proposals.delete(e.index);
      for (const p of atIndex) {
        clearTimeout(p.timer);
        if (p.term === e.term) p.resolve(results?.[i]);
        else p.reject(new ProposalDroppedError(`entry ${e.index} was committed from term ${e.term}, not ${p.term}`));
      }
    }
  }

  private async written(write: Promise<void>, hardState: HardState | undefined): Promise<void> {
    await write;
    if (hardState) this.emit('hardStatePersisted', hardState);
  }

  /** Records the soft state and emits its events; true when the known leader changed. */
  private noteSoftState(leader: NodeId | null, role: Role): boolean {
    const term = this.raw.status().term;
    const leaderChanged = leader !== this.leader;
    const roleChanged = role !== this.role;
    this.leader = leader;
    this.role = role;
    if (leaderChanged) this.emit('leaderChange', leader, term);
    if (roleChanged) this.emit('roleChange', role, term);
    return leaderChanged;
  }

  private async restoreSnapshot(snap: Snapshot): Promise<void> {
    // A leader's snapshot replaces the state: first let our own reading of it finish.
    if (this.imageRead) await this.imageRead;
    if (this.applyHold) await this.applyHold.released;
    await this.sm.restore(await readImage(snap.data), snap.meta);
    this.applied = snap.meta.index;
    this.lastSnapshotIndex = Math.max(this.lastSnapshotIndex, snap.meta.index);
    // The snapshot hides which term each covered entry had: our outcome is unknown.
    for (const [index, atIndex] of this.proposals) {
      if (index > snap.meta.index) continue;
      this.proposals.delete(index);
      for (const p of atIndex) {
        clearTimeout(p.timer);
        p.reject(new TimeoutError('proposal (overtaken by a snapshot; outcome unknown)', Date.now() - p.startedAt));
      }
    }
  }

  /** Starts a snapshot in the background when enough entries were applied since the last. */
  private async maybeSnapshot(): Promise<void> {
    if (this.snapshotEntries <= 0 || this.snapshotWrite) return;
    if (this.applied - this.lastSnapshotIndex < this.snapshotEntries) return;
    const index = this.applied;
    const conf = this.raw.status().conf; // as of the last applied entry
    this.lastSnapshotIndex = index;
    const reading = readSnapshotImage(this.sm, () => this.stopped);
    // Until the last piece, or until the pieces left no longer read what apply changes.
    if (!reading.copyOnWrite) this.holdApplies(reading.frozen ? Promise.race([reading.frozen, reading.taken]) : reading.taken);
    const imageRead = reading.taken.finally(() => {
      if (this.imageRead === imageRead) this.imageRead = undefined;
    });
    this.imageRead = imageRead;
    // Storage takes the pieces as they come (LevelStorage appends each to the snapshot's file).
    this.snapshotWrite = this.storage
      .createSnapshot(index, conf, reading.pieces)
      .catch((err) => {
        if (!(err instanceof StoppedError)) this.log.warn({ err, index }, 'raft: snapshot not recorded');
      })
      .finally(() => {
        reading.cancel(); // storage gave up before the last piece (e.g. a leader's snapshot overtook this one): apply must not stay held
        this.snapshotWrite = undefined;
        reading.done?.();
      });
  }

  /** Applies nothing until `reading` settles, then what was committed meanwhile, in order. */
  private holdApplies(reading: Promise<unknown>): void {
    const entries: Entry[][] = [];
    const released = reading
      .catch(() => undefined)
      .then(async () => {
        // Passes that run meanwhile still push here: the hold ends only once the list is empty.
        // A long hold leaves hundreds of entries on a busy leader, and settling each starts its
        // proposer's next step: applied in one turn they held the loop for 60+ ms.
        // An entry at a time (one pass's batch may itself be long), the arrays left as passed.
        let turnStarted = performance.now();
        let next = 0;
        while (entries.length > 0 && !this.stopped) {
          if (performance.now() - turnStarted >= APPLY_AFTER_HOLD_MS_PER_TURN) {
            await nextTurn();
            turnStarted = performance.now();
            continue; // stopped meanwhile?
          }
          const one = entries[0][next++];
          if (next === entries[0].length) {
            entries.shift();
            next = 0;
          }
          await this.applyCommittedNow([one]);
        }
        this.applyHold = undefined;
        this.reads.release(this.applied);
      })
      .catch((err) => {
        this.log.error({ err }, 'raft: fatal error applying after a snapshot; stopping the node');
        void this.stop().catch(() => {});
        this.emit('fatal', err);
      });
    this.applyHold = { entries, released };
  }

  // ---- reads ------------------------------------------------------------------------

  private startReadRound(): void {
    const ctx = this.reads.startRound();
    if (ctx) this.raw.readIndex(ctx);
  }

  private failPending(err: () => Error): void {
    for (const p of [...this.proposals.values()].flat()) {
      clearTimeout(p.timer);
      p.reject(err());
    }
    this.proposals.clear();
    this.reads.failAll(err);
  }
}
