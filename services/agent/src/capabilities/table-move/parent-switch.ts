// The RelationSwitchAgent service (proto/agent-table-move.proto): repartition's switch of
// names on a compute node when a side is a partitioned table. A partitioned parent is a
// local table on each compute node (its partitions are foreign tables), so the name moves
// by renames here, not by re-pointing one foreign table: the source parent is renamed
// aside and the target (a parent, or a plain foreign table) takes its name, in the one
// transaction that held them. A writer waiting on the hold's lock looks the name up again
// once it gets it, and finds the target.
//
// As TableMoveAgent's holds: one PostgreSQL session per hold, rolled back by a timer if the
// manager never comes back (the names stay as they were), kcm's own DDL (kcm.sync = on, a
// replica session: kcm_ddl's hooks and event triggers leave it alone).

import path from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import pg from 'pg';
import { unary } from '../../grpc-unary';
import type { AgentContext, CapabilityModule } from '../../capability';
import { ADMIN_ROLE, InstanceRegistry, isIdentifier, socketDir } from '../postgres/layout';
import { ident, literal } from '../postgres/admin-session';
import { AgentFailure, RelationSwitchAgentService, type HoldRelationsRequest, type RelationRename, type ReleaseRelationsRequest, type SwitchRelationsRequest } from '@kcm/agent-api';

const HOLD_ID = /^[A-Za-z0-9_.:-]{1,120}$/;
const MAX_HOLD_MS = 30_000;

interface RelationHold {
  client: pg.Client;
  timer: NodeJS.Timeout;
  /** performance.now() when the first lock was asked for: writers queue behind it from then on. */
  askedAt: number;
  grantedAt: number;
}

function checkName(kind: string, name: string): void {
  if (!isIdentifier(name)) throw new AgentFailure('invalid_argument', `${kind} ${JSON.stringify(name)} is not a plain identifier`);
}

/** 'p' partitioned, 'r' table, 'f' foreign table; undefined when there is no such relation. */
async function relkindOf(client: pg.Client, schema: string, table: string): Promise<string | undefined> {
  const r = await client.query<{ relkind: string }>(`SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, [schema, table]);
  return r.rows[0]?.relkind;
}

/** The statements of one rename (and a foreign table's new remote name); none when it is done already. */
async function renameStatements(client: pg.Client, r: RelationRename): Promise<string[]> {
  const kind = await relkindOf(client, r.schema, r.old_name);
  if (kind === undefined) {
    if ((await relkindOf(client, r.schema, r.new_name)) !== undefined) return [];
    throw new AgentFailure('not_found', `${r.schema}.${r.old_name} does not exist; nothing was renamed`);
  }
  const foreign = kind === 'f';
  const alter = foreign ? 'ALTER FOREIGN TABLE' : 'ALTER TABLE';
  const sql = [`${alter} ${ident(r.schema)}.${ident(r.old_name)} RENAME TO ${ident(r.new_name)}`];
  if (r.remote_table) {
    if (!foreign) throw new AgentFailure('invalid_argument', `${r.schema}.${r.old_name} is not a foreign table; it has no remote table to rename`);
    sql.push(`ALTER FOREIGN TABLE ${ident(r.schema)}.${ident(r.new_name)} OPTIONS (SET table_name ${literal(r.remote_table)})`);
  }
  return sql;
}

export const relationSwitchCapability: CapabilityModule = {
  name: 'relation-switch',
  register(server: grpc.Server, ctx: AgentContext) {
    const registry = new InstanceRegistry(path.join(ctx.stateDir, 'postgres'));
    const holds = new Map<string, RelationHold>();
    const end = async (holdId: string): Promise<boolean> => {
      const hold = holds.get(holdId);
      if (!hold) return false;
      holds.delete(holdId);
      clearTimeout(hold.timer);
      try {
        await hold.client.query('ROLLBACK');
      } finally {
        await hold.client.end().catch(() => {});
      }
      return true;
    };
    server.addService(RelationSwitchAgentService.service, {
      HoldRelations: unary(ctx.logger, 'HoldRelations', async (req: HoldRelationsRequest) => {
        if (!HOLD_ID.test(req.hold_id)) throw new AgentFailure('invalid_argument', `hold_id ${JSON.stringify(req.hold_id)} must be 1-120 characters of [A-Za-z0-9_.:-]`);
        checkName('database', req.database);
        for (const r of req.relations) {
          checkName('schema', r.schema);
          checkName('table', r.table);
        }
        if (!(req.hold_ms > 0 && req.hold_ms <= MAX_HOLD_MS)) throw new AgentFailure('invalid_argument', `hold_ms ${req.hold_ms} must be in 1..${MAX_HOLD_MS}`);
        await end(req.hold_id);
        const instance = await registry.get(req.port);
        const client = new pg.Client({ host: socketDir(instance), port: instance.port, user: ADMIN_ROLE, database: req.database, connectionTimeoutMillis: 10_000, application_name: 'kcm-agent-switch' });
        client.on('error', () => {});
        await client.connect();
        try {
          await client.query(`BEGIN; SET LOCAL kcm.sync = 'on'; SET LOCAL session_replication_role = 'replica'`);
          const kinds = await Promise.all(req.relations.map(async (r) => ({ r, kind: await relkindOf(client, r.schema, r.table) })));
          const askedAt = performance.now();
          const present: string[] = [];
          for (const { r, kind } of kinds) {
            if (kind === undefined) continue;
            const name = `${ident(r.schema)}.${ident(r.table)}`;
            // Writes (ROW EXCLUSIVE) wait, reads go on. LOCK TABLE refuses a foreign table; a
            // no-op ENABLE TRIGGER ALL takes the same lock on it. A parent's lock takes its partitions'.
            await client.query(kind === 'f' ? `ALTER FOREIGN TABLE ${name} ENABLE TRIGGER ALL` : `LOCK TABLE ${name} IN SHARE ROW EXCLUSIVE MODE`);
            present.push(`${r.schema}.${r.table}`);
          }
          const grantedAt = performance.now();
          const timer = setTimeout(() => {
            ctx.logger.warn({ hold_id: req.hold_id }, 'relation hold expired; rolled back, the names stay as they were');
            void end(req.hold_id).catch(() => {});
          }, req.hold_ms);
          holds.set(req.hold_id, { client, timer, askedAt, grantedAt });
          return { present, lock_wait_ms: grantedAt - askedAt };
        } catch (err) {
          await client.end().catch(() => {});
          throw err;
        }
      }),
      SwitchRelations: unary(ctx.logger, 'SwitchRelations', async (req: SwitchRelationsRequest) => {
        const hold = holds.get(req.hold_id);
        if (!hold) throw new AgentFailure('not_found', `no hold ${req.hold_id} (expired or never taken); nothing was renamed`);
        for (const r of req.renames) {
          checkName('schema', r.schema);
          checkName('table', r.old_name);
          checkName('table', r.new_name);
        }
        if (req.renames.some((r) => r.remote_table && !isIdentifier(r.remote_table))) throw new AgentFailure('invalid_argument', 'a remote_table is not a plain identifier');
        const started = performance.now();
        holds.delete(req.hold_id);
        clearTimeout(hold.timer);
        let ddlDone = 0;
        let committed = 0;
        const renamed: string[] = [];
        try {
          // One rename at a time: the next one's check must see the previous (a swap's second name is the first's old one).
          for (const r of req.renames) {
            const sql = await renameStatements(hold.client, r);
            if (sql.length === 0) continue;
            await hold.client.query(sql.join(';\n'));
            renamed.push(`${r.schema}.${r.old_name}`);
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
        return { held_ms: committed - hold.askedAt, lock_wait_ms: hold.grantedAt - hold.askedAt, wait_ms: started - hold.grantedAt, ddl_ms: ddlDone - started, commit_ms: committed - ddlDone, renamed };
      }),
      ReleaseRelations: unary(ctx.logger, 'ReleaseRelations', async (req: ReleaseRelationsRequest) => ({ released: await end(req.hold_id) })),
    });
  },
};
