// MariaDB column defaults as PostgreSQL default expressions for the foreign tables.
//
// mysql_fdw sends every column of a foreign table on INSERT, a NULL for each one the
// statement leaves out, unless the foreign table has a default for it. Without these a
// row inserted through a compute node gets NULL where the shard would have put its
// default, or fails on a NOT NULL column. mysql_fdw's own `import_default` pastes the
// MariaDB text into the DDL unchecked, so kcm maps the defaults itself, and only the
// forms whose meaning is the same on both engines:
//
// - NULL (no default), numeric literals, quoted string literals (MariaDB 10.2.7+ quotes
//   them in information_schema.COLUMNS.COLUMN_DEFAULT; `''` and backslash escapes decoded);
// - current_timestamp()/current_timestamp(n) and curdate(): evaluated on the compute node,
//   in its TimeZone, and sent to the shard as text (MariaDB truncates to the column's
//   precision). A compute node and its shards on hosts with the same time zone agree.
//
// Anything else (uuid(), (1 + 2), b'1', zero dates, ...) is not carried: the foreign
// column gets no default and the table's catalog change says which column and why.

import { literal } from './admin-session';

/** The PostgreSQL expression for a column's default; `sql` null = no default. */
export type MappedDefault = { sql: string | null } | { unmapped: string };

const ESCAPES = new Map([
  ['\\', '\\'],
  ["'", "'"],
  ['"', '"'],
  ['n', '\n'],
  ['r', '\r'],
  ['t', '\t'],
  ['b', '\b'],
  ['Z', '\x1a'],
  ['0', '\0'],
]);

/** The value of a MariaDB quoted string as COLUMN_DEFAULT prints it; undefined when it is not exactly one. */
export function unquoteMariadbString(quoted: string): string | undefined {
  if (quoted.length < 2 || !quoted.startsWith("'") || !quoted.endsWith("'")) return undefined;
  let out = '';
  const body = quoted.slice(1, -1);
  for (let i = 0; i < body.length; i++) {
    const ch = body[i];
    if (ch === "'") {
      if (body[i + 1] !== "'") return undefined; // a lone quote: two strings or an expression
      out += "'";
      i++;
    } else if (ch === '\\') {
      const decoded = ESCAPES.get(body[i + 1] ?? '');
      if (decoded === undefined) return undefined;
      out += decoded;
      i++;
    } else out += ch;
  }
  return out;
}

const NUMBER = /^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$/;
const CURRENT_TIMESTAMP = /^current_timestamp(?:\(\d?\))?$/i;
const BINARY_TYPE = /^(?:binary|varbinary|tinyblob|blob|mediumblob|longblob)\b/i;
const TEMPORAL_TYPE = /^(?:date|datetime|timestamp)\b/i;
const ZERO_DATE = /^0000-00-00/;

/**
 * `columnDefault` is COLUMN_DEFAULT as MariaDB 10.11 reports it (SQL NULL when the column
 * has none), `columnType` its COLUMN_TYPE, `generated` whether IS_GENERATED is ALWAYS.
 */
export function mapMariadbDefault(columnDefault: string | null, columnType: string, generated = false): MappedDefault {
  if (generated || columnDefault === null || columnDefault === 'NULL') return { sql: null };
  const raw = columnDefault.trim();
  if (NUMBER.test(raw)) return { sql: raw };
  if (CURRENT_TIMESTAMP.test(raw)) return { sql: 'CURRENT_TIMESTAMP' };
  if (/^curdate\(\)$/i.test(raw)) return { sql: 'CURRENT_DATE' };
  const text = unquoteMariadbString(raw);
  if (text === undefined) return { unmapped: 'an expression with no safe PostgreSQL equivalent' };
  // bytea reads backslashes as escapes: the bytes would differ.
  if (BINARY_TYPE.test(columnType) && text.includes('\\')) return { unmapped: 'a binary string with backslashes' };
  if (TEMPORAL_TYPE.test(columnType) && ZERO_DATE.test(text)) return { unmapped: 'a zero date, which PostgreSQL has no value for' };
  if (text.includes('\0')) return { unmapped: 'a string with a NUL byte' };
  return { sql: literal(text) };
}
