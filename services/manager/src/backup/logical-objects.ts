// The objects of logical backup and restore, between the wire's names and MariaDB's:
// `D_$$_S.T` (table), `D_$$_S` (schema) and `D` (db, every `D_$$_*` database), spec 2.6.

import { parseDbTable, type ObjectType } from '@kcm/protocol';
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

/** Whether a shard table (`database.table`, MariaDB names, as ListTables reports) belongs to the object. */
export function tableBelongsTo(objectType: ObjectType, dbTable: string, shardTable: string): boolean {
  const dot = shardTable.indexOf('.');
  const db = shardTable.slice(0, dot);
  if (objectType === 'table') return shardTable === dbTable;
  if (objectType === 'schema') return db === dbTable;
  return db.startsWith(`${dbTable}_$$_`);
}

/**
 * logical_restore's done_dts (spec 4.4): every restored table as `<database>_$$_<schema>.<table>`,
 * each followed by a comma, for tables, schemas and databases alike.
 */
export function doneDts(tables: readonly string[]): string {
  return [...new Set(tables)].map((t) => `${t},`).join('');
}
