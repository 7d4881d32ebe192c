// The TableMoveAgent service: a table move's cut-over on a compute node (see
// proto/agent-table-move.proto). A hold is one PostgreSQL session, kept open between
// HoldForeignTable and RepointForeignTable/ReleaseForeignTable, and rolled back by a timer
// if the manager never comes back: the source then keeps serving.
//
// Writes queue from the moment the hold asks for its lock until the commit, so everything
// that can be done outside that window is: the session, the checks, the first read of the
// table's definition and the replacement foreign table on the target's server (same
// transaction, under a temporary name) come before the lock; once the lock is granted the
// definition is read again and the swap itself (the names; for a partition also its parent's
// detach, attach and routing rule) is made at once, uncommitted, so the hold answers only
// when everything but the COMMIT is done: a swap that fails (a view depends on the table)
// fails the hold, before any compute node has committed, and the manager releases them all
// rather than leaving some nodes on the target and others on the source. The re-point is
// then the COMMIT alone. The hold's DDL fires no event trigger: kcm_ddl's are
// PL/Python, and the first one in a session starts the interpreter and imports pymysql
// (100-1,000 ms on a loaded host, measured in bench/move) inside the window, only to return
// at once for kcm.sync = on.

import path from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { unary } from '../../grpc-unary';
import type { AgentContext, CapabilityModule } from '../../capability';
import { ADMIN_ROLE, InstanceRegistry, isIdentifier, socketDir } from '../postgres/layout';
import { ident } from '../postgres/admin-session';
import {
  AgentFailure,
  TableMoveAgentService,
  type ForeignTableServerRequest,
  type HoldForeignTableRequest,
  type ReleaseForeignTableRequest,
  type RepointForeignTableRequest,
} from '@kcm/agent-api';
import { replacementStatements, repointStatements, type ForeignTableShape, type PreparedReplacement } from './foreign-table-ddl';

const HOLD_ID = /^[A-Za-z0-9_.:-]{1,120}$/;
const MAX_HOLD_MS = 30_000;
/** How long a hold waits for its locks before it fails (a long reader or writer of the table is in the way). */
const LOCK_WAIT_MS = 2_000;

interface Hold {
  client: pg.Client;
  schema: string;
  table: string;
  timer: NodeJS.Timeout;
  /** performance.now() when the lock was asked for: writers arriving since then queue behind it. */
  heldAt: number;
  /** performance.now() when the lock was granted, and how long that took. */
  grantedAt: number;
  lockWaitMs: number;
  /** The definition read under the lock. */
  shape: ForeignTableShape;
  /** The replacement made before the lock: its server and the definition it copies. */
  prepared: PreparedReplacement | null;
  /** The server the swap made under the lock (uncommitted, after SAVEPOINT kcm_swap) points at; null = none made. */
  swappedTo: string | null;
  /** How long the swap under the lock took. */
  swapMs: number;
}

function checkNames(req: { database: string; schema: string; table: string }): void {
  for (const field of ['database', 'schema', 'table'] as const) {
    if (!isIdentifier(req[field])) throw new AgentFailure('invalid_argument', `${field} ${JSON.stringify(req[field])} is not a plain identifier`);
  }
}

async function connect(registry: InstanceRegistry, port: number, database: string): Promise<pg.Client> {
  const instance = await registry.get(port);
  const client = new pg.Client({ host: socketDir(instance), port: instance.port, user: ADMIN_ROLE, database, connectionTimeoutMillis: 10_000, application_name: 'kcm-agent-move' });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** The foreign table's definition as the catalog holds it: enough to make it again on another server. */
async function readShape(client: pg.Client, schema: string, table: string): Promise<ForeignTableShape | undefined> {
  const rel = await client.query<{ oid: number; server: string; ftoptions: string[] | null; owner: string; comment: string | null; acl: string[] | null; partition_of: string | null; bound: string | null }>(
    `SELECT c.oid, s.srvname AS server, ft.ftoptions, pg_get_userbyid(c.relowner) AS owner, obj_description(c.oid, 'pg_class') AS comment,
            c.relacl::text[] AS acl, (SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = c.oid) AS partition_of,
            CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) END AS bound
       FROM pg_foreign_table ft JOIN pg_class c ON c.oid = ft.ftrelid JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_foreign_server s ON s.oid = ft.ftserver
      WHERE n.nspname = $1 AND c.relname = $2`,
    [schema, table],
  );
  if (rel.rowCount === 0) return undefined;
  const r = rel.rows[0];
  const cols = await client.query<{ name: string; type: string; notnull: boolean; default: string | null; options: string[] | null }>(
    `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS notnull, pg_get_expr(d.adbin, d.adrelid) AS default, a.attfdwoptions AS options
       FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
      WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
    [r.oid],
  );
  const grants = await client.query<{ grantee: string; privilege: string }>(
    `SELECT CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(x.grantee) END AS grantee, x.privilege_type AS privilege
       FROM pg_class c, aclexplode(c.relacl) x WHERE c.oid = $1 AND x.grantee <> c.relowner`,
    [r.oid],
  );
  return {
    schema,
    table,
    server: r.server,
    options: r.ftoptions ?? [],
    owner: r.owner,
    comment: r.comment,
    partitionOf: r.partition_of,
    bound: r.bound,
    columns: cols.rows.map((c) => ({ name: c.name, type: c.type, notNull: c.notnull, default: c.default, options: c.options ?? [] })),
    grants: grants.rows,
  };
}

export const tableMoveCapability: CapabilityModule = {
  name: 'table-move',
  register(server: grpc.Server, ctx: AgentContext) {
    const registry = new InstanceRegistry(path.join(ctx.stateDir, 'postgres'));
    const holds = new Map<string, Hold>();
    const end = async (holdId: string, how: 'COMMIT' | 'ROLLBACK'): Promise<boolean> => {
      const hold = holds.get(holdId);
      if (!hold) return false;
      holds.delete(holdId);
      clearTimeout(hold.timer);
      try {
        await hold.client.query(how);
      } finally {
        await hold.client.end().catch(() => {});
      }
      return true;
    };
    server.addService(TableMoveAgentService.service, {
      HoldForeignTable: unary(ctx.logger, 'HoldForeignTable', async (req: HoldForeignTableRequest) => {
        if (!HOLD_ID.test(req.hold_id)) throw new AgentFailure('invalid_argument', `hold_id ${JSON.stringify(req.hold_id)} must be 1-120 characters of [A-Za-z0-9_.:-]`);
        checkNames(req);
        if (!(req.hold_ms > 0 && req.hold_ms <= MAX_HOLD_MS)) throw new AgentFailure('invalid_argument', `hold_ms ${req.hold_ms} must be in 1..${MAX_HOLD_MS}`);
        await end(req.hold_id, 'ROLLBACK');
        const client = await connect(registry, req.port, req.database);
        try {
          // The re-point is kcm's own DDL, not a user's: kcm_ddl's hook leaves it alone (as for
          // catalog sync), and as a replica session no (ENABLE ORIGIN) event trigger fires.
          await client.query(`BEGIN; SET LOCAL kcm.sync = 'on'; SET LOCAL session_replication_role = 'replica'`);
          const before = await readShape(client, req.schema, req.table);
          if (!before) throw new AgentFailure('not_found', `${req.database}: ${req.schema}.${req.table} is not a foreign table`);
          // The replacement, before the lock: it locks only itself, and being in the hold's
          // transaction it vanishes with a rollback, an expired hold or a dead session.
          let prepared: Hold['prepared'] = null;
          if (req.server && isIdentifier(req.server) && req.server !== before.server) {
            await client.query(replacementStatements(before, req.server).join(';\n'));
            prepared = { server: req.server, from: before };
          }
          // A partition's swap ends in kcm_ddl.route_rows (PL/Python): its interpreter starts
          // here, not inside the window (100-1,000 ms on a loaded host).
          if (before.partitionOf) await client.query(`DO LANGUAGE plpython3u 'pass'`);
          // A lock not granted soon fails the hold: writers queue behind the request (and, for
          // a partition, readers too), and another compute node's hold already granted blocks
          // its writers meanwhile. The manager releases every hold and tries again.
          await client.query(`SET LOCAL lock_timeout = ${Math.min(LOCK_WAIT_MS, req.hold_ms)}`);
          const asked = performance.now();
          // A partition's parent first, ACCESS EXCLUSIVE, as the swap will need (detach, attach,
          // its routing rule): asked for now rather than upgraded to later, since a transaction
          // that read the parent and then waits to write the held partition would deadlock
          // with the upgrade. Reads and writes of the whole partitioned table wait in the window.
          if (before.partitionOf) await client.query(`LOCK TABLE ONLY ${before.partitionOf} IN ACCESS EXCLUSIVE MODE`);
          // PostgreSQL refuses LOCK TABLE on a foreign table; ENABLE TRIGGER ALL changes nothing
          // and takes SHARE ROW EXCLUSIVE: writes (ROW EXCLUSIVE) wait, reads go on until the re-point.
          await client.query(`ALTER FOREIGN TABLE ${ident(req.schema)}.${ident(req.table)} ENABLE TRIGGER ALL`);
          const grantedAt = performance.now();
          const lockWaitMs = grantedAt - asked;
          await client.query('SET LOCAL lock_timeout = 0');
          // Read again under the lock (no DDL can change it now), then the swap, uncommitted.
          const shape = await readShape(client, req.schema, req.table);
          if (!shape) throw new AgentFailure('not_found', `${req.schema}.${req.table} is no longer a foreign table`);
          let swappedTo: string | null = null;
          if (prepared) {
            await client.query('SAVEPOINT kcm_swap');
            const ddl = repointStatements(shape, prepared.server, prepared);
            if (ddl.length > 0) await client.query(ddl.join(';\n'));
            swappedTo = prepared.server;
          }
          const swapMs = performance.now() - grantedAt;
          const timer = setTimeout(() => {
            ctx.logger.warn({ hold_id: req.hold_id }, 'foreign table hold expired; rolled back, the table stays where it was');
            void end(req.hold_id, 'ROLLBACK').catch(() => {});
          }, req.hold_ms);
          holds.set(req.hold_id, { client, schema: req.schema, table: req.table, timer, heldAt: asked, grantedAt, lockWaitMs, shape, prepared, swappedTo, swapMs });
          return { server: before.server, lock_wait_ms: lockWaitMs, prepared: prepared !== null };
        } catch (err) {
          await client.end().catch(() => {});
          throw err;
        }
      }),
      RepointForeignTable: unary(ctx.logger, 'RepointForeignTable', async (req: RepointForeignTableRequest) => {
        const hold = holds.get(req.hold_id);
        if (!hold) throw new AgentFailure('not_found', `no hold ${req.hold_id} (expired or never taken); the foreign table was not re-pointed`);
        if (!isIdentifier(req.server)) throw new AgentFailure('invalid_argument', `server ${JSON.stringify(req.server)} is not a plain identifier`);
        const started = performance.now();
        holds.delete(req.hold_id);
        clearTimeout(hold.timer);
        let committed = 0;
        let ddlDone = 0;
        try {
          if (hold.swappedTo !== req.server) {
            // Another server than the hold prepared for (or none prepared): the swap made under
            // the lock is undone and the whole re-point made now.
            if (hold.swappedTo !== null) await hold.client.query('ROLLBACK TO SAVEPOINT kcm_swap');
            const ddl = repointStatements(hold.shape, req.server, hold.prepared);
            // The DDL in one round trip (a failing statement skips the rest), the COMMIT in the
            // next: a local socket's round trip is well under a millisecond, and the two are
            // timed apart.
            if (ddl.length > 0) await hold.client.query(ddl.join(';\n'));
          }
          ddlDone = performance.now();
          await hold.client.query('COMMIT');
          committed = performance.now();
        } catch (err) {
          await hold.client.query('ROLLBACK').catch(() => {});
          throw err;
        } finally {
          await hold.client.end().catch(() => {});
        }
        return {
          elapsed_ms: committed - started,
          held_ms: committed - hold.heldAt,
          lock_wait_ms: hold.lockWaitMs,
          wait_ms: started - hold.grantedAt,
          // The swap made under the lock at hold time is in the hold's answer time, not here.
          ddl_ms: ddlDone - started,
          commit_ms: committed - ddlDone,
        };
      }),
      ReleaseForeignTable: unary(ctx.logger, 'ReleaseForeignTable', async (req: ReleaseForeignTableRequest) => ({ released: await end(req.hold_id, 'ROLLBACK') })),
      ForeignTableServer: unary(ctx.logger, 'ForeignTableServer', async (req: ForeignTableServerRequest) => {
        checkNames(req);
        const client = await connect(registry, req.port, req.database);
        try {
          const shape = await readShape(client, req.schema, req.table);
          return { server: shape?.server ?? '' };
        } finally {
          await client.end().catch(() => {});
        }
      }),
    });
  },
};
