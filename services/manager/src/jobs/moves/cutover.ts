// Phase 4 of a move: the cut-over, on every compute node at once: hold the moved table's
// foreign table (writes through the compute nodes queue on a PostgreSQL lock, other tables
// are untouched), wait until the catch-up has applied the source up to its binlog position
// taken under the hold, re-point each foreign table at the target's server and commit
// (which releases the writers, now onto the target). The blocked window is what each agent
// measured from asking for its lock (writers queue behind it from then on) to its commit
// (the longest is reported); the whole cut-over from the first hold sent to the last
// re-point answered is reported beside it. Writes sent straight to the source shard, not
// through a compute node, are not held and are not moved after the cut-over.

import type { Agents, ForeignTableRef } from '@kcm/agent-api';
import { KcmError } from '@kcm/protocol';
import { errorNameOf } from '../framework/errors';
import type { BinlogPosition } from '@kcm/agent-api';

export interface CompAt {
  hostaddr: string;
  port: number;
}

/** An agent's account of its hold (RepointForeignTableReply); the parts are absent from fakes. */
export interface RepointTiming {
  held_ms: number;
  lock_wait_ms?: number;
  wait_ms?: number;
  ddl_ms?: number;
  commit_ms?: number;
}

/** The calls a cut-over makes on compute nodes' agents (cutOver's seam; a unit test fakes it). */
export interface ForeignTableAgent {
  /** `prepareFor`: the server the re-point will name (the agent makes the replacement before it locks). */
  hold(hostaddr: string, holdId: string, ref: ForeignTableRef, holdMs: number, prepareFor?: string): Promise<{ server: string; lock_wait_ms?: number }>;
  repoint(hostaddr: string, holdId: string, server: string): Promise<RepointTiming>;
  release(hostaddr: string, holdId: string): Promise<unknown>;
  server(hostaddr: string, ref: ForeignTableRef): Promise<{ server: string }>;
}

/**
 * Through the pool's agents (Agents.tableMove): one kept client per agent, so a re-point
 * sent while writes are held adds no TCP or TLS handshake to the blocked window.
 */
export function foreignTablesOf(agents: Agents): ForeignTableAgent {
  return {
    hold: (h, id, ref, ms, prepareFor) => agents.tableMove(h).hold(id, ref, ms, prepareFor),
    repoint: (h, id, server) => agents.tableMove(h).repoint(id, server),
    release: (h, id) => agents.tableMove(h).release(id),
    server: (h, ref) => agents.tableMove(h).server(ref),
  };
}

export interface CutOverPlan {
  holdId: string;
  comps: CompAt[];
  foreign: { database: string; schema: string; table: string };
  targetServer: string;
  holdMs: number;
  /** The source's binlog position now (read once every hold is in place). */
  sourcePosition(): Promise<BinlogPosition>;
  /** Resolves once the catch-up has applied everything up to the position. */
  caughtUp(at: BinlogPosition): Promise<void>;
}

export interface CutOverOutcome {
  /** The longest time a compute node held writes, lock asked for to commit, on its agent's clock. */
  blockedMs: number;
  /** From the first hold sent to the last re-point answered, on the manager's clock. */
  cutOverMs: number;
  /** The same span on the wall clock (ms since the epoch), for matching against clients' logs. */
  span: { from: number; to: number };
  alreadyMoved: number;
  /** Where the time went (ms), for the "move cut over" log line: see CutOverParts. */
  parts: CutOverParts;
}

/**
 * The blocked window's parts. On the manager's clock: every hold answered, the source
 * position read, the tail applied, every re-point answered. On the agent's clock, for the
 * compute node that held longest: its lock wait, lock granted to re-point request, the
 * re-point's DDL and its COMMIT; `repoint_rpc_ms` is what its re-point call took beyond
 * the agent's own DDL and COMMIT (the RPC both ways).
 */
export interface CutOverParts {
  holds_ms: number;
  position_ms: number;
  tail_ms: number;
  repoint_ms: number;
  lock_wait_ms: number;
  wait_ms: number;
  ddl_ms: number;
  commit_ms: number;
  repoint_rpc_ms: number;
}

export async function cutOver(agent: ForeignTableAgent, plan: CutOverPlan): Promise<CutOverOutcome> {
  const ref = (c: CompAt): ForeignTableRef => ({ port: c.port, ...plan.foreign });
  const holdId = (c: CompAt) => `${plan.holdId}-${c.hostaddr}-${c.port}`;
  const started = performance.now();
  const held: CompAt[] = [];
  let alreadyMoved = 0;
  let blockedMs = 0;
  const round = (ms: number) => Math.round(ms * 10) / 10;
  let parts: CutOverParts;
  try {
    // Every hold answers before a failed one fails the cut-over: a hold granted after another
    // failed must be released too, or its compute node blocks writes until holdMs runs out.
    const holds = await Promise.allSettled(
      plan.comps.map(async (c) => {
        const h = await agent.hold(c.hostaddr, holdId(c), ref(c), plan.holdMs, plan.targetServer);
        held.push(c);
        if (h.server === plan.targetServer) alreadyMoved++;
      }),
    );
    const refused = holds.find((h) => h.status === 'rejected');
    if (refused) throw refused.reason;
    const allHeld = performance.now();
    const at = await plan.sourcePosition();
    const positioned = performance.now();
    await plan.caughtUp(at);
    const caughtUp = performance.now();
    const repointed = await Promise.all(
      held.map(async (c) => {
        const sent = performance.now();
        const r = await agent.repoint(c.hostaddr, holdId(c), plan.targetServer);
        return { ...r, rpc: performance.now() - sent - (r.ddl_ms ?? 0) - (r.commit_ms ?? 0) };
      }),
    );
    const done = performance.now();
    blockedMs = Math.max(0, ...repointed.map((r) => r.held_ms));
    const worst = repointed.reduce((a, b) => (b.held_ms > a.held_ms ? b : a), repointed[0] ?? { held_ms: 0, rpc: 0 });
    parts = {
      holds_ms: round(allHeld - started),
      position_ms: round(positioned - allHeld),
      tail_ms: round(caughtUp - positioned),
      repoint_ms: round(done - caughtUp),
      lock_wait_ms: round(worst.lock_wait_ms ?? 0),
      wait_ms: round(worst.wait_ms ?? 0),
      ddl_ms: round(worst.ddl_ms ?? 0),
      commit_ms: round(worst.commit_ms ?? 0),
      repoint_rpc_ms: round(worst.rpc),
    };
  } catch (err) {
    await Promise.allSettled(held.map((c) => agent.release(c.hostaddr, holdId(c))));
    if (err instanceof KcmError) throw err;
    throw KcmError.of(errorNameOf(err, 'INSTANCE_FAILED'), `cut-over failed, the source keeps serving: ${(err as Error).message}`, { cause: err });
  }
  const ended = performance.now();
  const wall = (t: number) => Math.round((performance.timeOrigin + t) * 10) / 10;
  return { blockedMs, cutOverMs: ended - started, span: { from: wall(started), to: wall(ended) }, alreadyMoved, parts };
}
