// Catalog sync: makes every table of database D_$$_S on the shards a foreign table S.<t>
// in database D of this compute instance, through one mysql_fdw server per shard. The
// manager calls it periodically and after DDL, so an unchanged catalog costs only reads:
// one information_schema query per shard, one catalog read per compute database.

import { withAdmin, ident, literal, trySavepoint, type AdminClient } from './admin-session';
import { partitionMembership, planDatabase, planSchemas, remoteDatabases, remoteSchemas, SCHEMA_MARK, serverName, SERVER_PREFIX, type SchemaPlan, type DatabasePlan, type LocalForeignTable, type TableDefinition } from './catalog-plan';
import { ADMIN_ROLE, isIdentifier, validatePort, type PostgresInstance } from './layout';
import type { PostgresHost } from './lifecycle';
import { postmasterStatus } from './postmaster';
import type { CatalogChange, ShardEndpoint, SyncCatalogReply, SyncCatalogRequest } from '@kcm/agent-api';
import { readShardTables, type RemoteColumn, type ShardView } from './shard-catalog';
import { recreateViews, viewsDependingOn } from './dependent-views';
import { AgentFailure } from '@kcm/agent-api';

const SHARD_ID = /^[A-Za-z0-9_]{1,50}$/;
/**
 * The character set of mysql_fdw's sessions with the shards. Left unset, mysql_fdw 2.8 asks
 * the client library to detect it from the postgres process's locale, which is latin1 under
 * the C locale: the UTF-8 bytes of 'grüße' were then stored as the latin1 characters
 * 'grÃ¼ÃŸe' (a 4-byte emoji as 4 characters), which read back right through a compute node
 * but wrong for anyone reading the shard, and compared, sorted and counted wrong there. The
 * compute databases are UTF8, and utf8mb4 is the only MariaDB set that holds all of UTF-8.
 */
const SHARD_SESSION_CHARSET = 'utf8mb4';
const HOST = /^[A-Za-z0-9.:-]{1,253}$/;
/** kcm:<columns signature>[:<attributes signature>]; the second part is absent on tables made before defaults were carried. */
const SIGNATURE_COMMENT = /^kcm:([0-9a-f]+)(?::([0-9a-f]+))?$/;

function validateShards(shards: ShardEndpoint[]): ShardEndpoint[] {
  const seen = new Set<string>();
  for (const s of shards) {
    if (!SHARD_ID.test(s.shard_id)) throw new AgentFailure('invalid_argument', `shard_id ${JSON.stringify(s.shard_id)} must be 1-50 characters of [A-Za-z0-9_]`);
    if (seen.has(s.shard_id)) throw new AgentFailure('invalid_argument', `shard ${s.shard_id} is listed twice`);
    seen.add(s.shard_id);
    if (!HOST.test(s.host)) throw new AgentFailure('invalid_argument', `shard ${s.shard_id}: host ${JSON.stringify(s.host)} is not a host name or address`);
    validatePort(s.port);
    if (!s.user) throw new AgentFailure('invalid_argument', `shard ${s.shard_id}: user is required`);
  }
  return shards;
}

/** `{k=v,...}` option arrays (srvoptions, umoptions) as a map. */
function optionMap(options: string[] | null): Map<string, string> {
  const m = new Map<string, string>();
  for (const o of options ?? []) {
    const eq = o.indexOf('=');
    m.set(o.slice(0, eq), o.slice(eq + 1));
  }
  return m;
}

/** The OPTIONS clause that turns `current` into `wanted`: ADD what is missing, SET what differs; undefined when equal. */
function optionChanges(current: Map<string, string>, wanted: Record<string, string>): string | undefined {
  const parts = Object.entries(wanted)
    .filter(([k, v]) => current.get(k) !== v)
    .map(([k, v]) => `${current.has(k) ? 'SET' : 'ADD'} ${k} ${literal(v)}`);
  return parts.length > 0 ? parts.join(', ') : undefined;
}

interface DatabaseState {
  hasExtension: boolean;
  /** kcm_ddl is there: partitions are attached to their parents. */
  hasDdlHooks: boolean;
  servers: Map<string, Map<string, string>>;
  mappings: Map<string, Map<string, string>>;
  local: LocalForeignTable[];
  otherRelations: Set<string>;
}

async function readDatabaseState(db: AdminClient, schemas: string[]): Promise<DatabaseState> {
  const ext = await db.query(`SELECT 1 FROM pg_extension WHERE extname = 'mysql_fdw'`);
  const ddl = await db.query(`SELECT 1 FROM pg_extension WHERE extname = 'kcm_ddl'`);
  const servers = await db.query<{ srvname: string; srvoptions: string[] | null }>('SELECT srvname, srvoptions FROM pg_foreign_server');
  const mappings = await db.query<{ srvname: string; usename: string; umoptions: string[] | null }>('SELECT srvname, usename, umoptions FROM pg_user_mappings');
  const tables = await db.query<{ schema: string; table: string; server: string; comment: string | null; parent_schema: string | null; parent: string | null; bound: string | null }>(
    `SELECT n.nspname AS schema, c.relname AS table, s.srvname AS server, obj_description(c.oid, 'pg_class') AS comment,
            pn.nspname AS parent_schema, pc.relname AS parent, CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) END AS bound
       FROM pg_foreign_table ft
       LEFT JOIN pg_inherits i ON i.inhrelid = ft.ftrelid
       LEFT JOIN pg_class pc ON pc.oid = i.inhparent
       LEFT JOIN pg_namespace pn ON pn.oid = pc.relnamespace
       JOIN pg_class c ON c.oid = ft.ftrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_foreign_server s ON s.oid = ft.ftserver
      WHERE starts_with(s.srvname, $1)`,
    [SERVER_PREFIX],
  );
  const others = await db.query<{ schema: string; table: string }>(
    `SELECT n.nspname AS schema, c.relname AS table
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'v', 'm', 'p', 'f')`,
    [schemas],
  );
  const local = tables.rows.map((r) => {
    const comment = SIGNATURE_COMMENT.exec(r.comment ?? '');
    const partitionOf = partitionMembership(r.parent !== null && r.parent_schema !== null && r.bound !== null ? { schema: r.parent_schema, table: r.parent, bound: r.bound } : undefined);
    return { schema: r.schema, table: r.table, server: r.server, signature: comment?.[1] ?? '', attributes: comment?.[2] ?? '', partitionOf };
  });
  const kcm = new Set(local.map((t) => `${t.schema}.${t.table}`));
  return {
    hasExtension: (ext.rowCount ?? 0) > 0,
    hasDdlHooks: (ddl.rowCount ?? 0) > 0,
    servers: new Map(servers.rows.map((r) => [r.srvname, optionMap(r.srvoptions)])),
    mappings: new Map(mappings.rows.map((r) => [`${r.srvname}\0${r.usename}`, optionMap(r.umoptions)])),
    local,
    otherRelations: new Set(others.rows.map((r) => `${r.schema}.${r.table}`).filter((k) => !kcm.has(k))),
  };
}

/** Statements that create or re-point the shard servers and the two user mappings on each. */
function serverStatements(state: DatabaseState, shards: ShardEndpoint[], computeUser: string, serversChanged: string[], database: string): string[] {
  const sql: string[] = [];
  for (const shard of shards) {
    const server = serverName(shard.shard_id);
    const wanted = { host: shard.host, port: String(shard.port), character_set: SHARD_SESSION_CHARSET };
    const current = state.servers.get(server);
    if (!current) {
      sql.push(`CREATE SERVER ${ident(server)} FOREIGN DATA WRAPPER mysql_fdw OPTIONS (host ${literal(wanted.host)}, port ${literal(wanted.port)}, character_set ${literal(wanted.character_set)})`);
      serversChanged.push(`${database}.${server} created`);
    } else {
      const change = optionChanges(current, wanted);
      if (change) {
        sql.push(`ALTER SERVER ${ident(server)} OPTIONS (${change})`);
        const moved = current.get('host') !== wanted.host || current.get('port') !== wanted.port;
        serversChanged.push(moved ? `${database}.${server} re-pointed to ${shard.host}:${shard.port}` : `${database}.${server} session character set ${wanted.character_set}`);
      }
    }
    // The superuser's mapping serves IMPORT FOREIGN SCHEMA; the compute account's serves the application.
    for (const role of [ADMIN_ROLE, computeUser]) {
      const credentials = { username: shard.user, password: shard.password };
      const mapping = state.mappings.get(`${server}\0${role}`);
      if (!mapping) sql.push(`CREATE USER MAPPING FOR ${ident(role)} SERVER ${ident(server)} OPTIONS (username ${literal(credentials.username)}, password ${literal(credentials.password)})`);
      else {
        const change = optionChanges(mapping, credentials);
        if (change) sql.push(`ALTER USER MAPPING FOR ${ident(role)} SERVER ${ident(server)} OPTIONS (${change})`);
      }
    }
  }
  return sql;
}

/**
 * Statements that drop the servers of shards no longer in the cluster (the request names
 * every shard). They run after the plan's table drops, which already removed every table
 * found on no shard; CASCADE takes the user mappings with them.
 */
function retiredServerStatements(state: DatabaseState, shards: ShardEndpoint[], serversChanged: string[], database: string): string[] {
  const current = new Set(shards.map((s) => serverName(s.shard_id)));
  return [...state.servers.keys()]
    .filter((name) => name.startsWith(SERVER_PREFIX) && !current.has(name))
    .map((name) => {
      serversChanged.push(`${database}.${name} dropped`);
      return `DROP SERVER IF EXISTS ${ident(name)} CASCADE`;
    });
}

/** The ALTER subcommands that give one foreign column its NOT NULL and (unless `withDefault` is false) its default. */
function columnClauses(c: RemoteColumn, withDefault = true): string {
  const column = `ALTER COLUMN ${ident(c.name)}`;
  const notNull = `${column} ${c.notNull ? 'SET' : 'DROP'} NOT NULL`;
  // defaultSql is built by column-defaults.ts from validated numbers, literal() and fixed keywords only.
  const dflt = withDefault && c.defaultSql !== null ? `${column} SET DEFAULT ${c.defaultSql}` : `${column} DROP DEFAULT`;
  return `${notNull}, ${dflt}`;
}


/**
 * Gives every column of a foreign table its NOT NULL and default, in one statement. When
 * PostgreSQL refuses it (a literal its column type cannot read, e.g. MariaDB's TIME
 * '-10:00:00'), the columns are done one by one, each in a savepoint, so only what is
 * refused is left out, and a 'skipped' change says what. The attributes signature is
 * recorded all the same: the same input would be refused again every round.
 */
async function applyColumnAttributes(db: AdminClient, schema: string, shardId: string, t: TableDefinition): Promise<CatalogChange[]> {
  const name = `${ident(schema)}.${ident(t.table)}`;
  const alter = (clauses: string) => trySavepoint(db, `ALTER FOREIGN TABLE ${name} ${clauses}`);
  const refused: string[] = [];
  if (t.columns.length > 0 && (await alter(t.columns.map((c) => columnClauses(c)).join(', ')))) {
    for (const c of t.columns) {
      const err = await alter(columnClauses(c));
      if (!err) continue;
      const withoutDefault = c.defaultSql === null ? err : await alter(columnClauses(c, false));
      refused.push(withoutDefault ? `${c.name}: ${withoutDefault.message}` : `${c.name}: default ${c.rawDefault} not carried: ${err.message}`);
    }
  }
  await db.query(`COMMENT ON FOREIGN TABLE ${name} IS ${literal(`kcm:${t.signature}:${t.attributes}`)}`);
  if (refused.length === 0) return [];
  return [{ database: '', schema, table: t.table, action: 'skipped', shard_id: shardId, reason: `PostgreSQL refused column attributes: ${refused.join('; ')}` }];
}

/** Attaches a partition to its parent (made if need be) and gives the parent its columns and defaults; a refusal is a 'skipped' change. */
async function adoptPartition(db: AdminClient, schema: string, shardId: string, t: TableDefinition, computeUser: string): Promise<CatalogChange[]> {
  const p = t.partition;
  if (!p) return [];
  const args = [`${ident(schema)}.${ident(t.table)}`, p.schema, p.table, p.key, p.bound, computeUser].map(literal).join(', ');
  const err = await trySavepoint(db, `SELECT kcm_ddl.adopt_partition(${args})`);
  return err ? [{ database: '', schema, table: t.table, action: 'skipped', shard_id: shardId, reason: `not attached to ${p.schema}.${p.table}: ${err.message}` }] : [];
}

/** Thrown when a table the plan touches changed between the round's read and its locks. */
class ChangedDuringRound extends Error {}

/**
 * Locks the foreign tables the plan drops or alters and checks that their comments (the
 * signatures kcm_ddl and the sync write in the same transaction as the DDL) are still those
 * the plan was made from. A user's ALTER or RENAME through this compute node that committed
 * after the round read the catalog would otherwise be undone by a re-import built from a
 * stale view of the shard; such a round gives up and the next one starts from fresh reads.
 */
async function lockPlannedTables(db: AdminClient, plan: DatabasePlan, local: LocalForeignTable[]): Promise<void> {
  const byName = new Map(local.map((t) => [`${t.schema}.${t.table}`, t]));
  const touched = [...plan.drops, ...plan.alters.map((a) => byName.get(`${a.schema}.${a.table}`))].filter((t): t is LocalForeignTable => t !== undefined);
  for (const t of touched) {
    const name = `${ident(t.schema)}.${ident(t.table)}`;
    const found = await db.query<{ owner: string }>(
      `SELECT pg_get_userbyid(c.relowner) AS owner FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
      [t.schema, t.table],
    );
    if (found.rows.length === 0) throw new ChangedDuringRound(`${name} is gone`);
    // LOCK TABLE refuses foreign tables; giving it the owner it has takes the same lock and changes nothing.
    await db.query(`ALTER FOREIGN TABLE ${name} OWNER TO ${ident(found.rows[0].owner)}`);
    const now = await db.query<{ comment: string | null }>(
      `SELECT obj_description(c.oid, 'pg_class') AS comment FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
      [t.schema, t.table],
    );
    const comment = SIGNATURE_COMMENT.exec(now.rows[0]?.comment ?? '');
    if (now.rows.length === 0 || (comment?.[1] ?? '') !== t.signature || (comment?.[2] ?? '') !== t.attributes) throw new ChangedDuringRound(`${name} changed`);
  }
}

/** Runs the plan in one transaction: a failure leaves the database's catalog as it was. */
async function applyPlan(db: AdminClient, setup: string[], plan: DatabasePlan, computeUser: string, teardown: string[], local: LocalForeignTable[], hasDdlHooks: boolean, stillCurrent: () => Promise<void>): Promise<{ skipped: CatalogChange[]; notImported: number }> {
  const skipped: CatalogChange[] = [];
  let notImported = 0;
  await db.query('BEGIN');
  try {
    // What the sync creates and drops is not user DDL: kcm_ddl's triggers leave it alone.
    await db.query(`SET LOCAL kcm.sync = 'on'`);
    // A user's DDL waiting on a table this round touches wins: the round gives up (and is
    // retried on the next) before the deadlock detector (deadlock_timeout, 1 s) could pick the user.
    await db.query(`SET LOCAL lock_timeout = '500ms'`);
    await lockPlannedTables(db, plan, local);
    if (plan.drops.length > 0 || plan.alters.length > 0) await stillCurrent();
    for (const stmt of setup) await db.query(stmt);
    // Views reading a table dropped or re-imported here would refuse the DROP: they go with
    // it and are made again below, once the tables are back (dependent-views.ts).
    const views = await viewsDependingOn(db, plan.drops);
    for (const ft of plan.drops) {
      const name = `${ident(ft.schema)}.${ident(ft.table)}`;
      // A partition is named by its parent's insert-routing rule (kcm_ddl): that rule goes with it.
      const partition = await db.query(`SELECT 1 FROM pg_class WHERE oid = to_regclass($1) AND relispartition`, [name]);
      await db.query(`DROP FOREIGN TABLE IF EXISTS ${name}${(partition.rowCount ?? 0) > 0 || views.length > 0 ? ' CASCADE' : ''}`);
    }
    for (const stmt of teardown) await db.query(stmt);
    for (const batch of plan.imports) {
      await db.query(`CREATE SCHEMA IF NOT EXISTS ${ident(batch.schema)}`);
      await db.query(`GRANT USAGE, CREATE ON SCHEMA ${ident(batch.schema)} TO ${ident(computeUser)}`);
      const names = batch.tables.map((t) => ident(t.table)).join(', ');
      await db.query(`IMPORT FOREIGN SCHEMA ${ident(batch.remoteDb)} LIMIT TO (${names}) FROM SERVER ${ident(serverName(batch.shardId))} INTO ${ident(batch.schema)}`);
      const made = await db.query<{ relname: string }>(
        `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = ANY($2) AND c.relkind = 'f'`,
        [batch.schema, batch.tables.map((t) => t.table)],
      );
      const present = new Set(made.rows.map((r) => r.relname));
      for (const t of batch.tables) {
        if (!present.has(t.table)) {
          skipped.push({ database: '', schema: batch.schema, table: t.table, action: 'skipped', shard_id: batch.shardId, reason: 'mysql_fdw did not import it' });
          notImported++;
          continue;
        }
        skipped.push(...(await applyColumnAttributes(db, batch.schema, batch.shardId, t)));
        if (t.partition && hasDdlHooks) skipped.push(...(await adoptPartition(db, batch.schema, batch.shardId, t, computeUser)));
        // The compute account owns the cluster's tables: it can drop and alter them through any compute node.
        await db.query(`ALTER FOREIGN TABLE ${ident(batch.schema)}.${ident(t.table)} OWNER TO ${ident(computeUser)}`);
      }
    }
    for (const fix of plan.alters) {
      skipped.push(...(await applyColumnAttributes(db, fix.schema, fix.shardId, fix)));
      // A partition's new defaults are its parent's too (INSERT through the parent takes the parent's).
      if (fix.partition && hasDdlHooks) skipped.push(...(await adoptPartition(db, fix.schema, fix.shardId, fix, computeUser)));
    }
    skipped.push(...(await recreateViews(db, views)));
    if (hasDdlHooks && plan.drops.length > 0) await db.query('SELECT kcm_ddl.drop_empty_parents()');
    await db.query('COMMIT');
  } catch (err) {
    await db.query('ROLLBACK').catch(() => {});
    throw err;
  }
  return { skipped, notImported };
}

/** Schemas of this database other than PostgreSQL's own, with their comments, and those an extension lives in. */
async function localSchemas(db: AdminClient): Promise<{ marks: Map<string, string | null>; withExtensions: Set<string> }> {
  const rows = await db.query<{ name: string; mark: string | null; extensions: boolean }>(
    `SELECT n.nspname AS name, obj_description(n.oid, 'pg_namespace') AS mark, EXISTS (SELECT 1 FROM pg_extension e WHERE e.extnamespace = n.oid) AS extensions
       FROM pg_namespace n WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'`,
  );
  return { marks: new Map(rows.rows.map((r) => [r.name, r.mark])), withExtensions: new Set(rows.rows.filter((r) => r.extensions).map((r) => r.name)) };
}

/**
 * Makes the schemas the shards have (CREATE SCHEMA through another compute node) and drops
 * the marked ones no shard has any more (DROP SCHEMA there), in one transaction. A drop is
 * checked against a fresh read of the shards first: a schema made again meanwhile stays.
 */
async function applySchemaPlan(db: AdminClient, database: string, plan: SchemaPlan, computeUser: string, shards: ShardEndpoint[]): Promise<CatalogChange[]> {
  let drops = plan.drops;
  if (drops.length > 0) {
    const fresh = await Promise.all(shards.map((s) => readShardTables(s)));
    const still = remoteSchemas(database, fresh);
    drops = fresh.every((v) => v.reachable) ? drops.filter((s) => !still.has(s)) : [];
  }
  if (plan.creates.length === 0 && plan.marks.length === 0 && drops.length === 0) return [];
  const changes: CatalogChange[] = [];
  await db.query('BEGIN');
  try {
    await db.query(`SET LOCAL kcm.sync = 'on'`);
    for (const schema of plan.creates) {
      await db.query(`CREATE SCHEMA IF NOT EXISTS ${ident(schema)} AUTHORIZATION ${ident(computeUser)}`);
      changes.push({ database, schema, table: '', action: 'imported', shard_id: '', reason: 'schema made on the shards' });
    }
    for (const schema of [...plan.creates, ...plan.marks]) await db.query(`COMMENT ON SCHEMA ${ident(schema)} IS ${literal(SCHEMA_MARK)}`);
    for (const schema of drops) {
      // The schema was dropped through another compute node: what it held here goes with it.
      await db.query(`DROP SCHEMA IF EXISTS ${ident(schema)} CASCADE`);
      changes.push({ database, schema, table: '', action: 'dropped', shard_id: '', reason: 'schema dropped on the shards' });
    }
    await db.query('COMMIT');
  } catch (err) {
    await db.query('ROLLBACK').catch(() => {});
    throw err;
  }
  return changes;
}

async function syncDatabase(instance: PostgresInstance, database: string, shards: ShardEndpoint[], views: ShardView[], serversChanged: string[]) {
  return withAdmin(instance, database, async (db) => {
    const here = await localSchemas(db);
    const schemaPlan = planSchemas(remoteSchemas(database, views), here.marks, views.every((v) => v.reachable), here.withExtensions);
    const schemaChanges = await applySchemaPlan(db, database, schemaPlan, instance.user, shards);
    const schemas = [...new Set(views.flatMap((v) => v.tables.filter((t) => t.database === database).map((t) => t.schema)))];
    const state = await readDatabaseState(db, schemas);
    const plan = planDatabase(database, views, state.local, state.otherRelations, state.hasDdlHooks);
    const setup = [...(state.hasExtension ? [] : ['CREATE EXTENSION IF NOT EXISTS mysql_fdw']), ...serverStatements(state, shards, instance.user, serversChanged, database)];
    const teardown = retiredServerStatements(state, shards, serversChanged, database);
    if (setup.length === 0 && teardown.length === 0 && plan.drops.length === 0 && plan.imports.length === 0 && plan.alters.length === 0) return { changes: [...schemaChanges, ...plan.changes], foreignTables: plan.foreignTables };
    let applied: Awaited<ReturnType<typeof applyPlan>>;
    try {
      // The shards are read again once the tables are locked: a view read before a user's DDL
      // through this node committed would re-import from the old columns.
      const stillCurrent = async () => {
        const fresh = planDatabase(database, await Promise.all(shards.map((s) => readShardTables(s))), state.local, state.otherRelations, state.hasDdlHooks);
        if (JSON.stringify(fresh.changes) !== JSON.stringify(plan.changes)) throw new ChangedDuringRound('the shards changed since the round read them');
      };
      applied = await applyPlan(db, setup, plan, instance.user, teardown, state.local, state.hasDdlHooks, stillCurrent);
    } catch (err) {
      if (!(err instanceof ChangedDuringRound)) throw err;
      // Not a failure: the next round reads again. The memo is not written for this round.
      throw new AgentFailure('unavailable', `catalog of ${database} changed during the round (${err.message}); the next round applies it`);
    }
    const { skipped, notImported } = applied;
    const changes = [...schemaChanges, ...plan.changes, ...skipped.map((s) => ({ ...s, database }))];
    return { changes, foreignTables: plan.foreignTables - notImported };
  });
}

/**
 * What the last full sync of an instance started from, by data directory. A round whose
 * shards, credentials, shard tables and databases are all the same, within
 * FULL_ROUND_EVERY_MS of the last full one, has nothing to do in the compute databases and
 * skips reading them. That keeps a round cheap enough to run every 500 ms, which is what
 * brings a table created through another compute node here within 2 s; the periodic full
 * round still repairs anything changed behind kcm's back on the compute node itself.
 */
/** The mark on a database the sync made or saw on the shards: dropped once no shard has it. */
const DATABASE_MARK = 'kcm:database';

const lastFullRound = new Map<string, { key: string; at: number; skipped: CatalogChange[]; foreignTables: number }>();
const FULL_ROUND_EVERY_MS = 10_000;

function roundKey(shards: ShardEndpoint[], views: ShardView[], databases: string[]): string {
  return JSON.stringify([
    shards.map((s) => [s.shard_id, s.host, s.port, s.user, s.password]),
    views.map((v) => [v.shardId, v.reachable, v.tables.map((t) => [t.remoteDb, t.table, t.signature, t.attributes, partitionMembership(t.partition)]), (v.schemas ?? []).map((n) => [n.database, n.schema])]),
    databases,
  ]);
}

export async function syncCatalog(host: PostgresHost, req: SyncCatalogRequest): Promise<SyncCatalogReply> {
  const started = Date.now();
  const instance = await host.registry.get(req.port);
  const shards = validateShards(req.shards);
  if (!(await postmasterStatus(instance.datadir))) throw new AgentFailure('failed_precondition', `the compute instance on port ${instance.port} is not running`);
  const views = await Promise.all(shards.map((s) => readShardTables(s)));
  const changes: CatalogChange[] = views
    .filter((v) => !v.reachable)
    .map((v) => ({ database: '', schema: '', table: '', action: 'skipped', shard_id: v.shardId, reason: `shard unreachable, its foreign tables are kept: ${v.problem}` }));

  const wanted = remoteDatabases(views);
  const existing = await withAdmin(instance, 'postgres', async (db) => {
    // Its CREATE and DROP DATABASE follow the shards: kcm_ddl.c must not carry them back there.
    await db.query(`SET kcm.sync = 'on'`);
    const rows = await db.query<{ datname: string; mark: string | null }>(`SELECT datname, shobj_description(oid, 'pg_database') AS mark FROM pg_database WHERE NOT datistemplate`);
    const names = new Set(rows.rows.map((r) => r.datname));
    for (const database of wanted) {
      if (!names.has(database)) {
        // CREATE DATABASE cannot run in a transaction; the template already has mysql_fdw.
        await db.query(`CREATE DATABASE ${ident(database)} OWNER ${ident(instance.user)}`);
        names.add(database);
      }
      if (rows.rows.find((r) => r.datname === database)?.mark !== DATABASE_MARK) await db.query(`COMMENT ON DATABASE ${ident(database)} IS ${literal(DATABASE_MARK)}`);
    }
    // DROP DATABASE through another compute node: a database this sync marked that no shard
    // has any D_$$_S database for any more goes here too, once every shard answered (twice).
    const gone = rows.rows.filter((r) => r.mark === DATABASE_MARK && r.datname !== 'postgres' && !wanted.has(r.datname)).map((r) => r.datname);
    if (gone.length > 0 && views.every((v) => v.reachable)) {
      const fresh = await Promise.all(shards.map((sh) => readShardTables(sh)));
      const still = remoteDatabases(fresh);
      for (const database of fresh.every((v) => v.reachable) ? gone.filter((d) => !still.has(d)) : []) {
        await db.query(`DROP DATABASE IF EXISTS ${ident(database)} WITH (FORCE)`);
        names.delete(database);
        changes.push({ database, schema: '', table: '', action: 'dropped', shard_id: '', reason: 'database dropped on the shards' });
      }
    }
    return names;
  });
  // Every database gets the shard servers, not only those with tables: a table created
  // through this compute node (kcm_ddl) goes to a shard through them.
  const scope = [...existing].filter(isIdentifier).sort();
  const key = roundKey(shards, views, scope);
  const last = lastFullRound.get(instance.datadir);
  if (last && last.key === key && Date.now() - last.at < FULL_ROUND_EVERY_MS) {
    return { changes: last.skipped, servers_changed: [], foreign_tables: last.foreignTables, elapsed_ms: Date.now() - started };
  }
  lastFullRound.delete(instance.datadir);

  const serversChanged: string[] = [];
  let foreignTables = 0;
  for (const database of scope) {
    const result = await syncDatabase(instance, database, shards, views, serversChanged);
    changes.push(...result.changes);
    foreignTables += result.foreignTables;
  }
  if (scope.join('\0') !== [...instance.catalogDatabases].sort().join('\0')) await host.registry.save({ ...instance, catalogDatabases: scope });
  lastFullRound.set(instance.datadir, { key, at: started, skipped: changes.filter((c) => c.action === 'skipped'), foreignTables });
  const elapsed = Date.now() - started;
  // Skips (unreachable shards, defaults not carried, ...) are logged here and reported to the manager, which warns once per new problem.
  const skipped = changes.filter((c) => c.action === 'skipped').map((c) => `${c.database}.${c.schema}.${c.table}@${c.shard_id}: ${c.reason}`);
  host.logger.info({ port: instance.port, databases: scope.length, changes: changes.length, skipped, servers_changed: serversChanged, elapsed_ms: elapsed }, 'catalog synced');
  return { changes, servers_changed: serversChanged, foreign_tables: foreignTables, elapsed_ms: elapsed };
}
