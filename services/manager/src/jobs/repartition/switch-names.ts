// The last step of repartition_tables: switch names. With writes through the source
// cluster's compute nodes held on the source's foreign table, the catch-up applies the
// source's last writes to the target and stops; then the source table is renamed aside
// (`<table>__repart_<job>`) and the target takes the source table's name in its own
// database. When the target is in the source's cluster and database, the held foreign
// table is re-pointed at the target's shard in the same commit that releases the writers;
// otherwise the hold is released (the name now lives in another database or cluster, and
// catalog sync shows it there within a second) and held writers get "no such table", never
// a lost write. The blocked window is measured as the cut-over's: from a compute node's
// lock asked for to its commit (see switchUnderHold).
// Inside it only the last catch-up, the renames and the re-point (a swap of names: the
// agent prepared the replacement before its lock) remain: the agents' connections, the
// position and rename sessions are opened and the catch-up is brought level before it, and
// the catch-up is halted (not stopped, which waits for its reader to exit) before the renames.
//
// Idempotent: a re-run finds the renames done (the aside table exists) and only finishes
// the re-point. A failure before the re-point undoes the renames, so the source keeps
// serving under its name.

import type { ForeignTableRef } from '@kcm/agent-api';
import type { ForeignTableAgent } from '../moves/cutover';
import type { BinlogPosition } from '@kcm/agent-api';
import { catchUpForHold, haltCatchUp, stopCatchUp, type MoveDeps, type MoveSpec, type PreparedMove } from '../moves/engine';
import type { Agents } from '@kcm/agent-api';
import { openShard, q, withShard, type ShardLogin, type ShardSession } from '../moves/shard-sql';
import type { StepContext } from '../framework/workflow';

export interface SwitchSummary {
  /** The target's name after the switch (`database.table`). */
  table: string;
  /** Where the source table was renamed to (`database.table`). */
  old_table: string;
  blocked_ms: number;
  rows_resynced: number;
}

export interface SwitchPlan {
  spec: MoveSpec;
  prepared: PreparedMove;
  /** Where the catch-up step left off: a catch-up started again in this member starts there. */
  caughtAt: BinlogPosition;
  sourceLogin: ShardLogin;
  targetLogin: ShardLogin;
  /** The source cluster's compute nodes, which route the source table's name now. */
  comps: { hostaddr: string; port: number }[];
  /** Re-point the held foreign table at this server; '' = release it (the name moves away). */
  repointTo: string;
  /** The compute nodes' agents (foreignTablesOf: the pool's kept clients, so the hold's calls reuse connections opened before it). */
  agent: ForeignTableAgent;
  moveDeps: MoveDeps;
  holdMs: number;
}

export const asideName = (table: string, jobId: string) => `${table.slice(0, 40)}__repart_${jobId}`;

type Ctx = StepContext<unknown, object>;

async function tableExists(agents: Agents, login: ShardLogin, db: string, table: string): Promise<boolean> {
  return withShard(agents, login, async (c) => {
    const [rows] = (await c.query('SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?', [db, table])) as unknown as [unknown[]];
    return rows.length > 0;
  });
}

const sameInstance = (a: ShardLogin, b: ShardLogin) => a.host === b.host && a.port === b.port;

/**
 * Source aside, target to the source's name: one atomic RENAME when both are on one
 * instance, else the two at once (unswitchNames undoes either). On sessions opened before
 * the hold.
 */
async function renameBoth(p: SwitchPlan, aside: string, sessions: { src: ShardSession; dst: ShardSession }): Promise<void> {
  const { source, target } = p.spec;
  if (sameInstance(p.sourceLogin, p.targetLogin)) {
    const pairs = [`${q(source.db)}.${q(source.table)} TO ${q(source.db)}.${q(aside)}`];
    if (target.table !== source.table) pairs.push(`${q(target.db)}.${q(target.table)} TO ${q(target.db)}.${q(source.table)}`);
    await sessions.src.query(`RENAME TABLE ${pairs.join(', ')}`);
    return;
  }
  await Promise.all([
    sessions.src.query(`RENAME TABLE ${q(source.db)}.${q(source.table)} TO ${q(source.db)}.${q(aside)}`),
    target.table !== source.table ? sessions.dst.query(`RENAME TABLE ${q(target.db)}.${q(target.table)} TO ${q(target.db)}.${q(source.table)}`) : null,
  ]);
}

/** Undoes renameBoth as far as it got (the target first, then the source back to its name). */
export async function unswitchNames(agents: Agents, sourceLogin: ShardLogin, targetLogin: ShardLogin, spec: MoveSpec, aside: string): Promise<void> {
  const { source, target } = spec;
  if (!(await tableExists(agents, sourceLogin, source.db, aside))) return;
  if (target.table !== source.table && !(await tableExists(agents, targetLogin, target.db, target.table)) && (await tableExists(agents, targetLogin, target.db, source.table))) {
    await withShard(agents, targetLogin, (c) => c.query(`RENAME TABLE ${q(target.db)}.${q(source.table)} TO ${q(target.db)}.${q(target.table)}`));
  }
  await withShard(agents, sourceLogin, (c) => c.query(`RENAME TABLE ${q(source.db)}.${q(aside)} TO ${q(source.db)}.${q(source.table)}`));
}

export async function switchNames(ctx: Ctx, p: SwitchPlan): Promise<SwitchSummary> {
  const aside = asideName(p.spec.source.table, ctx.jobId);
  const summary = (blocked: number, resynced: number): SwitchSummary => ({
    table: `${p.spec.target.db}.${p.spec.source.table}`,
    old_table: `${p.spec.source.db}.${aside}`,
    blocked_ms: Math.round(blocked * 10) / 10,
    rows_resynced: resynced,
  });
  if (await tableExists(ctx.agents, p.sourceLogin, p.spec.source.db, aside)) {
    await finishSwitch(ctx, p);
    return summary(0, 0);
  }
  return switchUnderHold(ctx, p, aside, summary);
}

const foreignRef = (p: SwitchPlan, c: { port: number }): ForeignTableRef => ({ port: c.port, ...p.spec.foreign });

/** A re-run after the renames: finishes what the first run may not have (target name, re-point). */
async function finishSwitch(ctx: Ctx, p: SwitchPlan): Promise<void> {
  const { source, target } = p.spec;
  await stopCatchUp(ctx, p.spec);
  if (target.table !== source.table && (await tableExists(ctx.agents, p.targetLogin, target.db, target.table))) {
    await withShard(ctx.agents, p.targetLogin, (c) => c.query(`RENAME TABLE ${q(target.db)}.${q(target.table)} TO ${q(target.db)}.${q(source.table)}`));
  }
  if (!p.repointTo) return;
  for (const c of p.comps) {
    const holdId = `${ctx.jobId}-${p.spec.key}-rerun-${c.hostaddr}-${c.port}`;
    const h = await p.agent.hold(c.hostaddr, holdId, foreignRef(p, c), p.holdMs, p.repointTo);
    if (h.server === p.repointTo) await p.agent.release(c.hostaddr, holdId);
    else await p.agent.repoint(c.hostaddr, holdId, p.repointTo);
  }
}

/** The switch itself: writes held on the source's foreign table from the first hold to the last re-point or release. */
async function switchUnderHold(ctx: Ctx, p: SwitchPlan, aside: string, summary: (blocked: number, resynced: number) => SwitchSummary): Promise<SwitchSummary> {
  const { source } = p.spec;
  const ref = (c: { port: number }) => foreignRef(p, c);
  const holdId = (c: { hostaddr: string; port: number }) => `${ctx.jobId}-${p.spec.key}-switch-${c.hostaddr}-${c.port}`;
  const held: typeof p.comps = [];
  // Everything a held writer would otherwise wait for is opened before the hold: the agents'
  // connections (a ForeignTableServer call each), the catch-up's position session, and the
  // sessions that rename; and the catch-up is brought level first.
  await Promise.all(p.comps.map((c) => p.agent.server(c.hostaddr, ref(c))));
  const caught = await catchUpForHold(ctx, p.spec, p.prepared, p.caughtAt, p.moveDeps);
  const resyncedBefore = (await caught.state()).rows_resynced;
  let src: ShardSession | null = null;
  let dst: ShardSession | null = null;
  let renamed = false;
  try {
    src = await openShard(ctx.agents, p.sourceLogin);
    dst = sameInstance(p.sourceLogin, p.targetLogin) ? src : await openShard(ctx.agents, p.targetLogin);
    await caught.level();
    const started = performance.now();
    const marks: number[] = [];
    const mark = () => marks.push(performance.now());
    const lockWaits = await Promise.all(
      p.comps.map(async (c) => {
        const h = await p.agent.hold(c.hostaddr, holdId(c), ref(c), p.holdMs, p.repointTo || undefined);
        held.push(c);
        return h.lock_wait_ms ?? 0;
      }),
    );
    mark();
    // Writes through the compute nodes wait now: bring the target level with the source and stop applying.
    const tail = await caught.tail(await caught.sourceNow());
    mark();
    await haltCatchUp(ctx, p.spec);
    mark();
    renamed = true;
    await renameBoth(p, aside, { src, dst });
    mark();
    const repointed = await Promise.all(held.map(async (c) => (p.repointTo ? (await p.agent.repoint(c.hostaddr, holdId(c), p.repointTo)).held_ms : (await p.agent.release(c.hostaddr, holdId(c)), null))));
    mark();
    // As the cut-over's: from a compute node asking for its lock (writers queue behind it from
    // then on, not before: the hold's preparation lets them through) to its commit, on the
    // agent's clock; for a release, which does not time itself, the manager's span from the
    // last hold answered to the last release answered, plus the longest lock wait.
    const window = performance.now() - started;
    const blocked = p.repointTo ? Math.max(0, ...repointed.map((ms) => ms ?? 0)) : marks[4] - marks[0] + Math.max(0, ...lockWaits);
    const [holds, tailed, halted, renames, released] = marks.map((t) => Math.round(t * 10) / 10);
    const r = (ms: number) => Math.round(ms * 10) / 10;
    ctx.logger.info(
      { table: `${source.db}.${source.table}`, blocked_ms: r(blocked), first_hold_to_last_release_ms: r(window), holds_ms: r(holds - started), tail_ms: r(tailed - holds), ...tail, halt_ms: r(halted - tailed), rename_ms: r(renames - halted), release_ms: r(released - renames) },
      'repartition switched names',
    );
    return summary(blocked, (await caught.state()).rows_resynced - resyncedBefore);
  } catch (err) {
    if (renamed) await unswitchNames(ctx.agents, p.sourceLogin, p.targetLogin, p.spec, aside).catch((e: unknown) => ctx.logger.error({ err: e }, 'repartition: undoing the renames failed'));
    await Promise.allSettled(held.map((c) => p.agent.release(c.hostaddr, holdId(c))));
    throw err;
  } finally {
    await stopCatchUp(ctx, p.spec).catch(() => {});
    for (const c of new Set([src, dst])) await c?.end();
  }
}
