// The last step of repartition_tables: switch names. With writes through the source
// cluster's compute nodes held on the source's foreign table, the catch-up applies the
// source's last writes to the target and stops; then the source table is renamed aside
// (`<table>__repart_<job>`) and the target takes the source table's name in its own
// database. When the target is in the source's cluster and database, the held foreign
// table is re-pointed at the target's shard in the same commit that releases the writers;
// otherwise the hold is released (the name now lives in another database or cluster, and
// catalog sync shows it there within a second) and held writers get "no such table", never
// a lost write. The blocked window is measured from the first hold to the last release.
//
// Idempotent: a re-run finds the renames done (the aside table exists) and only finishes
// the re-point. A failure before the re-point undoes the renames, so the source keeps
// serving under its name.

import type { ForeignTableAgent } from '../moves/cutover';
import { catchUpPhase, stopCatchUp, type MoveDeps, type MoveSpec, type PreparedMove } from '../moves/engine';
import { q, withShard, type ShardLogin } from '../moves/shard-sql';
import type { StepContext } from '../workflow';

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
  sourceLogin: ShardLogin;
  targetLogin: ShardLogin;
  /** The source cluster's compute nodes, which route the source table's name now. */
  comps: { hostaddr: string; port: number }[];
  /** Re-point the held foreign table at this server; '' = release it (the name moves away). */
  repointTo: string;
  agent: ForeignTableAgent;
  moveDeps: MoveDeps;
  holdMs: number;
}

export const asideName = (table: string, jobId: string) => `${table.slice(0, 40)}__repart_${jobId}`;

type Ctx = StepContext<unknown, object>;

async function tableExists(login: ShardLogin, db: string, table: string): Promise<boolean> {
  return withShard(login, async (c) => {
    const [rows] = (await c.query('SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?', [db, table])) as unknown as [unknown[]];
    return rows.length > 0;
  });
}

const sameInstance = (a: ShardLogin, b: ShardLogin) => a.host === b.host && a.port === b.port;

/** Source aside, target to the source's name: one atomic RENAME when both are on one instance. */
async function renameBoth(p: SwitchPlan, aside: string): Promise<void> {
  const { source, target } = p.spec;
  const targetRenamed = target.table !== source.table || target.db !== source.db;
  if (sameInstance(p.sourceLogin, p.targetLogin)) {
    const pairs = [`${q(source.db)}.${q(source.table)} TO ${q(source.db)}.${q(aside)}`];
    if (target.table !== source.table) pairs.push(`${q(target.db)}.${q(target.table)} TO ${q(target.db)}.${q(source.table)}`);
    await withShard(p.sourceLogin, (c) => c.query(`RENAME TABLE ${pairs.join(', ')}`));
    return;
  }
  await withShard(p.sourceLogin, (c) => c.query(`RENAME TABLE ${q(source.db)}.${q(source.table)} TO ${q(source.db)}.${q(aside)}`));
  if (targetRenamed && target.table !== source.table) {
    await withShard(p.targetLogin, (c) => c.query(`RENAME TABLE ${q(target.db)}.${q(target.table)} TO ${q(target.db)}.${q(source.table)}`));
  }
}

/** Undoes renameBoth as far as it got (the target first, then the source back to its name). */
export async function unswitchNames(sourceLogin: ShardLogin, targetLogin: ShardLogin, spec: MoveSpec, aside: string): Promise<void> {
  const { source, target } = spec;
  if (!(await tableExists(sourceLogin, source.db, aside))) return;
  if (target.table !== source.table && !(await tableExists(targetLogin, target.db, target.table)) && (await tableExists(targetLogin, target.db, source.table))) {
    await withShard(targetLogin, (c) => c.query(`RENAME TABLE ${q(target.db)}.${q(source.table)} TO ${q(target.db)}.${q(target.table)}`));
  }
  await withShard(sourceLogin, (c) => c.query(`RENAME TABLE ${q(source.db)}.${q(aside)} TO ${q(source.db)}.${q(source.table)}`));
}

export async function switchNames(ctx: Ctx, p: SwitchPlan): Promise<SwitchSummary> {
  const { source, target } = p.spec;
  const aside = asideName(source.table, ctx.jobId);
  const summary = (blocked: number, resynced: number): SwitchSummary => ({
    table: `${target.db}.${source.table}`,
    old_table: `${source.db}.${aside}`,
    blocked_ms: Math.round(blocked * 10) / 10,
    rows_resynced: resynced,
  });
  const ref = (c: { port: number }) => ({ port: c.port, ...p.spec.foreign });
  if (await tableExists(p.sourceLogin, source.db, aside)) {
    // A re-run after the renames: finish what the first run may not have (target name, re-point).
    await stopCatchUp(ctx.jobId, p.spec.key);
    if (target.table !== source.table && (await tableExists(p.targetLogin, target.db, target.table))) {
      await withShard(p.targetLogin, (c) => c.query(`RENAME TABLE ${q(target.db)}.${q(target.table)} TO ${q(target.db)}.${q(source.table)}`));
    }
    if (p.repointTo) {
      for (const c of p.comps) {
        const holdId = `${ctx.jobId}-${p.spec.key}-rerun-${c.hostaddr}-${c.port}`;
        const h = await p.agent.hold(c.hostaddr, holdId, ref(c), p.holdMs);
        if (h.server === p.repointTo) await p.agent.release(c.hostaddr, holdId);
        else await p.agent.repoint(c.hostaddr, holdId, p.repointTo);
      }
    }
    return summary(0, 0);
  }
  const holdId = (c: { hostaddr: string; port: number }) => `${ctx.jobId}-${p.spec.key}-switch-${c.hostaddr}-${c.port}`;
  const held: typeof p.comps = [];
  const started = performance.now();
  let renamed = false;
  try {
    await Promise.all(
      p.comps.map(async (c) => {
        await p.agent.hold(c.hostaddr, holdId(c), ref(c), p.holdMs);
        held.push(c);
      }),
    );
    // Writes through the compute nodes wait now: bring the target level with the source and stop.
    const caught = await catchUpPhase(ctx, p.spec, p.prepared, p.moveDeps);
    await stopCatchUp(ctx.jobId, p.spec.key);
    renamed = true;
    await renameBoth(p, aside);
    await Promise.all(held.map((c) => (p.repointTo ? p.agent.repoint(c.hostaddr, holdId(c), p.repointTo) : p.agent.release(c.hostaddr, holdId(c)))));
    return summary(performance.now() - started, caught.rows_resynced);
  } catch (err) {
    if (renamed) await unswitchNames(p.sourceLogin, p.targetLogin, p.spec, aside).catch((e: unknown) => ctx.logger.error({ err: e }, 'repartition: undoing the renames failed'));
    await Promise.allSettled(held.map((c) => p.agent.release(c.hostaddr, holdId(c))));
    throw err;
  }
}
