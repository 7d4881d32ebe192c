// What a multi-table move checks before it does anything: every listed table, so a table
// that cannot be moved refuses the job in its first step, before any target is made or any
// table cuts over (a refusal at the cut-over would leave the tables before it moved and
// the rest not). Checked per table: the source table exists on the source shard with a
// primary key a move can copy by; the target is absent (or empty: a re-run of the first
// step); every compute node of the cluster shows the table on the source shard. Every
// refusal is collected, so one answer names each table that cannot be moved and why.

import { KcmError } from '@kcm/protocol';
import type { StepContext } from '../framework/workflow';
import { clusterOfStep } from '../cluster-lookup';
import type { ForeignTableAgent } from './cutover';
import type { MoveSpec } from './engine';
import { q, readTableShape, withShard, type ShardLogin } from './shard-sql';

type Ctx = StepContext<unknown, object>;

export interface PrecheckDeps {
  /** The storage account's login on the master of a move end's shard. */
  login(ctx: Ctx, end: MoveSpec['source']): ShardLogin;
  foreignTables: ForeignTableAgent;
}

/** Why `spec` cannot be moved, or null when it can. */
async function refusalOf(ctx: Ctx, spec: MoveSpec, deps: PrecheckDeps): Promise<string | null> {
  const source = await withShard(ctx.agents, deps.login(ctx, spec.source), async (src) => {
    try {
      const shape = await readTableShape(src, spec.source.db, spec.source.table);
      if (!shape) return `it does not exist on shard ${spec.source.shardId}`;
      if (shape.key.length === 0) return 'it has no primary key (a move copies and verifies by primary key)';
      return null;
    } catch (err) {
      if (err instanceof KcmError) return err.message;
      throw err;
    }
  });
  if (source) return source;
  if (spec.target.create) {
    const target = await withShard(ctx.agents, deps.login(ctx, spec.target), async (dst) => {
      const shape = await readTableShape(dst, spec.target.db, spec.target.table).catch(() => undefined);
      if (!shape) return null;
      const [rows] = (await dst.query(`SELECT 1 FROM ${q(spec.target.db)}.${q(spec.target.table)} LIMIT 1`)) as unknown as [unknown[]];
      return rows.length > 0 ? `shard ${spec.target.shardId} already has a table of that name holding rows` : null;
    });
    if (target) return target;
  }
  const comps = Object.values(clusterOfStep(ctx, spec.target.clusterId).comps);
  const sourceServer = `shard_${spec.source.shardId}`;
  for (const c of comps) {
    let server: string;
    try {
      server = (await deps.foreignTables.server(c.hostaddr, { port: c.port, ...spec.foreign })).server;
    } catch (err) {
      return `compute node ${c.hostaddr}:${c.port} could not be asked where it reads it from (${(err as Error).message}); every compute node takes part in the cut-over`;
    }
    if (server !== sourceServer) {
      const where = server === '' ? 'has no foreign table of that name' : `reads it from ${server}`;
      return `compute node ${c.hostaddr}:${c.port} ${where}, not from ${sourceServer}`;
    }
  }
  return null;
}

const refusals = new WeakSet<Error>();

/** A pre-check's refusal: nothing was made, so a rollback has nothing to undo (and must not touch the tables it names). */
export const isPrecheckRefusal = (err: unknown): boolean => err instanceof Error && refusals.has(err);

/** Refuses the job, naming every table that cannot be moved, or resolves when all can. */
export async function precheckMoves(ctx: Ctx, specs: readonly MoveSpec[], names: readonly string[], deps: PrecheckDeps): Promise<void> {
  const refused: string[] = [];
  for (const [i, spec] of specs.entries()) {
    const why = await refusalOf(ctx, spec, deps);
    if (why) refused.push(`${names[i]}: ${why}`);
  }
  if (refused.length > 0) {
    const err = KcmError.of('CONFLICT', `${refused.length} of ${specs.length} table(s) cannot be moved, so none was: ${refused.join('; ')}`);
    refusals.add(err);
    throw err;
  }
}
