// The objects of logical backup and restore, between the wire's names and MariaDB's:
// `D_$$_S.T` (table), `D_$$_S` (schema) and `D` (db, every `D_$$_*` database), spec 2.6.

import { KcmError, parseDbTable, type ObjectType } from '@kcm/protocol';
import type { LogicalDumpParams } from '@kcm/agent-api';

/** What to dump of an object on one instance (the port is the caller's). */
export function dumpRequestOf(objectType: ObjectType, dbTable: string): Omit<LogicalDumpParams, 'port'> {
  const parsed = parseDbTable(objectType, dbTable);
  if (!parsed.ok) throw new Error(`${dbTable} is not a ${objectType} name: ${parsed.rule}`);
  const { database, schema, table } = parsed.value;
  if (objectType === 'db') return { databasePrefix: `${database}_$$_` };
  const mariadbDatabase = `${database}_$$_${schema}`;
  return objectType === 'table' ? { databases: [mariadbDatabase], tables: [table!] } : { databases: [mariadbDatabase] };
}

/** What a backup of an object no shard holds fails with: it names the object, and says nothing was stored. */
export function objectNotFound(clusterId: string, objectType: ObjectType, dbTable: string): KcmError {
  const what = objectType === 'table' ? `table ${dbTable} (nor any partition of a partitioned table of that name)` : `${objectType} ${dbTable} (no table of it)`;
  return KcmError.of('NOT_FOUND', `no shard of cluster ${clusterId} holds ${what}; nothing is stored`);
}

/**
 * The tables a backup set of `dbTable` restores, as done_dts names them: its shard tables,
 * and first the object itself when it is a table that none of them is, that is a
 * partitioned parent whose parts hold its partitions (the parent is rebuilt on every compute
 * node from their COMMENTs).
 */
export function restoredTables(objectType: ObjectType, dbTable: string, shardTables: readonly string[]): string[] {
  return objectType === 'table' && !shardTables.includes(dbTable) ? [dbTable, ...shardTables] : [...shardTables];
}

/**
 * logical_restore's done_dts (spec 4.4): every restored table as `<database>_$$_<schema>.<table>`,
 * each followed by a comma, for tables, schemas and databases alike.
 */
export function doneDts(tables: readonly string[]): string {
  return [...new Set(tables)].map((t) => `${t},`).join('');
}
