// Which databases and tables a logical dump request names, resolved against the instance:
// every name is checked as a plain identifier before it reaches an argument list, and a
// name the instance does not hold is NOT_FOUND (a dump of nothing is never a success).
//
// A table name may be a partitioned parent: the parent lives only on the compute nodes, and
// its partitions are tables of the shards whose COMMENT records it (`{"kcm_partition_of":
// [schema, parent], "key", "bound"}`, written by kcm_ddl). Such a name stands for every
// partition of it in the same database that this instance holds; their COMMENTs go into the
// dump with them, so a restore gives the catalog sync what it needs to build the parent.

import { AgentFailure, type LogicalDumpRequest } from '@kcm/agent-api';
import type { InstanceLayout } from '../instance/instance-layout';
import { loadAdminAccount } from '../instance/instance-layout';
import { withAdmin } from '../instance/sql';
import { parsePartitionComment, splitRemoteDb } from '../../postgres/shard-catalog';

/** MariaDB identifiers as kcm names them (`D_$$_S`, table names): no quoting ever needed. */
const IDENTIFIER = /^[A-Za-z0-9_$]{1,64}$/;
const SYSTEM_DATABASES = new Set(['mysql', 'information_schema', 'performance_schema', 'sys']);

export interface DumpObjects {
  databases: string[];
  /** Only these tables of databases[0] (empty: the databases whole). */
  tables: string[];
  /** `database.table` of every table the dump holds, sorted. */
  tableNames: string[];
}

export function checkDumpRequest(req: LogicalDumpRequest): void {
  for (const [field, names] of [['databases', req.databases], ['tables', req.tables]] as const) {
    for (const name of names) if (!IDENTIFIER.test(name)) throw new AgentFailure('invalid_argument', `${field}: ${JSON.stringify(name)} is not a plain identifier (${IDENTIFIER})`);
  }
  if (req.database_prefix !== '' && !IDENTIFIER.test(req.database_prefix)) {
    throw new AgentFailure('invalid_argument', `database_prefix ${JSON.stringify(req.database_prefix)} is not a plain identifier prefix`);
  }
  if (req.tables.length > 0 && (req.databases.length !== 1 || req.database_prefix !== '')) {
    throw new AgentFailure('invalid_argument', 'tables need exactly one database and no database_prefix');
  }
  if (req.databases.length === 0 && req.database_prefix === '') throw new AgentFailure('invalid_argument', 'name databases or a database_prefix to dump');
}

/** What an instance holds, as resolveDumpObjects reads it. */
export interface InstanceCatalog {
  databases: string[];
  /** Base tables, with their COMMENT. */
  tables: { db: string; name: string; comment: string | null }[];
}

/**
 * The tables of `db` that stand for table name `name`: the table itself, else the partitions
 * of the partitioned parent `name` (of the schema `db` holds), sorted; empty when neither.
 */
export function tablesNamed(catalog: InstanceCatalog, db: string, name: string): string[] {
  const inDb = catalog.tables.filter((t) => t.db === db);
  if (inDb.some((t) => t.name === name)) return [name];
  const schema = splitRemoteDb(db)?.schema;
  return inDb
    .filter((t) => {
      const of = parsePartitionComment(t.comment);
      return of !== undefined && of.table === name && of.schema === schema;
    })
    .map((t) => t.name)
    .sort();
}

/**
 * The request resolved against what the instance holds. A name it does not hold is
 * NOT_FOUND, unless `listOnly`: then it is left out (the caller asks which instances hold an
 * object, and an instance holding none of it answers with no tables).
 */
export function selectDumpObjects(catalog: InstanceCatalog, req: LogicalDumpRequest, port: number, listOnly = false): DumpObjects {
  const present = new Set(catalog.databases.filter((db) => !SYSTEM_DATABASES.has(db)));
  const missing = (what: string) => {
    if (!listOnly) throw new AgentFailure('not_found', `${what} on the instance on port ${port}`);
  };
  for (const db of req.databases) if (!present.has(db)) missing(`database ${db} does not exist`);
  const prefixed = req.database_prefix === '' ? [] : [...present].filter((db) => db.startsWith(req.database_prefix));
  const databases = [...new Set([...req.databases.filter((db) => present.has(db)), ...prefixed])].sort();
  if (databases.length === 0) {
    missing(`no database starting with ${req.database_prefix} exists`);
    return { databases: [], tables: [], tableNames: [] };
  }
  if (req.tables.length === 0) {
    const wanted = new Set(databases);
    const tableNames = catalog.tables.filter((r) => wanted.has(r.db)).map((r) => `${r.db}.${r.name}`);
    return { databases, tables: [], tableNames: [...new Set(tableNames)].sort() };
  }
  const db = databases[0];
  const tables: string[] = [];
  for (const name of req.tables) {
    const found = tablesNamed(catalog, db, name);
    if (found.length === 0) missing(`table ${db}.${name} does not exist, nor any partition of a partitioned table ${name},`);
    tables.push(...found);
  }
  const unique = [...new Set(tables)];
  // A table request that resolved to nothing (listOnly) must never become a dump of the whole database.
  if (unique.length === 0) return { databases, tables: [], tableNames: [] };
  return { databases, tables: unique, tableNames: unique.map((t) => `${db}.${t}`).sort() };
}

export async function resolveDumpObjects(layout: InstanceLayout, req: LogicalDumpRequest): Promise<DumpObjects> {
  checkDumpRequest(req);
  const catalog = await withAdmin(layout, await loadAdminAccount(layout), [], async (s) => ({
    databases: (await s.rows<{ db: string }>('list databases', 'SELECT SCHEMA_NAME AS db FROM information_schema.SCHEMATA')).map((r) => r.db),
    tables: await s.rows<{ db: string; name: string; comment: string | null }>(
      'list tables',
      "SELECT TABLE_SCHEMA AS db, TABLE_NAME AS name, TABLE_COMMENT AS comment FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE'",
    ),
  }));
  return selectDumpObjects(catalog, req, layout.port, req.list_only === true);
}

/** mariadb-dump's arguments after the connection options: whole databases, or tables of one. */
export function dumpObjectArgs(objects: DumpObjects): string[] {
  return objects.tables.length > 0 ? ['--', objects.databases[0], ...objects.tables] : ['--databases', '--', ...objects.databases];
}

/**
 * What a table dump starts with: mariadb-dump writes no CREATE DATABASE / USE for tables of
 * one database, and a dump must load into an instance that no longer has the database.
 */
export function tableDumpPreamble(objects: DumpObjects): Buffer {
  if (objects.tables.length === 0) return Buffer.alloc(0);
  const db = objects.databases[0];
  return Buffer.from(`CREATE DATABASE IF NOT EXISTS \`${db}\`;\nUSE \`${db}\`;\n`);
}
