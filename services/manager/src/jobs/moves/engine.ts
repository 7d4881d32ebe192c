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
// The data work runs in the agents (ShardDataAgent, proto/agent-shard-data.proto): the
// agent of the source master's host copies into the target master and runs the catch-up
// (mariadb-binlog against its own master), the target master's agent compares; rows never
// pass through the manager, which orchestrates, records progress and decides the cut-over.
// Its control statements run in sessions the masters' agents hold (shard-sql.ts). The
// catch-up, keyed by job and move, lives in the source's agent from catchUpPhase to the
// cut-over: a new leader re-attaches to it (StartCatchUp answers a running one), or starts
// it again from the last position a step recorded, which is safe because the catch-up
// re-copies changed rows.

import type { StepContext } from '../framework/workflow';
import { clusterOfStep } from '../cluster-lookup';
import { KcmError } from '@kcm/protocol';
import type { BinlogPosition, CatchUpState, TableAt } from '@kcm/agent-api';
import { cutOver, foreignTablesOf } from './cutover';
import { loginAs, q, readTableShape, withShard, type ShardLogin, type ShardSession, type TableShape } from './shard-sql';

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
  /** The copy's span on the manager's wall clock (ms since the epoch); absent in outputs recorded before it was. */
  started_at?: number;
  ended_at?: number;
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

/** The engine's settings a job may narrow (tests: smaller chunks and timeouts). Agents are reached through ctx.agents. */
export interface MoveDeps {
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

/** The tables of a move as the agents take them: where each master is, with the storage account. */
function tableAt(ctx: Ctx, end: MoveEnd): TableAt {
  return { login: storageLogin(ctx, end), db: end.db, table: end.table };
}

/** The catch-up's key in the source's agent: one per job and move. */
const moveIdOf = (ctx: Ctx, spec: MoveSpec) => `${ctx.jobId}/${spec.key}`;

const sourceAgent = (ctx: Ctx, spec: MoveSpec) => ctx.agents.shardData(masterOf(ctx, spec.source).master.hostaddr);

/** The binlog position exactly consistent with a snapshot taken now (binlog_snapshot_file/position). */
async function snapshotPosition(c: ShardSession): Promise<BinlogPosition> {
  await c.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
  try {
    const [status] = (await c.query(`SHOW STATUS LIKE 'binlog_snapshot_%'`)) as unknown as [{ Variable_name: string; Value: string }[]];
    const snap = new Map(status.map((row) => [row.Variable_name.toLowerCase(), row.Value]));
    return { file: snap.get('binlog_snapshot_file') ?? '', pos: Number(snap.get('binlog_snapshot_position') ?? 0) };
  } finally {
    await c.query('COMMIT');
  }
}

/** Records the source position (before any snapshot the copy takes) and makes or checks the target. */
export async function prepareMove(ctx: Ctx, spec: MoveSpec): Promise<PreparedMove> {
  return withShard(ctx.agents, storageLogin(ctx, spec.source), async (src) => {
    // The position of a consistent snapshot, not SHOW MASTER STATUS: with semi-sync AFTER_SYNC
    // the binlog's end may hold transactions not yet committed, which a later copy snapshot
    // could miss while the catch-up, starting after them, would never replay them.
    const start = await snapshotPosition(src);
    const shape = await readTableShape(src, spec.source.db, spec.source.table);
    if (!shape) throw KcmError.of('NOT_FOUND', `table ${where(spec.source)} does not exist`);
    if (shape.key.length === 0) throw KcmError.of('UNSUPPORTED', `table ${where(spec.source)} has no primary key; a move copies and verifies by primary key`);
    await withShard(ctx.agents, storageLogin(ctx, spec.target), async (dst) => {
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
        await dst.query(`USE ${q(spec.target.db)}`);
        await dst.query(ddl.replace(/^CREATE TABLE `(?:[^`]|``)+`/, `CREATE TABLE ${q(spec.target.table)}`));
      } else if (!existing) {
        throw KcmError.of('NOT_FOUND', `target table ${where(spec.target)} does not exist; it must be created before the move`);
      }
    });
    return { start, shape };
  });
}

/** The target shard's standbys as the copy's lag check reads them (storage account). */
function targetStandbys(ctx: Ctx, spec: MoveSpec): ShardLogin[] {
  const { cluster, shard, master } = masterOf(ctx, spec.target);
  return Object.values(shard.nodes)
    .filter((n) => n.id !== master.id && !n.fenced)
    .map((n) => loginAs(ctx.secrets, cluster, n, 'storage'));
}

export interface CopyOptions {
  /** A target fed by several sources holds the others' keys: copy from the first key, not after the target's highest. */
  fromStart?: boolean;
  /** Called with the rows this copy committed so far (a Raft commit of progress). */
  progress?: (rows: number) => Promise<void>;
  /** Stops this copy (with the step's signal): a job copying several tables at once stops the others when one fails. */
  signal?: AbortSignal;
}

/**
 * The copy, run by the source master's agent into the target master: chunks from one
 * consistent snapshot, committed in groups, throttled while a target standby lags; it
 * resumes after the target's highest key (a new leader's call; the old call is cancelled
 * with its leadership). One progress record per target commit, in order.
 */
export async function copyPhase(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, deps: MoveDeps = {}, options: CopyOptions = {}): Promise<CopySummary> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const progress = options.progress ?? ((rows: number) => ctx.progress(rows, 0));
  const startedAt = Date.now();
  let recorded: Promise<void> = Promise.resolve();
  const last = await sourceAgent(ctx, spec).copyRows(
    {
      move_id: moveIdOf(ctx, spec),
      source: tableAt(ctx, spec.source),
      target: tableAt(ctx, spec.target),
      shape: { columns: prepared.shape.columns, text: prepared.shape.text ?? [], key: prepared.shape.key },
      chunk_rows: limits.chunkRows,
      commit_rows: limits.copyCommitRows,
      commit_bytes: limits.copyCommitBytes,
      commit_ms: limits.copyCommitMs,
      rows_per_second: limits.copyRowsPerSecond,
      max_target_lag_trx: limits.maxTargetLagTrx,
      target_standbys: targetStandbys(ctx, spec),
      from_start: options.fromStart ?? false,
      resume_after_json: '',
    },
    // Progress records go one after the other, never holding the stream back.
    (p) => {
      recorded = recorded.then(() => progress(p.rows)).catch(() => {});
    },
    options.signal ? AbortSignal.any([ctx.signal, options.signal]) : ctx.signal,
  );
  await recorded;
  return { rows: last.rows, chunks: last.chunks, resumed_after: last.resumed_after_json === 'null' ? '' : last.resumed_after_json, ms: Math.round(last.ms), started_at: startedAt, ended_at: Date.now() };
}

/** Starts the move's catch-up in the source's agent from `from`, or finds it running there. */
async function startCatchUp(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, from: BinlogPosition): Promise<CatchUpState> {
  return sourceAgent(ctx, spec).startCatchUp({
    move_id: moveIdOf(ctx, spec),
    binlog_login: replicationLogin(ctx, spec.source),
    source: tableAt(ctx, spec.source),
    target: tableAt(ctx, spec.target),
    shape: { columns: prepared.shape.columns, text: prepared.shape.text ?? [], key: prepared.shape.key },
    start: from,
  });
}

/** Makes the move's catch-up apply nothing more, at once; stopCatchUp ends it later (inside a hold, before renames). */
export async function haltCatchUp(ctx: Ctx, spec: MoveSpec): Promise<void> {
  await sourceAgent(ctx, spec).haltCatchUp(moveIdOf(ctx, spec));
}

/** The catch-up as a hold uses it (the cut-over, repartition's switch of names). */
export interface HeldCatchUp {
  /** Outside the hold: wait until the source's position now is applied, so the hold waits only for the last writes. */
  level(): Promise<void>;
  /** Inside the hold: the source's position, read on a session the catch-up opened before the hold. */
  sourceNow(): Promise<BinlogPosition>;
  /** Inside the hold: wait until `at` is applied (the keys read so far first); says how long each part took. */
  tail(at: BinlogPosition): Promise<{ flush_ms: number; read_ms: number; tail_rows: number }>;
  /** The catch-up's state now (applied position, rows re-copied). */
  state(): Promise<CatchUpState>;
}

export async function catchUpForHold(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, from: BinlogPosition, deps: MoveDeps = {}): Promise<HeldCatchUp> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const agent = sourceAgent(ctx, spec);
  const moveId = moveIdOf(ctx, spec);
  await startCatchUp(ctx, spec, prepared, from);
  return {
    level: async () => void (await agent.catchUpTo(moveId, null, limits.catchUpMs)),
    sourceNow: () => agent.sourcePosition(moveId),
    tail: async (at) => {
      const r = await agent.catchUpTail(moveId, at, limits.cutOverCatchUpMs);
      return { flush_ms: r.flush_ms, read_ms: r.read_ms, tail_rows: r.tail_rows };
    },
    // StartCatchUp answers a running catch-up's state (and starts one the agent lost).
    state: () => startCatchUp(ctx, spec, prepared, from),
  };
}

/** Stops the move's catch-up in the source's agent (after the cut-over, or on rollback). */
export async function stopCatchUp(ctx: Ctx, spec: MoveSpec): Promise<void> {
  await sourceAgent(ctx, spec).stopCatchUp(moveIdOf(ctx, spec));
}

export async function catchUpPhase(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, deps: MoveDeps = {}): Promise<CaughtUp> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  await startCatchUp(ctx, spec, prepared, prepared.start);
  const state = await sourceAgent(ctx, spec).catchUpTo(moveIdOf(ctx, spec), null, limits.catchUpMs);
  return { at: state.applied, rows_resynced: state.rows_resynced };
}

/** A key as the verify's messages name it: each value as text (binary as hex). */
export const keyText = (key: unknown[]) => JSON.stringify(key.map((v) => (Buffer.isBuffer(v) ? v.toString('hex') : String(v))));

/**
 * The verify gate's comparison of a target with its sources (one move, or a partitioned
 * source's pieces copied into one table), run by the target master's agent; the keys that
 * differ are compared again after every source's catch-up reached the source's position
 * then, `rechecks` times, so a row written between two reads differs once, not every time.
 * Resolves with the rows read per source and the keys that still differ.
 */
export async function compareWithCatchUps(ctx: Ctx, target: MoveEnd, feeders: readonly { spec: MoveSpec; prepared: PreparedMove; from: BinlogPosition }[], deps: MoveDeps = {}): Promise<{ sourceRows: number[]; chunks: number; bad: unknown[][]; ms: number }> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const shape = feeders[0].prepared.shape;
  const request = {
    sources: feeders.map((f) => tableAt(ctx, f.spec.source)),
    target: tableAt(ctx, target),
    shape: { columns: shape.columns, text: shape.text ?? [], key: shape.key },
    chunk_rows: limits.chunkRows,
  };
  const agent = ctx.agents.shardData(masterOf(ctx, target).master.hostaddr);
  const first = await agent.compare(request, null);
  let bad = first.differing;
  for (let round = 0; round < 3 && bad.length > 0; round++) {
    // A catch-up not running in the source's agent (restarted) starts where the catch-up step left off.
    for (const f of feeders) {
      await startCatchUp(ctx, f.spec, f.prepared, f.from);
      await sourceAgent(ctx, f.spec).catchUpTo(moveIdOf(ctx, f.spec), null, limits.catchUpMs);
    }
    bad = (await agent.compare(request, bad)).differing;
    if (bad.length > 0) await new Promise((r) => setTimeout(r, 200));
  }
  return { sourceRows: first.sourceRows, chunks: first.chunks, bad, ms: first.ms };
}

export async function verifyPhase(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, caught: CaughtUp, deps: MoveDeps = {}): Promise<VerifySummary> {
  const started = performance.now();
  const out = await compareWithCatchUps(ctx, spec.target, [{ spec, prepared, from: caught.at }], deps);
  if (out.bad.length > 0) {
    const keyNames = prepared.shape.key.map((k) => k.name).join(', ');
    throw KcmError.of(
      'DATA_CHECK_FAILED',
      `verify: ${out.bad.length} row(s) of ${where(spec.target)} differ from the source after the catch-up; primary key (${keyNames}) = ${out.bad.slice(0, 10).map(keyText).join('; ')}${out.bad.length > 10 ? '; ...' : ''}. The source keeps serving`,
    );
  }
  return { rows: out.sourceRows[0] ?? 0, chunks: out.chunks, ms: Math.round(performance.now() - started) };
}

export async function cutOverPhase(ctx: Ctx, spec: MoveSpec, prepared: PreparedMove, caught: CaughtUp, deps: MoveDeps = {}): Promise<CutOverSummary> {
  const limits = { ...DEFAULT_MOVE_LIMITS, ...deps.limits };
  const agent = foreignTablesOf(ctx.agents);
  const target = clusterOfStep(ctx, spec.target.clusterId);
  const comps = Object.values(target.comps).map((c) => ({ hostaddr: c.hostaddr, port: c.port }));
  const targetServer = `shard_${spec.target.shardId}`;
  // A re-run after the commit finds every foreign table on the target already: nothing to hold.
  const servers = await Promise.all(comps.map((c) => agent.server(c.hostaddr, { port: c.port, ...spec.foreign })));
  if (comps.length > 0 && servers.every((s) => s.server === targetServer)) {
    const state = await startCatchUp(ctx, spec, prepared, caught.at);
    await stopCatchUp(ctx, spec);
    return { blocked_ms: 0, cut_over_ms: 0, at: state.applied, rows_resynced: state.rows_resynced };
  }
  const catchUp = await catchUpForHold(ctx, spec, prepared, caught.at, deps);
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
      const state = await catchUp.state();
      const summary = { blocked_ms: Math.round(out.blockedMs * 10) / 10, cut_over_ms: Math.round(out.cutOverMs * 10) / 10, at: state.applied, rows_resynced: state.rows_resynced };
      // The wall-clock span lets a load's own log be matched against the cut-over (bench/move);
      // the parts say where the blocked window went.
      ctx.logger.info({ table: `${spec.source.db}.${spec.source.table}`, blocked_ms: summary.blocked_ms, cut_over_ms: summary.cut_over_ms, span_from: out.span.from, span_to: out.span.to, ...out.parts, ...tail }, 'move cut over');
      await stopCatchUp(ctx, spec);
      return summary;
    } catch (err) {
      lastError = err;
      if (ctx.signal.aborted) throw err;
      ctx.logger.warn({ attempt, err: (err as Error).message }, 'move cut-over attempt failed; writes released, retrying');
    }
  }
  throw lastError;
}

export type RetireMode = 'drop' | 'rename';

/**
 * After the cut-over: the source table is dropped, or renamed aside to `<table>__moved_<job>`
 * in its database (shown by the compute nodes as such). A partition renamed aside loses its
 * partition record (the COMMENT kcm_ddl wrote) in the same statement: the catalog sync would
 * otherwise attach it to the parent again, beside the moved partition with the same bound.
 */
export async function retireSource(ctx: Ctx, spec: MoveSpec, mode: RetireMode): Promise<string> {
  return withShard(ctx.agents, storageLogin(ctx, spec.source), async (src) => {
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
  await stopCatchUp(ctx, spec).catch(() => {});
  const agent = foreignTablesOf(ctx.agents);
  const comps = Object.values(clusterOfStep(ctx, spec.target.clusterId).comps);
  const servers = await Promise.all(comps.map((c) => agent.server(c.hostaddr, { port: c.port, ...spec.foreign }).catch(() => ({ server: '' }))));
  const onTarget = servers.filter((s) => s.server === `shard_${spec.target.shardId}`).length;
  if (onTarget > 0 && onTarget === servers.length) return 'moved';
  if (onTarget > 0) return 'partial';
  if (!spec.target.create) return 'kept';
  await withShard(ctx.agents, storageLogin(ctx, spec.target), (dst) => dst.query(`DROP TABLE IF EXISTS ${q(spec.target.db)}.${q(spec.target.table)}`));
  return 'dropped';
}
