// The pure half of catalog sync: given what the shards hold and what one compute database
// has, decide which foreign tables to import, re-import, alter and drop. No I/O, so every
// rule below is tested directly (test/postgres/catalog-plan.test.ts).

import { isIdentifier } from './layout';
import type { CatalogChange } from '@kcm/agent-api';
import type { RemoteColumn, RemoteTable, ShardView } from './shard-catalog';

export const SERVER_PREFIX = 'shard_';

export function serverName(shardId: string): string {
  return `${SERVER_PREFIX}${shardId}`;
}

/**
 * A foreign table kcm made: on a shard_<id> server, carrying in its comment the remote
 * columns' signature and the signature of the column attributes (NOT NULL, defaults) it
 * was given ('' for a table made before kcm carried them).
 */
export interface LocalForeignTable {
  schema: string;
  table: string;
  server: string;
  signature: string;
  attributes: string;
  /** The parent it is a partition of here, as partitionMembership() spells it; '' when none. */
  partitionOf?: string;
}

/** A partition's parent and bound as one comparable string ('' for no parent): the shard's record against what a compute node has attached. */
export function partitionMembership(p: { schema: string; table: string; bound: string } | undefined): string {
  return p ? JSON.stringify([p.schema, p.table, p.bound]) : '';
}

/** What a foreign table is built from: its name, both signatures and the columns' attributes. */
export type TableDefinition = Pick<RemoteTable, 'table' | 'signature' | 'attributes' | 'columns' | 'partition'>;

export interface ImportBatch {
  shardId: string;
  schema: string;
  remoteDb: string;
  tables: TableDefinition[];
}

/** A foreign table whose columns are right but whose NOT NULL or defaults are not: fixed in place. */
export interface AttributeFix extends TableDefinition {
  schema: string;
  shardId: string;
}

export interface DatabasePlan {
  drops: LocalForeignTable[];
  imports: ImportBatch[];
  alters: AttributeFix[];
  changes: CatalogChange[];
  /** Foreign tables of kcm's that exist after the plan runs. */
  foreignTables: number;
}

const key = (schema: string, table: string) => `${schema}.${table}`;

const definition = ({ table, signature, attributes, columns, partition }: RemoteTable): TableDefinition => ({ table, signature, attributes, columns, ...(partition ? { partition } : {}) });

/** A 'skipped' change naming each column whose MariaDB default the foreign table cannot carry. */
function unmappedDefaults(database: string, shardId: string, remote: RemoteTable): CatalogChange[] {
  const unmapped = remote.columns.filter((c: RemoteColumn) => c.unmapped);
  if (unmapped.length === 0) return [];
  const reason = `defaults not carried: ${unmapped.map((c) => `${c.name} (${c.rawDefault}: ${c.unmapped})`).join('; ')}`;
  return [{ database, schema: remote.schema, table: remote.table, action: 'skipped', shard_id: shardId, reason }];
}

/**
 * Rules:
 * - a kcm foreign table whose shard is unreachable is left alone (its source is unknown);
 * - one whose source table exists on no reachable shard is dropped (the request names
 *   every shard of the cluster, so a shard missing from it is gone);
 * - one whose source moved to another shard, or whose columns changed, is re-imported;
 * - one whose columns' NOT NULL or defaults changed (or were never set) is altered in place;
 * - a source table's default that has no safe PostgreSQL form is reported as skipped;
 * - a source table with no foreign table is imported, unless a local relation that is not
 *   kcm's already has the name, or a name is not a plain identifier (then: skipped);
 * - a table present on several shards (mid-move) stays where it is, else the first listed shard wins;
 * - with `followPartitions` (kcm_ddl attaches partitions here), one whose shard table records
 *   another parent or bound than it is attached with here (ATTACH or DETACH PARTITION through
 *   another compute node) is re-imported, and attached as the record says.
 */
export function planDatabase(database: string, shards: ShardView[], local: LocalForeignTable[], otherRelations: Set<string>, followPartitions = false): DatabasePlan {
  const unreachable = new Set(shards.filter((s) => !s.reachable).map((s) => serverName(s.shardId)));
  const sources = new Map<string, { shardId: string; remote: RemoteTable }[]>();
  const changes: CatalogChange[] = [];
  for (const shard of shards) {
    for (const remote of shard.tables) {
      if (remote.database !== database) continue;
      if (![remote.database, remote.schema, remote.table].every(isIdentifier)) {
        changes.push({ database, schema: remote.schema, table: remote.table, action: 'skipped', shard_id: shard.shardId, reason: 'not a plain identifier' });
        continue;
      }
      const k = key(remote.schema, remote.table);
      sources.set(k, [...(sources.get(k) ?? []), { shardId: shard.shardId, remote }]);
    }
  }

  const drops: LocalForeignTable[] = [];
  const alters: AttributeFix[] = [];
  const toImport: { shardId: string; remote: RemoteTable; action: 'imported' | 'reimported'; reason: string }[] = [];
  const covered = new Set<string>();
  let kept = 0;
  for (const ft of local) {
    const k = key(ft.schema, ft.table);
    covered.add(k);
    if (unreachable.has(ft.server)) {
      kept++;
      continue;
    }
    const candidates = sources.get(k) ?? [];
    const here = candidates.find((c) => serverName(c.shardId) === ft.server);
    const reparented = followPartitions && here !== undefined && partitionMembership(here.remote.partition) !== (ft.partitionOf ?? '');
    if (here && here.remote.signature === ft.signature && !reparented) {
      kept++;
      changes.push(...unmappedDefaults(database, here.shardId, here.remote));
      if (here.remote.attributes !== ft.attributes) {
        alters.push({ ...definition(here.remote), schema: ft.schema, shardId: here.shardId });
        changes.push({ database, schema: ft.schema, table: ft.table, action: 'altered', shard_id: here.shardId, reason: 'NOT NULL or defaults changed' });
      }
      continue;
    }
    drops.push(ft);
    if (candidates.length === 0) {
      changes.push({ database, schema: ft.schema, table: ft.table, action: 'dropped', shard_id: ft.server.slice(SERVER_PREFIX.length), reason: 'source table is gone' });
      continue;
    }
    const from = here ?? candidates[0];
    const reason = !here ? `moved from ${ft.server}` : here.remote.signature !== ft.signature ? 'columns changed' : 'partition of another parent';
    toImport.push({ ...from, action: 'reimported', reason });
  }
  for (const [k, candidates] of sources) {
    if (covered.has(k)) continue;
    const { shardId, remote } = candidates[0];
    if (otherRelations.has(k)) {
      changes.push({ database, schema: remote.schema, table: remote.table, action: 'skipped', shard_id: shardId, reason: 'a local relation that kcm did not create has this name' });
      continue;
    }
    toImport.push({ shardId, remote, action: 'imported', reason: '' });
  }

  const batches = new Map<string, ImportBatch>();
  for (const { shardId, remote, action, reason } of toImport) {
    const b = `${shardId}\0${remote.schema}`;
    const batch = batches.get(b) ?? { shardId, schema: remote.schema, remoteDb: remote.remoteDb, tables: [] };
    batch.tables.push(definition(remote));
    batches.set(b, batch);
    changes.push({ database, schema: remote.schema, table: remote.table, action, shard_id: shardId, reason }, ...unmappedDefaults(database, shardId, remote));
  }
  return { drops, imports: [...batches.values()], alters, changes, foreignTables: kept + toImport.length };
}

/** Every compute database the shards name (reachable shards only). */
export function remoteDatabases(shards: ShardView[]): Set<string> {
  return new Set(shards.flatMap((s) => [...s.tables.map((t) => t.database), ...(s.schemas ?? []).map((n) => n.database)]).filter(isIdentifier));
}

/** The schemas of `database` some reachable shard has a D_$$_S database for. */
export function remoteSchemas(database: string, shards: ShardView[]): Set<string> {
  return new Set(shards.flatMap((s) => [...s.tables, ...(s.schemas ?? [])].filter((n) => n.database === database).map((n) => n.schema)).filter(isIdentifier));
}

/** The mark on a schema kcm made or saw on the shards: dropped once no shard has its database. */
export const SCHEMA_MARK = 'kcm:schema';

export interface SchemaPlan {
  creates: string[];
  drops: string[];
  /** Existing, unmarked schemas the shards have: marked (so that a DROP SCHEMA elsewhere reaches them). */
  marks: string[];
}

/**
 * Schemas follow the shards' D_$$_S databases: a missing one is made; a marked one no shard
 * has any more is dropped, but only when every shard answered (an unreachable one may hold it).
 *
 * A schema an extension lives in (`withExtensions`) is never dropped. The drop is CASCADE,
 * and mysql_fdw lives in schema public (kcm_ddl requires it): dropping public because no
 * shard had postgres_$$_public any more (delete_shards of the one shard that had it) took
 * both extensions and every shard server with it, so every later sync failed at CREATE
 * EXTENSION ("no schema has been selected to create in") and DDL on the node was no longer
 * carried to the shards (issue 35, defect 9). Such a schema stays, marked, and empty of
 * foreign tables once the shards have none for it.
 */
export function planSchemas(wanted: Set<string>, local: Map<string, string | null>, everyShardReachable: boolean, withExtensions: ReadonlySet<string> = new Set()): SchemaPlan {
  const creates = [...wanted].filter((s) => !local.has(s)).sort();
  const marks = [...wanted].filter((s) => local.has(s) && local.get(s) !== SCHEMA_MARK && (local.get(s) === null || local.get(s) === 'standard public schema')).sort();
  const drops = everyShardReachable ? [...local].filter(([s, mark]) => mark === SCHEMA_MARK && !wanted.has(s) && !withExtensions.has(s)).map(([s]) => s).sort() : [];
  return { creates, drops, marks };
}
