// The catch-ups this agent runs, by move: each a BinlogTailer (tailer.ts) reading this
// host's master's binlog and re-copying changed rows into the target, with the sessions it
// needs, and a session on the source opened at its start for positions (a cut-over's hold
// reads the source's position and must not wait for a new session). A catch-up outlives the
// manager call that started it: a new leader's StartCatchUp finds it running and answers
// its state; one that no call has named for ten minutes (its manager gone for good) stops.

import type mysql from 'mysql2/promise';
import type { Logger } from '@kcm/common';
import { AgentFailure, type BinlogPosition, type CatchUpState, type CatchUpTailReply, type CatchUpToRequest, type StartCatchUpRequest } from '@kcm/agent-api';
import { BinlogTailer } from './tailer';
import { addressOf, closeShard, masterPosition, openShard, withShard } from './shard-sql';

export const CATCH_UP_IDLE_MS = 10 * 60_000;
/** How long CatchUpTo and CatchUpTail wait when the call names no timeout. */
const DEFAULT_WAIT_MS = 120_000;

interface CatchUp {
  tailer: BinlogTailer;
  request: StartCatchUpRequest;
  sessions: mysql.Connection[];
  /** On the source as the replication account (SHOW MASTER STATUS needs BINLOG MONITOR). */
  positions: mysql.Connection;
  halted: boolean;
  idle: NodeJS.Timeout;
}

export interface CatchUpOptions {
  idleMs?: number;
  /** The tools (tests put stand-ins here). */
  mariadbBinlog?: string;
  stdbuf?: string;
}

const ms = (from: number, to: number) => Math.round((to - from) * 10) / 10;

export class CatchUps {
  private readonly running = new Map<string, Promise<CatchUp>>();

  constructor(private readonly logger: Logger, private readonly o: CatchUpOptions = {}) {}

  /** Starts of a move, one after another: two calls at once (a retry beside a new leader's) start one catch-up. */
  private readonly starts = new Map<string, Promise<CatchUpState>>();

  /** Starts the move's catch-up from `start`, or answers the state of the one running (one whose reader failed is started again). */
  async start(req: StartCatchUpRequest): Promise<CatchUpState> {
    const before = this.starts.get(req.move_id) ?? Promise.resolve(null);
    const mine = before.catch(() => null).then(() => this.startOnce(req));
    this.starts.set(req.move_id, mine);
    try {
      return await mine;
    } finally {
      if (this.starts.get(req.move_id) === mine) this.starts.delete(req.move_id);
    }
  }

  private async startOnce(req: StartCatchUpRequest): Promise<CatchUpState> {
    if (!req.move_id) throw new AgentFailure('invalid_argument', 'move_id is empty');
    if (!req.binlog_login || !req.source?.login || !req.target?.login) throw new AgentFailure('invalid_argument', 'binlog_login, source and target need logins');
    if (!req.start?.file) throw new AgentFailure('invalid_argument', 'start names no binlog file');
    if (!req.shape || req.shape.key.length === 0) throw new AgentFailure('invalid_argument', 'the shape needs a primary key');
    const existing = await this.running.get(req.move_id)?.catch(() => null);
    if (existing && !existing.tailer.failed) {
      this.touch(req.move_id, existing);
      return this.state(existing);
    }
    if (existing) {
      this.logger.warn({ move_id: req.move_id, err: existing.tailer.failed?.message }, 'move catch-up failed before; starting it again');
      await this.stop(req.move_id);
    }
    const starting = this.launch(req);
    this.running.set(req.move_id, starting);
    starting.catch(() => {
      if (this.running.get(req.move_id) === starting) this.running.delete(req.move_id);
    });
    return this.state(await starting);
  }

  private async launch(req: StartCatchUpRequest): Promise<CatchUp> {
    const sessions: mysql.Connection[] = [];
    try {
      for (const login of [req.source.login, req.target.login, req.binlog_login]) sessions.push(await openShard(login));
    } catch (err) {
      await Promise.all(sessions.map(closeShard));
      throw err;
    }
    const [src, dst, positions] = sessions;
    const tailer = new BinlogTailer({
      binlogLogin: req.binlog_login,
      src,
      dst,
      from: req.source,
      to: req.target,
      shape: req.shape,
      start: req.start,
      logger: this.logger.child({ move_id: req.move_id }),
      ...(this.o.mariadbBinlog ? { mariadbBinlog: this.o.mariadbBinlog } : {}),
      ...(this.o.stdbuf ? { stdbuf: this.o.stdbuf } : {}),
    });
    const c: CatchUp = { tailer, request: req, sessions: [src, dst], positions, halted: false, idle: setTimeout(() => {}, 0) };
    try {
      await tailer.start();
    } catch (err) {
      await tailer.stop().catch(() => {});
      await Promise.all(sessions.map(closeShard));
      throw err;
    }
    this.touch(req.move_id, c);
    this.logger.info({ move_id: req.move_id, table: `${req.source.db}.${req.source.table}`, source: addressOf(req.binlog_login), from: req.start }, 'move catch-up started');
    return c;
  }

  /** Waits until the catch-up applied `at` (empty file: the source's position now). */
  async to(req: CatchUpToRequest): Promise<CatchUpState> {
    const c = await this.named(req.move_id);
    try {
      const at = req.at?.file ? req.at : await this.sourceNow(c);
      await c.tailer.waitFor(at, req.timeout_ms > 0 ? req.timeout_ms : DEFAULT_WAIT_MS);
      return this.state(c);
    } finally {
      this.touch(req.move_id, c);
    }
  }

  /** Inside a hold: applies the keys read so far, then waits for `at`; says how long each part took. */
  async tail(req: CatchUpToRequest): Promise<CatchUpTailReply> {
    const c = await this.named(req.move_id);
    try {
      const before = c.tailer.rowsResynced;
      const t0 = performance.now();
      await c.tailer.flush();
      const t1 = performance.now();
      const at = req.at?.file ? req.at : await this.sourceNow(c);
      await c.tailer.waitFor(at, req.timeout_ms > 0 ? req.timeout_ms : DEFAULT_WAIT_MS);
      return { flush_ms: ms(t0, t1), read_ms: ms(t1, performance.now()), tail_rows: c.tailer.rowsResynced - before, state: this.state(c) };
    } finally {
      this.touch(req.move_id, c);
    }
  }

  async sourcePosition(moveId: string): Promise<BinlogPosition> {
    const c = await this.named(moveId);
    return this.sourceNow(c);
  }

  /** Applies nothing more, at once (what is being applied is finished first); unknown moves answer not running. */
  async halt(moveId: string): Promise<CatchUpState> {
    const c = await this.running.get(moveId)?.catch(() => null);
    if (!c) return NOT_RUNNING;
    this.touch(moveId, c);
    c.halted = true;
    await c.tailer.halt();
    return this.state(c);
  }

  /** Ends the catch-up (its reader, its sessions); answers its last state. Unknown moves answer not running. */
  async stop(moveId: string): Promise<CatchUpState> {
    const entry = this.running.get(moveId);
    if (!entry) return NOT_RUNNING;
    this.running.delete(moveId);
    const c = await entry.catch(() => null);
    if (!c) return NOT_RUNNING;
    clearTimeout(c.idle);
    await c.tailer.stop();
    await Promise.all([...c.sessions, c.positions].map(closeShard));
    this.logger.info({ move_id: moveId, applied: c.tailer.applied, rows_resynced: c.tailer.rowsResynced }, 'move catch-up stopped');
    return { ...this.state(c), running: false };
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.running.keys()].map((id) => this.stop(id)));
  }

  /** Moves whose catch-up runs here. */
  get moves(): string[] {
    return [...this.running.keys()];
  }

  private async named(moveId: string): Promise<CatchUp> {
    const c = await this.running.get(moveId);
    if (!c) throw new AgentFailure('not_found', `no catch-up of move ${moveId} runs on this agent (never started, stopped, or idle for ${(this.o.idleMs ?? CATCH_UP_IDLE_MS) / 60_000} min)`);
    this.touch(moveId, c);
    return c;
  }

  /** The source's position, on the session opened at the start; a new one if that broke. */
  private sourceNow(c: CatchUp): Promise<BinlogPosition> {
    return masterPosition(c.positions).catch(() => withShard(c.request.binlog_login, masterPosition));
  }

  private state(c: CatchUp): CatchUpState {
    return { running: !c.halted && !c.tailer.failed, applied: c.tailer.applied, rows_resynced: c.tailer.rowsResynced, rotations_crossed: c.tailer.rotationsCrossed };
  }

  private touch(moveId: string, c: CatchUp): void {
    clearTimeout(c.idle);
    c.idle = setTimeout(() => {
      this.logger.warn({ move_id: moveId }, 'move catch-up not named by any call for its idle limit; stopping it');
      void this.stop(moveId).catch(() => {});
    }, this.o.idleMs ?? CATCH_UP_IDLE_MS);
    c.idle.unref();
  }
}

const NOT_RUNNING: CatchUpState = { running: false, applied: { file: '', pos: 0 }, rows_resynced: 0, rotations_crossed: 0 };
