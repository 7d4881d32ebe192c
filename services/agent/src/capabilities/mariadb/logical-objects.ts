// Which databases and tables a logical dump request names, resolved against the instance:
// every name is checked as a plain identifier before it reaches an argument list, and a
// name the instance does not hold is NOT_FOUND (a dump of nothing is never a success).

import { AgentFailure, type LogicalDumpRequest } from '@kcm/agent-api';
import type { InstanceLayout } from './instance-layout';
import { loadAdminAccount } from './instance-layout';
import { withAdmin } from './sql';

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

export async function resolveDumpObjects(layout: InstanceLayout, req: LogicalDumpRequest): Promise<DumpObjects> {
  checkDumpRequest(req);
  const rows = await withAdmin(layout, await loadAdminAccount(layout), [], async (s) => ({
    databases: await s.rows<{ db: string }>('list databases', 'SELECT SCHEMA_NAME AS db FROM information_schema.SCHEMATA'),
    tables: await s.rows<{ db: string; name: string }>('list tables', "SELECT TABLE_SCHEMA AS db, TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE'"),
  }));
  const present = new Set(rows.databases.map((r) => r.db).filter((db) => !SYSTEM_DATABASES.has(db)));
  for (const db of req.databases) if (!present.has(db)) throw new AgentFailure('not_found', `database ${db} does not exist on the instance on port ${layout.port}`);
  const prefixed = req.database_prefix === '' ? [] : [...present].filter((db) => db.startsWith(req.database_prefix));
  const databases = [...new Set([...req.databases, ...prefixed])].sort();
  if (databases.length === 0) throw new AgentFailure('not_found', `no database starting with ${req.database_prefix} exists on the instance on port ${layout.port}`);
  const wanted = new Set(databases);
  let tableNames = rows.tables.filter((r) => wanted.has(r.db)).map((r) => `${r.db}.${r.name}`);
  if (req.tables.length > 0) {
    const inDb = new Set(tableNames);
    for (const t of req.tables) if (!inDb.has(`${databases[0]}.${t}`)) throw new AgentFailure('not_found', `table ${databases[0]}.${t} does not exist on the instance on port ${layout.port}`);
    tableNames = req.tables.map((t) => `${databases[0]}.${t}`);
  }
  return { databases, tables: [...req.tables], tableNames: [...new Set(tableNames)].sort() };
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
