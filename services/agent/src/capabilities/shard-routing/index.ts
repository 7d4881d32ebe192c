// The ShardRoutingAgent service (proto/agent-shard-routing.proto): hold and release a shard
// on a compute instance while its master changes. The hold itself lives in kcm_ddl's shared
// memory on the instance (pg-ext/kcm_ddl/shard_holds.c); this is the manager's way to it, over
// the agent's admin session.
//
// kcm_ddl's SQL functions are declared per session as temporary C functions of the library
// the server preloaded, not in the extension's script: that script is per database and would
// need an ALTER EXTENSION UPDATE in every one of them before a hold worked, while the hold is
// one per instance. An instance whose preloaded kcm_ddl has no holds (an older kcm, not
// restarted since) answers FAILED_PRECONDITION, which the manager treats as an agent that
// does not know the call: the switch goes on without the hold there.

import path from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import {
  AgentFailure,
  ShardRoutingAgentService,
  type HoldShardReply,
  type HoldShardRequest,
  type ReleaseShardReply,
  type ReleaseShardRequest,
} from '@kcm/agent-api';
import type { AgentContext, CapabilityModule } from '../../capability';
import { unary } from '../../grpc-unary';
import pg from 'pg';
import type { AdminClient } from '../postgres/admin-session';
import { ADMIN_ROLE, InstanceRegistry, socketDir, type PostgresInstance } from '../postgres/layout';

/** The hold's deadline may not pass this: kcm_ddl refuses longer ones too. */
export const MAX_HOLD_MS = 120_000;

const SHARD_ID = /^[0-9]{1,9}$/;

const DECLARE_FUNCTIONS = [
  `CREATE FUNCTION pg_temp.kcm_shard_hold(int, int, int) RETURNS text AS 'kcm_ddl', 'kcm_shard_hold' LANGUAGE C STRICT`,
  `CREATE FUNCTION pg_temp.kcm_shard_release(int) RETURNS bool AS 'kcm_ddl', 'kcm_shard_release' LANGUAGE C STRICT`,
];

/** What the hold's session shows in pg_stat_activity while it drains (any role may read an application_name). */
export const HOLD_APPLICATION_NAME = 'kcm-agent-shard-hold';

/** The agent's superuser session over the instance's socket (admin-session.ts), named for what it does. */
async function withHoldSession<T>(instance: PostgresInstance, work: (db: AdminClient) => Promise<T>): Promise<T> {
  const db = new pg.Client({ host: socketDir(instance), port: instance.port, user: ADMIN_ROLE, database: 'postgres', connectionTimeoutMillis: 10_000, application_name: HOLD_APPLICATION_NAME });
  db.on('error', () => {});
  await db.connect();
  try {
    return await work(db);
  } finally {
    await db.end().catch(() => {});
  }
}

function checkShardId(shardId: string): number {
  if (!SHARD_ID.test(shardId)) throw new AgentFailure('invalid_argument', `shard_id ${JSON.stringify(shardId)} is not a kcm shard id (decimal digits)`);
  return Number(shardId);
}

/** Declares the functions in this session; an older kcm_ddl (no such symbol) is a failed precondition. */
async function declareFunctions(db: AdminClient, port: number): Promise<void> {
  try {
    for (const sql of DECLARE_FUNCTIONS) await db.query(sql);
  } catch (err) {
    const e = err as { code?: string; message?: string };
    // 42883: "could not find function ... in file": the library loaded is older than holds.
    if (e.code === '42883' || e.code === '58P01') {
      throw new AgentFailure('failed_precondition', `the PostgreSQL instance on port ${port} runs a kcm_ddl without shard holds (${e.message}); it holds nothing`);
    }
    throw err;
  }
}

async function holdShard(registry: InstanceRegistry, req: HoldShardRequest): Promise<HoldShardReply> {
  const shard = checkShardId(req.shard_id);
  if (!(Number.isInteger(req.hold_ms) && req.hold_ms > 0 && req.hold_ms <= MAX_HOLD_MS)) {
    throw new AgentFailure('invalid_argument', `hold_ms ${req.hold_ms} is not between 1 and ${MAX_HOLD_MS}`);
  }
  if (!(Number.isInteger(req.drain_ms) && req.drain_ms >= 0 && req.drain_ms <= req.hold_ms)) {
    throw new AgentFailure('invalid_argument', `drain_ms ${req.drain_ms} is not between 0 and hold_ms ${req.hold_ms}`);
  }
  const instance = await registry.get(req.port);
  return withHoldSession(instance, async (db) => {
    await declareFunctions(db, req.port);
    const { rows } = await db.query<{ outcome: string }>('SELECT pg_temp.kcm_shard_hold($1, $2, $3) AS outcome', [shard, req.hold_ms, req.drain_ms]);
    const outcome = JSON.parse(rows[0].outcome) as HoldShardReply;
    return { open_at_start: outcome.open_at_start, drain_ms: outcome.drain_ms, ended: outcome.ended };
  });
}

async function releaseShard(registry: InstanceRegistry, req: ReleaseShardRequest): Promise<ReleaseShardReply> {
  const shard = checkShardId(req.shard_id);
  const instance = await registry.get(req.port);
  return withHoldSession(instance, async (db) => {
    await declareFunctions(db, req.port);
    const { rows } = await db.query<{ was_held: boolean }>('SELECT pg_temp.kcm_shard_release($1) AS was_held', [shard]);
    return { was_held: rows[0].was_held };
  });
}

export const shardRoutingCapability: CapabilityModule = {
  name: 'shard-routing',
  register(server: grpc.Server, ctx: AgentContext) {
    const registry = new InstanceRegistry(path.join(ctx.stateDir, 'postgres'));
    server.addService(ShardRoutingAgentService.service, {
      HoldShard: unary(ctx.logger, 'HoldShard', async (req: HoldShardRequest) => {
        const reply = await holdShard(registry, req);
        ctx.logger.info({ port: req.port, shard: req.shard_id, hold_ms: req.hold_ms, ...reply }, 'shard held on a compute instance');
        return reply;
      }),
      ReleaseShard: unary(ctx.logger, 'ReleaseShard', async (req: ReleaseShardRequest) => {
        const reply = await releaseShard(registry, req);
        ctx.logger.info({ port: req.port, shard: req.shard_id, ...reply }, 'shard released on a compute instance');
        return reply;
      }),
    });
  },
};
