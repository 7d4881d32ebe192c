// The CopyRows rpc: a move's copy (copy.ts) between the source and target masters, run by
// the agent of the source master's host, throttled by a rate limit and by the target's
// standbys, one progress message per target commit. One copy runs per move: a new call for
// a move whose copy still runs (a new manager leader) stops the old one first, whose open
// target transaction is rolled back, and resumes after what it committed.

import type mysql from 'mysql2/promise';
import { AgentFailure, gtidProgress, stringifyValues, type CopyRowsProgress, type CopyRowsRequest, type ShardLogin } from '@kcm/agent-api';
import { copyRows } from './copy';
import { jsonArray } from './request-json';
import { addressOf, closeShard, instanceFailure, openShard } from './shard-sql';

/** The lag of the target's standbys is read at most this often, while the next chunks are written. */
const LAG_CHECK_MS = 500;
/** A lagging standby holds the copy this long at most per check, then the copy goes on. */
const LAG_WAIT_MS = 30_000;

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * Waits while a standby of the target is more than `maxLagTrx` transactions behind the
 * target master (@@gtid_binlog_pos against each standby's @@gtid_current_pos), at most 30 s.
 * A node that does not answer is left out, as the engine's agent-based check did.
 */
class TargetLag {
  private readonly sessions = new Map<string, Promise<mysql.Connection | null>>();

  constructor(private readonly master: ShardLogin, private readonly standbys: readonly ShardLogin[], private readonly maxLagTrx: number) {}

  private session(login: ShardLogin): Promise<mysql.Connection | null> {
    const id = `${login.host}:${login.port}`;
    let s = this.sessions.get(id);
    if (!s) {
      s = openShard(login).catch(() => null);
      this.sessions.set(id, s);
    }
    return s;
  }

  private async gtid(login: ShardLogin, variable: 'gtid_binlog_pos' | 'gtid_current_pos'): Promise<string | null> {
    const c = await this.session(login);
    if (!c) return null;
    try {
      const [rows] = (await c.query(`SELECT @@${variable} AS pos`)) as unknown as [{ pos: string }[]];
      return rows[0]?.pos ?? '';
    } catch {
      // A broken session: opened again at the next check.
      this.sessions.delete(`${login.host}:${login.port}`);
      await closeShard(c);
      return null;
    }
  }

  async wait(signal: AbortSignal): Promise<void> {
    const deadline = Date.now() + LAG_WAIT_MS;
    while (Date.now() < deadline && !signal.aborted) {
      const [m, ...s] = await Promise.all([this.gtid(this.master, 'gtid_binlog_pos'), ...this.standbys.map((l) => this.gtid(l, 'gtid_current_pos'))]);
      if (m === null) return;
      const behind = Math.max(0, ...s.filter((x): x is string => x !== null).map((x) => gtidProgress(m) - gtidProgress(x)));
      if (behind <= this.maxLagTrx) return;
      await sleep(100, signal);
    }
  }

  async close(): Promise<void> {
    const open = await Promise.all(this.sessions.values());
    this.sessions.clear();
    await Promise.all(open.filter((c): c is mysql.Connection => c !== null).map(closeShard));
  }
}

function checkRequest(req: CopyRowsRequest): void {
  if (!req.move_id) throw new AgentFailure('invalid_argument', 'move_id is empty');
  if (!req.source?.login || !req.target?.login) throw new AgentFailure('invalid_argument', 'source and target need a login');
  if (!(req.chunk_rows > 0)) throw new AgentFailure('invalid_argument', `chunk_rows ${req.chunk_rows} must be at least 1`);
  if (!req.shape || req.shape.key.length === 0 || req.shape.columns.length === 0) throw new AgentFailure('invalid_argument', 'the shape needs columns and a primary key');
}

export class CopyRuns {
  private readonly running = new Map<string, { stop: AbortController; done: Promise<unknown> }>();

  /**
   * Copies to the end, `progress` called once per target commit; resolves with the last
   * message (done = true). Aborting `signal` (the call cancelled) stops the copy.
   */
  async run(req: CopyRowsRequest, signal: AbortSignal, progress: (p: CopyRowsProgress) => void): Promise<CopyRowsProgress> {
    checkRequest(req);
    const stop = new AbortController();
    const onAbort = () => stop.abort(signal.reason ?? new Error('the copy was cancelled'));
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    const previous = this.running.get(req.move_id);
    if (previous) {
      previous.stop.abort(new Error(`a new copy of move ${req.move_id} was asked for`));
      await previous.done.catch(() => {});
    }
    const done = this.copy(req, stop.signal, progress);
    const entry = { stop, done };
    this.running.set(req.move_id, entry);
    try {
      return await done;
    } finally {
      signal.removeEventListener('abort', onAbort);
      if (this.running.get(req.move_id) === entry) this.running.delete(req.move_id);
    }
  }

  /** Moves whose copy runs now. */
  get moves(): string[] {
    return [...this.running.keys()];
  }

  private async copy(req: CopyRowsRequest, signal: AbortSignal, progress: (p: CopyRowsProgress) => void): Promise<CopyRowsProgress> {
    const started = performance.now();
    const src = await openShard(req.source.login);
    let dst: mysql.Connection;
    try {
      dst = await openShard(req.target.login);
    } catch (err) {
      await closeShard(src);
      throw err;
    }
    const lag = req.target_standbys.length > 0 && req.max_target_lag_trx > 0 ? new TargetLag(req.target.login, req.target_standbys, req.max_target_lag_trx) : null;
    let lastLagCheck = Date.now();
    let lagCheck: Promise<void> | null = null;
    const copyStarted = Date.now();
    try {
      const resumeAfter = req.from_start ? { resumeAfter: null } : req.resume_after_json ? { resumeAfter: jsonArray('resume_after_json', req.resume_after_json) } : {};
      const out = await copyRows(src, dst, req.source, req.target, req.shape, {
        chunkRows: req.chunk_rows,
        ...(req.commit_rows > 0 ? { commitRows: req.commit_rows } : {}),
        ...(req.commit_bytes > 0 ? { commitBytes: req.commit_bytes } : {}),
        ...(req.commit_ms > 0 ? { commitMs: req.commit_ms } : {}),
        signal,
        ...resumeAfter,
        throttle: async (written) => {
          if (req.rows_per_second > 0) {
            const due = copyStarted + (written / req.rows_per_second) * 1000;
            if (due > Date.now()) await sleep(due - Date.now(), signal);
          }
          // The lag check costs a statement per target node: at most one per 500 ms, run
          // while the next chunks are written; the copy waits on it at the next check, so a
          // lagging standby stops the copy within about a second.
          if (lag && Date.now() - lastLagCheck >= LAG_CHECK_MS) {
            lastLagCheck = Date.now();
            await lagCheck;
            lagCheck = lag.wait(signal);
            lagCheck.catch(() => {}); // awaited at the next check; a failure then is the copy's
          }
        },
        progress: async (rows, chunks) => {
          progress({ rows, chunks, done: false, resumed_after_json: '', ms: performance.now() - started });
        },
      });
      return { rows: out.rows, chunks: out.chunks, done: true, resumed_after_json: out.resumedAfter === null ? '' : stringifyValues(out.resumedAfter), ms: performance.now() - started };
    } catch (err) {
      if (signal.aborted) throw new AgentFailure('failed_precondition', `the copy of move ${req.move_id} was stopped: ${signal.reason instanceof Error ? signal.reason.message : String(signal.reason)}`, { cause: err });
      throw instanceFailure(`the copy of move ${req.move_id} from ${addressOf(req.source.login)} to ${addressOf(req.target.login)}`, err);
    } finally {
      await (lagCheck as Promise<void> | null)?.catch(() => {});
      await lag?.close();
      await Promise.all([closeShard(src), closeShard(dst)]);
    }
  }
}
