// repartition_tables' switch of names when a side is a partitioned table (switch-names.ts
// does it for two plain tables). A partitioned table's name lives on the compute nodes (a
// local parent there) and in its partitions' shard COMMENTs (from which the catalog sync
// rebuilds the parent elsewhere), so the switch is:
//
//   before the hold   agents' connections, the shard sessions, every piece's catch-up level
//   hold              every compute node locks the source and the target (writers queue)
//   tail, halt        each piece's catch-up applies its source's last writes and stops applying
//   shards            partition COMMENTs name the new parents (the source's -> the aside name,
//                     the target's -> the source's name); a plain side's shard table is renamed
//   commit            on every compute node, in the held transaction: source -> aside, target ->
//                     the source's name (a plain target's foreign table reads its renamed shard
//                     table); a held writer then finds the target under the name
//
// The blocked window is the agents' figure: from a compute node's lock asked for to its
// commit. A failure before the commits undoes the shard side and releases the holds: the
// source serves under its name. Re-run (new leader): when the shard side is done, compute
// nodes already switched are left, the others switched; when none was, the shard side is
// undone and the switch runs again from the catch-up's last recorded position.

import type { RelationRename, RelationSwitchAgentApi } from '@kcm/agent-api';
import type { BinlogPosition } from '@kcm/agent-api';
import { catchUpForHold, haltCatchUp, stopCatchUp, type HeldCatchUp, type MoveDeps, type MoveSpec, type PreparedMove } from '../moves/engine';
import type { Agents } from '@kcm/agent-api';
import { openShard, q, type ShardLogin, type ShardSession } from '../moves/shard-sql';
import type { StepContext } from '../framework/workflow';
import type { LocatedPair } from './check';
import { parsePartitionRecord, repointPartitionComment } from './partitions';
import type { SwitchSummary } from './switch-names';

type Ctx = StepContext<unknown, object>;

export interface ParentSwitchPlan {
  pair: LocatedPair & { pieces: NonNullable<LocatedPair['pieces']> };
  /** The pair's piece moves, each with where its catch-up step left off. */
  moves: { spec: MoveSpec; prepared: PreparedMove; caughtAt: BinlogPosition }[];
  /** The storage login of a shard master of the (one) cluster. */
  login(shardId: string): ShardLogin;
  comps: { hostaddr: string; port: number }[];
  /** The compute nodes' database and schema of the pair (`<db>_$$_<schema>`). */
  compute: { database: string; schema: string };
  aside: string;
  moveDeps: MoveDeps;
  holdMs: number;
}

type Direction = 'forward' | 'back';

/** The compute-node renames of the switch, or of its undoing. */
function renamesOf(p: ParentSwitchPlan, direction: Direction): RelationRename[] {
  const { schema } = p.compute;
  const [source, target] = [p.pair.source.table, p.pair.target.table];
  const srcPlain = p.pair.pieces.source.kind === 'plain';
  const dstPlain = p.pair.pieces.target.kind === 'plain';
  if (direction === 'forward') {
    return [
      { schema, old_name: source, new_name: p.aside, remote_table: srcPlain ? p.aside : '' },
      { schema, old_name: target, new_name: source, remote_table: dstPlain ? source : '' },
    ];
  }
  return [
    { schema, old_name: source, new_name: target, remote_table: dstPlain ? target : '' },
    { schema, old_name: p.aside, new_name: source, remote_table: srcPlain ? source : '' },
  ];
}

/** Sessions on the shard masters the switch changes, by shard id, opened before the hold. */
type Sessions = Map<string, ShardSession>;

async function openSessions(agents: Agents, p: ParentSwitchPlan): Promise<Sessions> {
  const shards = new Set([...p.pair.pieces.source.pieces, ...p.pair.pieces.target.pieces].map((x) => x.shardId));
  const sessions: Sessions = new Map();
  try {
    for (const id of shards) {
      sessions.set(id, await openShard(agents, p.login(id)));
    }
  } catch (err) {
    await closeSessions(sessions);
    throw err;
  }
  return sessions;
}

async function closeSessions(sessions: Sessions): Promise<void> {
  for (const c of sessions.values()) await c.end();
}

const exists = async (c: ShardSession, db: string, table: string) =>
  ((await c.query('SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?', [db, table])) as unknown as [unknown[]])[0].length > 0;

/** A partition's record made to name `parent` (nothing when it does already). */
async function recordParent(c: ShardSession, db: string, table: string, parent: string): Promise<void> {
  const [rows] = (await c.query('SELECT TABLE_COMMENT AS c FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?', [db, table])) as unknown as [{ c: string }[]];
  const comment = rows[0]?.c ?? '';
  const rec = parsePartitionRecord(comment);
  if (!rec || rec.parent === parent) return;
  await c.query(`ALTER TABLE ${q(db)}.${q(table)} COMMENT = ?`, [repointPartitionComment(comment, parent)]);
}

/** A plain side's shard table renamed (nothing when it is already). */
async function renameShardTable(c: ShardSession, db: string, from: string, to: string): Promise<void> {
  if ((await exists(c, db, from)) && !(await exists(c, db, to))) await c.query(`RENAME TABLE ${q(db)}.${q(from)} TO ${q(db)}.${q(to)}`);
}

/** The shard side of the switch (or its undoing): idempotent, the shards in parallel. */
async function switchShards(p: ParentSwitchPlan, sessions: Sessions, direction: Direction): Promise<void> {
  const db = p.pair.source.database;
  const [source, target] = [p.pair.source.table, p.pair.target.table];
  const work: Promise<void>[] = [];
  const on = (shardId: string, f: (c: ShardSession) => Promise<void>) => {
    const c = sessions.get(shardId);
    if (c) work.push(f(c));
  };
  const { source: src, target: dst } = p.pair.pieces;
  for (const piece of src.pieces) {
    if (src.kind === 'partitioned') on(piece.shardId, (c) => recordParent(c, db, piece.table, direction === 'forward' ? p.aside : source));
    else on(piece.shardId, (c) => (direction === 'forward' ? renameShardTable(c, db, source, p.aside) : renameShardTable(c, db, p.aside, source)));
  }
  for (const piece of dst.pieces) {
    if (dst.kind === 'partitioned') on(piece.shardId, (c) => recordParent(c, db, piece.table, direction === 'forward' ? source : target));
    else on(piece.shardId, (c) => (direction === 'forward' ? renameShardTable(c, db, target, source) : renameShardTable(c, db, source, target)));
  }
  const settled = await Promise.allSettled(work);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
}

/** Whether the shard side is done: the source's first piece already names (or is) the aside. */
async function shardsSwitched(p: ParentSwitchPlan, sessions: Sessions): Promise<boolean> {
  const first = p.pair.pieces.source.pieces[0];
  const c = sessions.get(first.shardId)!;
  const db = p.pair.source.database;
  if (p.pair.pieces.source.kind === 'plain') return exists(c, db, p.aside);
  const [rows] = (await c.query('SELECT TABLE_COMMENT AS c FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?', [db, first.table])) as unknown as [{ c: string }[]];
  return parsePartitionRecord(rows[0]?.c)?.parent === p.aside;
}

const relations = (p: ParentSwitchPlan) => [p.pair.source.table, p.pair.target.table, p.aside].map((table) => ({ schema: p.compute.schema, table }));

export async function switchParent(ctx: Ctx, p: ParentSwitchPlan): Promise<SwitchSummary> {
  const clients = new Map(p.comps.map((c) => [c.hostaddr, ctx.agents.relationSwitch(c.hostaddr)]));
  const agent = (c: { hostaddr: string }) => clients.get(c.hostaddr)!;
  const holdId = (c: { hostaddr: string; port: number }, what: string) => `${ctx.jobId}-${p.moves[0]?.spec.key ?? 'p'}-${what}-${c.hostaddr}-${c.port}`;
  const at = (c: { port: number }) => ({ port: c.port, database: p.compute.database });
  const summary = (blocked: number, resynced: number): SwitchSummary => ({
    table: `${p.pair.target.database}.${p.pair.source.table}`,
    old_table: `${p.pair.source.database}.${p.aside}`,
    blocked_ms: Math.round(blocked * 10) / 10,
    rows_resynced: resynced,
  });
  const sessions = await openSessions(ctx.agents, p);
  try {
    if (await shardsSwitched(p, sessions)) {
      const done = await finishRerun(ctx, p, sessions, agent, holdId, at);
      if (done) return summary(0, 0);
    }
    return await switchUnderHold(ctx, p, sessions, agent, holdId, at, summary);
  } finally {
    await closeSessions(sessions);
  }
}

type AgentOf = (c: { hostaddr: string }) => RelationSwitchAgentApi;
type HoldIdOf = (c: { hostaddr: string; port: number }, what: string) => string;
type AtOf = (c: { port: number }) => { port: number; database: string };

/**
 * A re-run that finds the shard side done: compute nodes already switched are left; if some
 * were, the others are switched now (true: done); if none was, the shard side is undone and
 * the caller switches again from the start (false).
 */
async function finishRerun(ctx: Ctx, p: ParentSwitchPlan, sessions: Sessions, agent: AgentOf, holdId: HoldIdOf, at: AtOf): Promise<boolean> {
  for (const m of p.moves) await stopCatchUp(ctx, m.spec).catch(() => {});
  const states = await Promise.all(
    p.comps.map(async (c) => {
      const id = holdId(c, 'probe');
      const h = await agent(c).hold(id, at(c), relations(p), p.holdMs);
      await agent(c).release(id);
      return { c, switched: h.present.includes(`${p.compute.schema}.${p.aside}`) };
    }),
  );
  if (!states.some((s) => s.switched)) {
    await switchShards(p, sessions, 'back');
    return false;
  }
  const rest = states.filter((s) => !s.switched);
  if (rest.length > 0) ctx.logger.warn({ comps: rest.map((s) => `${s.c.hostaddr}:${s.c.port}`) }, 'repartition: a re-run finds some compute nodes not switched; switching them now');
  for (const { c } of rest) {
    const id = holdId(c, 'rerun');
    await agent(c).hold(id, at(c), relations(p), p.holdMs);
    await agent(c).switch(id, renamesOf(p, 'forward'));
  }
  await switchShards(p, sessions, 'forward');
  return true;
}

async function switchUnderHold(ctx: Ctx, p: ParentSwitchPlan, sessions: Sessions, agent: AgentOf, holdId: HoldIdOf, at: AtOf, summary: (blocked: number, resynced: number) => SwitchSummary): Promise<SwitchSummary> {
  const held: typeof p.comps = [];
  const caught: HeldCatchUp[] = [];
  let shardsTouched = false;
  let committing = false;
  try {
    // Outside the hold: the agents' channels (a release of no hold), every piece's catch-up and its position session, then level.
    await Promise.all(p.comps.map((c) => agent(c).release(holdId(c, 'warm'))));
    for (const m of p.moves) caught.push(await catchUpForHold(ctx, m.spec, m.prepared, m.caughtAt, p.moveDeps));
    const resynced = async () => (await Promise.all(caught.map((h) => h.state()))).reduce((n, st) => n + st.rows_resynced, 0);
    const resyncedBefore = await resynced();
    await Promise.all(caught.map((h) => h.level()));
    const started = performance.now();
    const marks: number[] = [];
    const mark = () => marks.push(performance.now());
    await Promise.all(
      p.comps.map(async (c) => {
        await agent(c).hold(holdId(c, 'switch'), at(c), relations(p), p.holdMs);
        held.push(c);
      }),
    );
    mark();
    // Writes through the compute nodes wait now: every piece's target level with its source, then no more applying.
    const tails = await Promise.all(caught.map(async (h) => h.tail(await h.sourceNow())));
    mark();
    await Promise.all(p.moves.map((m) => haltCatchUp(ctx, m.spec)));
    mark();
    shardsTouched = true;
    await switchShards(p, sessions, 'forward');
    mark();
    committing = true;
    const committed = await Promise.all(held.map((c) => agent(c).switch(holdId(c, 'switch'), renamesOf(p, 'forward'))));
    held.length = 0;
    mark();
    const blocked = Math.max(0, ...committed.map((r) => r.held_ms));
    const [holds, tailed, halted, shards, commits] = marks.map((t) => Math.round((t - started) * 10) / 10);
    ctx.logger.info(
      {
        table: `${p.pair.source.database}.${p.pair.source.table}`,
        pieces: p.moves.length,
        blocked_ms: Math.round(blocked * 10) / 10,
        holds_ms: holds,
        tail_ms: Math.round((tailed - holds) * 10) / 10,
        tail_rows: tails.reduce((n, t) => n + t.tail_rows, 0),
        halt_ms: Math.round((halted - tailed) * 10) / 10,
        shards_ms: Math.round((shards - halted) * 10) / 10,
        commit_ms: Math.round((commits - shards) * 10) / 10,
        agent_ddl_ms: Math.max(0, ...committed.map((r) => r.ddl_ms)),
      },
      'repartition switched names',
    );
    return summary(blocked, (await resynced()) - resyncedBefore);
  } catch (err) {
    // Some compute nodes may have committed: the job's rollback (unswitchParent) sorts out which.
    if (shardsTouched && !committing) await switchShards(p, sessions, 'back').catch((e: unknown) => ctx.logger.error({ err: e }, 'repartition: undoing the shard side of the switch failed'));
    await Promise.allSettled(held.map((c) => agent(c).release(holdId(c, 'switch'))));
    throw err;
  } finally {
    for (const m of p.moves) await stopCatchUp(ctx, m.spec).catch(() => {});
  }
}

/**
 * Rollback of a pair whose switch may have run: compute nodes that switched are switched
 * back, then the shard side is undone, so the source serves under its name again.
 */
export async function unswitchParent(ctx: Ctx, p: ParentSwitchPlan): Promise<void> {
  const sessions = await openSessions(ctx.agents, p);
  const clients = new Map(p.comps.map((c) => [c.hostaddr, ctx.agents.relationSwitch(c.hostaddr)]));
  try {
    for (const c of p.comps) {
      const client = clients.get(c.hostaddr)!;
      const id = `${ctx.jobId}-undo-${c.hostaddr}-${c.port}`;
      const h = await client.hold(id, { port: c.port, database: p.compute.database }, relations(p), p.holdMs);
      if (h.present.includes(`${p.compute.schema}.${p.aside}`)) await client.switch(id, renamesOf(p, 'back'));
      else await client.release(id);
    }
    await switchShards(p, sessions, 'back');
  } finally {
    await closeSessions(sessions);
  }
}
