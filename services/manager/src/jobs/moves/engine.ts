// The move engine: one table from a source (cluster, shard, MariaDB database, table) to a
// target (cluster, shard, database, table; created by the move or pre-created by the user),
// in phases a job runs as its own resumable steps (expand_cluster, repartition_tables):
//
//   prepareMove  -> record the source's binlog position, check/create the target
//   copyPhase    -> chunked copy from a consistent snapshot, throttled, resumes at the chunk
//   catchUpPhase -> binlog catch-up from the recorded position until the target is level
//   verifyPhase  -> chunk hashes of source and target agree, else DATA_CHECK_FAILED naming keys
//   cutOverPhase -> hold the compute nodes' foreign table, apply the tail, re-point, release
//   retireSource -> drop the source table or rename it aside
//   abandonMove  -> (rollback) stop the catch-up, drop a target the move created
//
// The catch-up keeps running from catchUpPhase to cutOverPhase in this member (tailers
// below); a new leader starts it again from the last position a step recorded, which is
// safe because the catch-up re-copies changed rows (resync.ts).

import type { StepContext } from '../workflow';
import { clusterOfStep } from '../cluster-lookup';
import { KcmError } from '@kcm/protocol';
import { gtidProgress } from '@kcm/agent-api';
import type { BinlogPosition } from './binlog-rows';
import { closeOnAbort } from './close-on-abort';
import { copyRows, snapshotPosition } from './copy';
import { agentForeignTables, cutOver, keptForeignTables, type ForeignTableAgent } from './cutover';
import { loginAs, masterPosition, openShard, q, readTableShape, withShard, type ShardLogin, type TableShape } from './shard-sql';
import { BinlogTailer } from './tailer';
import { verifyCopy, widenedColumnCasts } from './verify';

export interface MoveEnd {
  clusterId: string;
  shardId: string;
  /** The MariaDB database on the shard (`<db>_$$_<schema>`). */
  db: string;
  table: string;
}

export interface MoveSpec {
  /** Unique within the job (e.g. the table's index): names the move's catch-up and holds. */
  key: string;
  source: MoveEnd;
  /** `create`: the move makes the target like the source (expand) and drops it on failure; else it must exist (repartition). */
  target: MoveEnd & { create: boolean };
  /** The compute nodes' foreign table that the cut-over re-points (in the target's cluster). */
  foreign: { database: string; schema: string; table: string };
}

export interface MoveLimits {
  chunkRows: number;
  /** The copy commits a target transaction at this many rows, bytes of INSERT text, or age, whichever comes first (copy.ts). */
  copyCommitRows: number;
  copyCommitBytes: number;
  copyCommitMs: number;
  /** The copy's rate limit, rows per second (0 = none). */
  copyRowsPerSecond: number;
  /** The copy waits while a target standby is more transactions behind its master than this. */
  maxTargetLagTrx: number;
  /** How long a catch-up may take to reach the source's position (catch-up phase). */
  catchUpMs: number;
  /** How long writes may be held for the tail, per attempt, and attempts. */
  cutOverCatchUpMs: number;
  cutOverAttempts: number;
}

export const DEFAULT_MOVE_LIMITS: MoveLimits = {
  chunkRows: 2000,
  copyCommitRows: 50_000,
  copyCommitBytes: 4 << 20,
  copyCommitMs: 1_000,
  copyRowsPerSecond: 0, maxTargetLagTrx: 20, catchUpMs: 120_000, cutOverCatchUpMs: 2_000, cutOverAttempts: 5 };

export interface PreparedMove {
  start: BinlogPosition;
  shape: TableShape;
}

export interface CopySummary {
  rows: number;
  chunks: number;
  resumed_after: string;
  ms: number;
}

export interface CaughtUp {
  at: BinlogPosition;
  rows_resynced: number;
}

export interface VerifySummary {
  rows: number;
  chunks: number;
  ms: number;
}

export interface CutOverSummary {
  blocked_ms: number;
  cut_over_ms: number;
  at: BinlogPosition;
  rows_resynced: number;
}

/** What the engine reaches shards and compute nodes through (tests replace foreignTables). */
export interface MoveDeps {
  foreignTables?: ForeignTableAgent;
  limits?: Partial<MoveLimits>;
}

type Ctx = StepContext<unknown, object>;

function masterOf(ctx: Ctx, end: MoveEnd) {
  const cluster = clusterOfStep(ctx, end.clusterId);
  const shard = cluster.shards[end.shardId];
  if (!shard) throw KcmError.of('NOT_FOUND', `shard ${end.shardId} is not part of cluster ${end.clusterId}`);
  const master = shard.nodes[shard.masterNodeId];
  if (!master) throw KcmError.of('INSTANCE_FAILED', `shard ${end.shardId} of cluster ${end.clusterId} has no master`);
  return { cluster, shard, master };
}

export function storageLogin(ctx: Ctx, end: MoveEnd): ShardLogin {
  const { cluster, master } = masterOf(ctx, end);
  return loginAs(ctx.secrets, cluster, master, 'storage');
}

function replicationLogin(ctx: Ctx, end: MoveEnd): ShardLogin {
  const { cluster, master } = masterOf(ctx, end);
  return loginAs(ctx.secrets, cluster, master, 'replication');
}

const where = (e: MoveEnd) => `${e.db}.${e.table} on shard ${e.shardId} of cluster ${e.clusterId}`;

/** Records the source position (before any snapshot the copy takes) and makes or checks the target. */
export async function prepareMove(ctx: Ctx, spec: MoveSpec): Promise<PreparedMove> {
  return withShard(storageLogin(ctx, spec.source), async (src) => {
    // The position of a consistent snapshot, not SHOW MASTER STATUS: with semi-sync AFTER_SYNC
    // the binlog's end may hold transactions not yet committed, which a later copy snapshot
    // could miss while the catch-up, starting after them, would never replay them.
    const start = await snapshotPosition(src);
    const shape = await readTableShape(src, spec.source.db, spec.source.table);
    if (!shape) throw KcmError.of('NOT_FOUND', `table ${where(spec.source)} does not exist`);
    if (shape.key.length === 0) throw KcmError.of('UNSUPPORTED', `table ${where(spec.source)} has no primary key; a move copies and verifies by primary key`);
    await withShard(storageLogin(ctx, spec.target), async (dst) => {
      const existing = await readTableShape(dst, spec.target.db, spec.target.table);
      if (spec.target.create) {
        if (existing) {
          // Only a re-run of this step finds it: the copy has not started, so it is empty.
          const [rows] = (await dst.query(`SELECT 1 FROM ${q(spec.target.db)}.${q(spec.target.table)} LIMIT 1`)) as unknown as [unknown[]];
          if (rows.length > 0) throw KcmError.of('CONFLICT', `table ${where(spec.target)} already exists and holds rows; nothing was moved`);
          return;
        }
        const [created] = (await src.query(`SHOW CREATE TABLE ${q(spec.source.db)}.${q(spec.source.table)}`)) as unknown as [Record<string, string>[]];
        const ddl = created[0]['Create Table'];
        await dst.query(`CREATE DATABASE IF NOT EXISTS ${q(spec.target.db)}`);
        await dst.changeUser({ database: spec.target.db });
        await dst.query(ddl.replace(/^CREATE TABLE `(?:[^`]|``)+`/, `CREATE TABLE ${q(spec.target.table)}`));
      } else if (!existing) {
        throw KcmError.of('NOT_FOUND', `target table ${where(spec.target)} does not exist; it must be created before the move`);
      }
    });
    return { start, shape };
  });
}

/** Waits while a standby of the target shard lags its master by more than the limit (at most 30 s per call). */
async function throttleOnTargetLag(ctx: Ctx, spec: MoveSpec, maxLagTrx: number): Promise<void> {
  const { shard, master } = masterOf(ctx, spec.target);
  const standbys = Object.values(shard.nodes).filter((n) => n.id !== master.id && !n.fenced);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline && !ctx.signal.aborted) {
    const [m, ...s] = await Promise.all([master, ...standbys].map((n) => ctx.agents.mariadbHa(n.hostaddr).replicationStatus(n.port).catch(() => null)));
    if (!m?.answering) return;
    const behind = Math.max(0, ...s.filter((x) => x?.answering).map((x) => gtidProgress(m.gtid_binlog_pos) - gtidProgress(x!.gtid_current_pos)));
    if (behind <= maxLagTrx) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function copyPhase(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, deps: MoveDeps = {}): Promise<CopySummary> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const src = await openShard(storageLogin(ctx, spec.source));
  const dst = await openShard(storageLogin(ctx, spec.target));
  src.on('error', () => {});
  dst.on('error', () => {});
  let lastLagCheck = Date.now();
  const lag: { check: Promise<void> | null } = { check: null };
  const started = Date.now();
  const rateLimit = async (written: number) => {
    if (limits.copyRowsPerSecond <= 0) return;
    const due = started + (written / limits.copyRowsPerSecond) * 1000;
    if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
  };
  try {
    const out = await copyRows(src, dst, spec.source, spec.target, prepared.shape, {
      chunkRows: limits.chunkRows,
      commitRows: limits.copyCommitRows,
      commitBytes: limits.copyCommitBytes,
      commitMs: limits.copyCommitMs,
      signal: ctx.signal,
      throttle: async (written) => {
        await rateLimit(written);
        // The lag check costs an agent call per target node (each opens a session on its
        // node): at most one per 500 ms, run while the next chunks are written; the copy waits
        // on it at the next check, so a lagging standby stops the copy within about a second.
        if (Date.now() - lastLagCheck >= 500) {
          lastLagCheck = Date.now();
          await lag.check;
          lag.check = throttleOnTargetLag(ctx, spec, limits.maxTargetLagTrx);
          lag.check.catch(() => {}); // awaited at the next check; a failure then is the copy's
        }
      },
      // Called once per target commit: a Raft commit of the rows the target now holds.
      progress: async (rows) => {
        await ctx.progress(rows, 0);
      },
    });
    return { rows: out.rows, chunks: out.chunks, resumed_after: out.resumedAfter === null ? '' : JSON.stringify(out.resumedAfter), ms: Math.round(out.ms) };
  } finally {
    await lag.check?.catch(() => {});
    await Promise.all([src.end().catch(() => src.destroy()), dst.end().catch(() => dst.destroy())]);
  }
}

/** The catch-ups running in this member, by job and move key. */
const tailers = new Map<string, { tailer: BinlogTailer; close: () => Promise<void> }>();

async function tailerFor(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, from: BinlogPosition): Promise<BinlogTailer> {
  const id = `${ctx.jobId}/${spec.key}`;
  const running = tailers.get(id);
  if (running) return running.tailer;
  const src = await openShard(storageLogin(ctx, spec.source));
  const dst = await openShard(storageLogin(ctx, spec.target));
  src.on('error', () => {});
  dst.on('error', () => {});
  const tailer = new BinlogTailer({ binlogLogin: replicationLogin(ctx, spec.source), src, dst, from: spec.source, to: spec.target, shape: prepared.shape, start: from, logger: ctx.logger });
  const entry = { tailer, close: async () => {} };
  tailers.set(id, entry);
  // Leadership lost: the next leader starts its own catch-up; this one must not write on.
  entry.close = closeOnAbort(ctx.signal, async () => {
    tailers.delete(id);
    await tailer.stop();
    await Promise.all([src.end().catch(() => src.destroy()), dst.end().catch(() => dst.destroy())]);
  });
  await tailer.start();
  if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error('leadership lost');
  return tailer;
}

/** Makes the move's catch-up apply nothing more, at once; stopCatchUp ends it later (inside a hold, before renames). */
export async function haltCatchUp(jobId: string, key: string): Promise<void> {
  await tailers.get(`${jobId}/${key}`)?.tailer.halt();
}

/** The catch-up as a hold uses it (the cut-over, repartition's switch of names). */
export interface HeldCatchUp {
  tailer: BinlogTailer;
  /** Outside the hold: wait until the source's position now is applied, so the hold waits only for the last writes. */
  level(): Promise<void>;
  /** Inside the hold: the source's position, read on a session opened before the hold. */
  sourceNow(): Promise<BinlogPosition>;
  /** Inside the hold: wait until `at` is applied (the keys read so far first); says how long each part took. */
  tail(at: BinlogPosition): Promise<{ flush_ms: number; read_ms: number; tail_rows: number }>;
  close(): Promise<void>;
}

export async function catchUpForHold(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, from: BinlogPosition, deps: MoveDeps = {}): Promise<HeldCatchUp> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const tailer = await tailerFor(ctx, spec, prepared, from);
  // The source position is read while writes are held: on a session opened before, not a new one.
  const login = replicationLogin(ctx, spec.source);
  const positions = await openShard(login);
  positions.on('error', () => {});
  const sourceNow = () => masterPosition(positions).catch(() => withShard(login, masterPosition));
  const ms = (from: number, to: number) => Math.round((to - from) * 10) / 10;
  return {
    tailer,
    sourceNow,
    level: async () => tailer.waitFor(await sourceNow(), limits.catchUpMs, ctx.signal),
    tail: async (at) => {
      const before = tailer.rowsResynced;
      const t0 = performance.now();
      await tailer.flush();
      const t1 = performance.now();
      await tailer.waitFor(at, limits.cutOverCatchUpMs, ctx.signal);
      return { flush_ms: ms(t0, t1), read_ms: ms(t1, performance.now()), tail_rows: tailer.rowsResynced - before };
    },
    close: async () => {
      await positions.end().catch(() => positions.destroy());
    },
  };
}

/** Stops the move's catch-up in this member (after the cut-over, or on rollback). */
export async function stopCatchUp(jobId: string, key: string): Promise<void> {
  await tailers.get(`${jobId}/${key}`)?.close();
}

async function sourcePosition(ctx: Ctx, spec: MoveSpec): Promise<BinlogPosition> {
  return withShard(replicationLogin(ctx, spec.source), masterPosition);
}

export async function catchUpPhase(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, deps: MoveDeps = {}): Promise<CaughtUp> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const tailer = await tailerFor(ctx, spec, prepared, prepared.start);
  await tailer.waitFor(await sourcePosition(ctx, spec), limits.catchUpMs, ctx.signal);
  return { at: tailer.applied, rows_resynced: tailer.rowsResynced };
}

export async function verifyPhase(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, caught: CaughtUp, deps: MoveDeps = {}): Promise<VerifySummary> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const tailer = await tailerFor(ctx, spec, prepared, caught.at);
  const out = await withShard(storageLogin(ctx, spec.source), (src) =>
    withShard(storageLogin(ctx, spec.target), async (dst) =>
      verifyCopy(src, dst, spec.source, spec.target, prepared.shape, {
        sourceCasts: await widenedColumnCasts(src, dst, spec.source, spec.target, prepared.shape),
        chunkRows: limits.chunkRows,
        rechecks: 3,
        catchUp: async () => tailer.waitFor(await sourcePosition(ctx, spec), limits.catchUpMs, ctx.signal),
        progress: async () => {},
      }),
    ),
  );
  if (out.bad.length > 0) {
    const keyNames = prepared.shape.key.map((k) => k.name).join(', ');
    throw KcmError.of(
      'DATA_CHECK_FAILED',
      `verify: ${out.bad.length} row(s) of ${where(spec.target)} differ from the source after the catch-up; primary key (${keyNames}) = ${out.bad.slice(0, 10).join('; ')}${out.bad.length > 10 ? '; ...' : ''}. The source keeps serving`,
    );
  }
  return { rows: out.rows, chunks: out.chunks, ms: Math.round(out.ms) };
}

export async function cutOverPhase(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, caught: CaughtUp, deps: MoveDeps = {}): Promise<CutOverSummary> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const agent = deps.foreignTables ?? keptForeignTables((h) => ctx.agents.agentAddress(h));
  let held: HeldCatchUp | null = null;
  try {
    const target = clusterOfStep(ctx, spec.target.clusterId);
    const comps = Object.values(target.comps).map((c) => ({ hostaddr: c.hostaddr, port: c.port }));
    const targetServer = `shard_${spec.target.shardId}`;
    // A re-run after the commit finds every foreign table on the target already: nothing to hold.
    const servers = await Promise.all(comps.map((c) => agent.server(c.hostaddr, { port: c.port, ...spec.foreign })));
    const tailer = await tailerFor(ctx, spec, prepared, caught.at);
    if (comps.length > 0 && servers.every((s) => s.server === targetServer)) {
      await stopCatchUp(ctx.jobId, spec.key);
      return { blocked_ms: 0, cut_over_ms: 0, at: tailer.applied, rows_resynced: tailer.rowsResynced };
    }
    const catchUp = await catchUpForHold(ctx, spec, prepared, caught.at, deps);
    held = catchUp;
    // Level first, outside the hold, so the hold waits only for the last few writes.
    await catchUp.level();
    let lastError: unknown;
    for (let attempt = 1; attempt <= limits.cutOverAttempts; attempt++) {
      // The tail inside the hold: the first flush (keys already read), then the wait for the rest.
      let tail = { flush_ms: 0, read_ms: 0, tail_rows: 0 };
      try {
        const out = await cutOver(agent, {
          holdId: `${ctx.jobId}-${spec.key}-${attempt}`,
          comps,
          foreign: spec.foreign,
          targetServer,
          holdMs: limits.cutOverCatchUpMs + 5_000,
          sourcePosition: catchUp.sourceNow,
          caughtUp: async (at) => {
            tail = await catchUp.tail(at);
          },
        });
        const summary = { blocked_ms: Math.round(out.blockedMs * 10) / 10, cut_over_ms: Math.round(out.cutOverMs * 10) / 10, at: tailer.applied, rows_resynced: tailer.rowsResynced };
        // The wall-clock span lets a load's own log be matched against the cut-over (bench/move);
        // the parts say where the blocked window went.
        ctx.logger.info({ table: `${spec.source.db}.${spec.source.table}`, blocked_ms: summary.blocked_ms, cut_over_ms: summary.cut_over_ms, span_from: out.span.from, span_to: out.span.to, ...out.parts, ...tail }, 'move cut over');
        await stopCatchUp(ctx.jobId, spec.key);
        return summary;
      } catch (err) {
        lastError = err;
        if (ctx.signal.aborted) throw err;
        ctx.logger.warn({ attempt, err: (err as Error).message }, 'move cut-over attempt failed; writes released, retrying');
      }
    }
    throw lastError;
  } finally {
    await held?.close();
    agent.close?.();
  }
}

export type RetireMode = 'drop' | 'rename';

/**
 * After the cut-over: the source table is dropped, or renamed aside to `<table>__moved_<job>`
 * in its database (shown by the compute nodes as such). A partition renamed aside loses its
 * partition record (the COMMENT kcm_ddl wrote) in the same statement: the catalog sync would
 * otherwise attach it to the parent again, beside the moved partition with the same bound.
 */
export async function retireSource(ctx: Ctx, spec: MoveSpec, mode: RetireMode): Promise<string> {
  return withShard(storageLogin(ctx, spec.source), async (src) => {
    const exists = await readTableShape(src, spec.source.db, spec.source.table).catch(() => undefined);
    const aside = `${spec.source.table.slice(0, 40)}__moved_${ctx.jobId}`;
    if (!exists) return mode === 'drop' ? '' : `${spec.source.db}.${aside}`;
    const table = `${q(spec.source.db)}.${q(spec.source.table)}`;
    if (mode === 'drop') {
      await src.query(`DROP TABLE ${table}`);
      return '';
    }
    const [info] = (await src.query(`SELECT TABLE_COMMENT AS comment FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, [spec.source.db, spec.source.table])) as unknown as [{ comment: string }[]];
    if (info[0]?.comment.startsWith('{"kcm_partition_of"')) await src.query(`ALTER TABLE ${table} COMMENT = '', RENAME TO ${q(spec.source.db)}.${q(aside)}`);
    else await src.query(`RENAME TABLE ${table} TO ${q(spec.source.db)}.${q(aside)}`);
    return `${spec.source.db}.${aside}`;
  });
}

/**
 * Rollback of a move that did not cut over: stops its catch-up and drops the target table
 * if the move created it (a pre-created target is left, with what the copy wrote). A move
 * whose foreign tables all point at the target is kept: it has cut over. One that some
 * compute nodes read from the target and others not ('partial': a commit lost between
 * nodes, or a node unreachable) is left as it is, source and target, for a person to see.
 */
export async function abandonMove(ctx: Ctx, spec: MoveSpec, deps: MoveDeps = {}): Promise<'dropped' | 'kept' | 'moved' | 'partial'> {
  await stopCatchUp(ctx.jobId, spec.key);
  const agent = deps.foreignTables ?? agentForeignTables((h) => ctx.agents.agentAddress(h));
  const comps = Object.values(clusterOfStep(ctx, spec.target.clusterId).comps);
  const servers = await Promise.all(comps.map((c) => agent.server(c.hostaddr, { port: c.port, ...spec.foreign }).catch(() => ({ server: '' }))));
  const onTarget = servers.filter((s) => s.server === `shard_${spec.target.shardId}`).length;
  if (onTarget > 0 && onTarget === servers.length) return 'moved';
  if (onTarget > 0) return 'partial';
  if (!spec.target.create) return 'kept';
  await withShard(storageLogin(ctx, spec.target), (dst) => dst.query(`DROP TABLE IF EXISTS ${q(spec.target.db)}.${q(spec.target.table)}`));
  return 'dropped';
}
