/**
 * Shared field rules: the string formats of the Emit API, each defined once as a parser
 * (used by jobs that need the parts, e.g. `parseDbTable`) and as a zod field built from
 * that parser (used by the paras schemas). A parser returns the value or the rule that
 * was broken, phrased to follow the field name: `paras.port: must be an integer in 1..65535`.
 *
 * Wire rules that hold for every field (decisions, see libs/protocol/README.md):
 * - Every value is a JSON string unless the spec gives another type (spec 2.1). A JSON
 *   number where a string is meant is rejected, so that kcm and the reference clients
 *   agree on one wire form.
 * - Counts and sizes are decimal digits without sign, fraction or leading zero; the
 *   validated paras carry them as numbers. Ids stay decimal strings (kcm assigns them
 *   from counters in the replicated state) but must be positive integers.
 * - Flags accept "0"/"1"/"true"/"false" and become booleans.
 * - SQL identifiers (database, schema, table, variable names) are ASCII: a letter or `_`
 *   then letters, digits or `_`, at most 64 characters. Unicode there is rejected with that
 *   rule. Free text (nick_name, user_name, rack_id) may hold any well-formed Unicode
 *   without control characters and is stored as sent.
 */
import { isIP } from 'node:net';
import { z } from 'zod';

export type Parsed<T> = { ok: true; value: T } | { ok: false; rule: string };

const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const broken = (rule: string): Parsed<never> => ({ ok: false, rule });

/** The human rule of each field builder, read by describeJob for help text. */
export const fieldRules = z.registry<{ rule: string }>();

function withRule<T extends z.ZodType>(schema: T, rule: string): T {
  fieldRules.add(schema, { rule });
  return schema;
}

/** A string checked by `parse`; a broken rule becomes an issue quoting the string as sent. */
function checkedString<T>(parse: (s: string) => Parsed<T>) {
  return z.string().superRefine((s, ctx) => {
    const r = parse(s);
    if (!r.ok) ctx.addIssue({ code: 'custom', message: r.rule, input: s });
  });
}

/** A string field checked by `parse`; the validated paras keep the string. */
export function formatted<T>(parse: (s: string) => Parsed<T>, rule: string) {
  return withRule(checkedString(parse), rule);
}

/** Like `formatted`, but the validated paras carry the parsed value. */
function formattedAs<T>(parse: (s: string) => Parsed<T>, rule: string) {
  const schema = checkedString(parse).transform((s) => (parse(s) as { ok: true; value: T }).value);
  return withRule(schema, rule);
}

// ---------------------------------------------------------------- numbers

const DIGITS = /^(0|[1-9][0-9]*)$/;

export function parseInteger(s: string, min: number, max = Number.MAX_SAFE_INTEGER): Parsed<number> {
  const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in ${min}..${max}`;
  if (!DIGITS.test(s)) return broken(`must be an integer ${range} written in decimal digits`);
  const n = Number(s);
  if (!Number.isSafeInteger(n) || n > max) return broken(`must be <= ${max}`);
  if (n < min) return broken(`must be >= ${min}`);
  return ok(n);
}

/** A count or size: decimal digits -> number, at least `min`. */
export const integerString = (min: number, max?: number) =>
  formattedAs((s) => parseInteger(s, min, max), `integer string ${max === undefined ? `>= ${min}` : `${min}..${max}`}`);

export function parsePort(s: string): Parsed<number> {
  return parseInteger(s, 1, 65535);
}
export const portString = () => formattedAs(parsePort, 'port 1..65535');

export function parseId(s: string): Parsed<string> {
  return DIGITS.test(s) && s !== '0' && Number.isSafeInteger(Number(s))
    ? ok(s)
    : broken('must be a positive integer id in decimal digits');
}
/** An object id (cluster_id, shard_id, comp_id): a positive integer, kept as its string. */
export const idString = () => formatted(parseId, 'positive integer id');

// ---------------------------------------------------------------- enums and flags

export const enumString = <const T extends readonly [string, ...string[]]>(values: T) =>
  withRule(z.enum(values), values.join('|'));

const FLAG_VALUES: Record<string, boolean> = { '0': false, '1': true, false: false, true: true };
export function parseFlag(s: string): Parsed<boolean> {
  return Object.hasOwn(FLAG_VALUES, s) ? ok(FLAG_VALUES[s]) : broken('must be "0", "1", "true" or "false"');
}
export const flagString = () => formattedAs(parseFlag, '0|1|true|false');

// ---------------------------------------------------------------- text and names

const CONTROL = /\p{Cc}/u;

export function parseText(s: string, maxCodePoints: number): Parsed<string> {
  if (!s.isWellFormed()) return broken('must be well-formed Unicode (no lone surrogates)');
  if (s.trim() === '') return broken('must not be empty or blank');
  if (CONTROL.test(s)) return broken('must not contain control characters');
  if ([...s].length > maxCodePoints) return broken(`must be at most ${maxCodePoints} characters`);
  return ok(s);
}
/** Free text such as nick_name: any well-formed Unicode, no control characters. */
export const textString = (maxCodePoints = 64) =>
  formatted((s) => parseText(s, maxCodePoints), `text, 1..${maxCodePoints} Unicode characters`);

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
export function parseIdentifier(s: string): Parsed<string> {
  return IDENTIFIER.test(s)
    ? ok(s)
    : broken('must be an ASCII SQL identifier: a letter or _ then letters, digits or _, at most 64 characters');
}
export const identifierString = () => formatted(parseIdentifier, 'SQL identifier [A-Za-z_][A-Za-z0-9_]*');

/** cluster_name as kcm generates it (cluster_<unix seconds>_<6-digit sequence>) or any safe name. */
const CLUSTER_NAME = /^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$/;
export function parseClusterName(s: string): Parsed<string> {
  return CLUSTER_NAME.test(s) ? ok(s) : broken('must be a cluster name of ASCII letters, digits, _ or -');
}
export const clusterNameString = () => formatted(parseClusterName, 'cluster name, e.g. cluster_1700000000_000001');

const FORBIDDEN_PATH_SEGMENTS = new Set(['.', '..']);
export function parseAbsolutePath(s: string): Parsed<string> {
  if (!s.startsWith('/')) return broken('must be an absolute path');
  if (s.length > 4096) return broken('must be at most 4096 characters');
  if (CONTROL.test(s) || !s.isWellFormed()) return broken('must not contain control characters');
  if (s.split('/').some((seg) => FORBIDDEN_PATH_SEGMENTS.has(seg))) return broken('must not contain . or .. segments');
  return ok(s);
}
export const absolutePathString = () => formatted(parseAbsolutePath, 'absolute path');

// ---------------------------------------------------------------- network

export function parseHostAddress(s: string): Parsed<string> {
  return isIP(s) !== 0 ? ok(s) : broken('must be an IPv4 or IPv6 address');
}
export const hostAddressString = () => formatted(parseHostAddress, 'IPv4 or IPv6 address');
export const hostAddressList = () => withRule(z.array(hostAddressString()), 'array of IPv4/IPv6 addresses');

export const PORT_RANGE_BOUNDS = { low: 1024, high: 65535 } as const;
export function parsePortRange(s: string): Parsed<{ low: number; high: number }> {
  const m = /^([0-9]+)-([0-9]+)$/.exec(s);
  const rule = `must be <low>-<high> with ${PORT_RANGE_BOUNDS.low} <= low < high <= ${PORT_RANGE_BOUNDS.high}`;
  if (!m) return broken(rule);
  const low = Number(m[1]);
  const high = Number(m[2]);
  if (low < PORT_RANGE_BOUNDS.low || high > PORT_RANGE_BOUNDS.high || low >= high) return broken(rule);
  return ok({ low, high });
}
export const portRangeString = () => formatted(parsePortRange, `<low>-<high> inside ${PORT_RANGE_BOUNDS.low}-${PORT_RANGE_BOUNDS.high}`);

const HOSTNAME = /^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
/** `<host>:<port>`, host an IPv4 address, a DNS name or a bracketed IPv6 address. */
export function parsePeer(s: string): Parsed<{ host: string; port: number }> {
  const rule = 'must be <host>:<port> (IPv4, DNS name or [IPv6], port 1..65535)';
  const m = /^(\[([^\]]+)\]|[^:[\]]+):([0-9]+)$/.exec(s);
  if (!m) return broken(rule);
  const host = m[2] ?? m[1];
  const hostOk = m[2] !== undefined ? isIP(host) === 6 : isIP(host) === 4 || HOSTNAME.test(host);
  const port = parsePort(m[3]);
  if (!hostOk || !port.ok) return broken(rule);
  return ok({ host, port: port.value });
}
export const peerString = () => formatted(parsePeer, '<host>:<port>');

// ---------------------------------------------------------------- tables and backups

export type ObjectType = 'table' | 'schema' | 'db';
export const OBJECT_TYPES = ['table', 'schema', 'db'] as const;

/** A shard-side object name (spec 2.6): PostgreSQL database D, schema S <-> MariaDB database D_$$_S. */
export interface DbTable {
  database: string;
  schema?: string;
  table?: string;
}

const DB_TABLE_SHAPES: Record<ObjectType, string> = {
  table: '<database>_$$_<schema>.<table>',
  schema: '<database>_$$_<schema>',
  db: '<database>',
};

function identifiers(parts: string[]): boolean {
  return parts.every((p) => IDENTIFIER.test(p));
}

export function parseDbTable(type: ObjectType, s: string): Parsed<DbTable> {
  const rule = `must be ${DB_TABLE_SHAPES[type]} for type ${type} (SQL identifiers)`;
  if (type === 'db') return identifiers([s]) ? ok({ database: s }) : broken(rule);
  const [dbSchema, table, ...rest] = s.split('.');
  if (rest.length > 0 || (type === 'table') !== (table !== undefined)) return broken(rule);
  const halves = dbSchema.split('_$$_');
  if (halves.length !== 2) return broken(rule);
  const [database, schema] = halves;
  const parts = type === 'table' ? [database, schema, table] : [database, schema];
  if (!identifiers(parts)) return broken(rule);
  return ok(type === 'table' ? { database, schema, table } : { database, schema });
}

/** `<database>.<schema>.<table>` as expand_cluster's table_list names tables. */
export function parseQualifiedTable(s: string): Parsed<{ database: string; schema: string; table: string }> {
  const parts = s.split('.');
  if (parts.length !== 3 || !identifiers(parts)) return broken('must be <database>.<schema>.<table> (SQL identifiers)');
  const [database, schema, table] = parts;
  return ok({ database, schema, table });
}
export const qualifiedTableString = () => formatted(parseQualifiedTable, '<database>.<schema>.<table>');

export interface RepartitionPair {
  source: { database: string; schema: string; table: string };
  target: { database: string; schema: string; table: string };
}

/** `<src_db>_$$_<schema>.<table>=><dst_db>_$$_<schema>.<table>`, comma-separated (spec 4.5). */
export function parseRepartitionPairs(s: string): Parsed<RepartitionPair[]> {
  const items = s.split(',').map((p) => p.trim());
  const pairs: RepartitionPair[] = [];
  for (const item of items) {
    const sides = item.split('=>');
    const source = sides.length === 2 ? parseDbTable('table', sides[0]) : undefined;
    const target = sides.length === 2 ? parseDbTable('table', sides[1]) : undefined;
    if (!source?.ok || !target?.ok) {
      return broken(`must be comma-separated <src_db>_$$_<schema>.<table>=><dst_db>_$$_<schema>.<table> pairs; ${JSON.stringify(item)} is not`);
    }
    pairs.push({ source: source.value as RepartitionPair['source'], target: target.value as RepartitionPair['target'] });
  }
  const sourceDbs = new Set(pairs.map((p) => p.source.database));
  if (sourceDbs.size > 1) return broken(`must name source tables of one database (spec 4.5 rule 2), found ${[...sourceDbs].join(', ')}`);
  const seen = new Set<string>();
  for (const { source } of pairs) {
    const key = `${source.database}.${source.schema}.${source.table}`;
    if (seen.has(key)) return broken(`must not name a source table twice (${key})`);
    seen.add(key);
  }
  return ok(pairs);
}
export const repartitionPairsString = () => formatted(parseRepartitionPairs, 'src=>dst table pairs, comma-separated, one source database');

const CLOCK = /^([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9])$/;
const secondsOfDay = (m: RegExpExecArray) => Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]);

/** A daily window `HH:MM:SS-HH:MM:SS`; it may cross midnight, it may not be empty. */
export function parseBackupWindow(s: string): Parsed<{ startSecond: number; endSecond: number }> {
  const rule = 'must be a daily window HH:MM:SS-HH:MM:SS with start != end';
  const [a, b, ...rest] = s.split('-');
  const start = a === undefined ? null : CLOCK.exec(a);
  const end = b === undefined ? null : CLOCK.exec(b);
  if (rest.length > 0 || !start || !end) return broken(rule);
  const startSecond = secondsOfDay(start);
  const endSecond = secondsOfDay(end);
  if (startSecond === endSecond) return broken(rule);
  return ok({ startSecond, endSecond });
}
export const backupWindowString = () => formatted(parseBackupWindow, 'HH:MM:SS-HH:MM:SS');

const DATETIME = /^([0-9]{4})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})$/;

/**
 * A restore point: `YYYY-MM-DD HH:MM:SS` (a real calendar date, read in the manager's local
 * time zone) or Unix seconds, both accepted because the spec names no format. Returns Unix
 * seconds either way.
 */
export function parseRestoreTime(s: string, timeZoneOffsetMinutes?: (d: Date) => number): Parsed<number> {
  const rule = 'must be YYYY-MM-DD HH:MM:SS (a real date and time) or Unix seconds';
  if (/^[1-9][0-9]{0,10}$/.test(s)) return ok(Number(s));
  const m = DATETIME.exec(s);
  if (!m) return broken(rule);
  const [year, month, day, hour, minute, second] = m.slice(1).map(Number);
  const utc = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  const roundTrips =
    utc.getUTCFullYear() === year && utc.getUTCMonth() === month - 1 && utc.getUTCDate() === day &&
    utc.getUTCHours() === hour && utc.getUTCMinutes() === minute && utc.getUTCSeconds() === second;
  if (!roundTrips || year < 1970) return broken(rule);
  const local = new Date(year, month - 1, day, hour, minute, second);
  const offset = timeZoneOffsetMinutes ? timeZoneOffsetMinutes(local) : local.getTimezoneOffset();
  return ok(Math.floor(utc.getTime() / 1000) + offset * 60);
}
export const restoreTimeString = () => formatted((s) => parseRestoreTime(s), 'YYYY-MM-DD HH:MM:SS or Unix seconds');

// ---------------------------------------------------------------- cross-field rules

/**
 * Reports a rule that ties fields together on the later field, quoting its wire value.
 * Numbers are quoted back as the decimal strings they were sent as.
 */
export function addFieldIssue(
  ctx: { addIssue: (issue: { code: 'custom'; message: string; path: PropertyKey[]; input: unknown }) => void },
  path: PropertyKey[],
  message: string,
  value: unknown,
): void {
  ctx.addIssue({ code: 'custom', message, path, input: typeof value === 'number' ? String(value) : value });
}
