// Spec 4.5 rules 5 and 6 for one same-named column: may a source value always be stored in
// the target column unchanged? Pure; reads the columns as the agent describes them
// (information_schema.COLUMNS).
//
// Rule 5: the same type, or the same category with the target equal or wider:
//   integer   tinyint < smallint < mediumint < int < bigint; unsigned -> signed only to a
//             strictly wider type; signed -> unsigned never
//   decimal   target integer digits (precision - scale) and scale both >= the source's
//   float     float -> float or double; double -> double
//   string    char, varchar, *text: target length >= source length (char <-> varchar allowed)
//   binary    binary, varbinary, *blob: the same by octets
//   temporal  date -> date or datetime; datetime(p) -> datetime(>= p); timestamp(p) ->
//             timestamp or datetime (>= p); time(p) -> time(>= p); year -> year
//   bit       bit(n) -> bit(>= n)
//   enum, set the same kind (their values are rule 6)
//   other     (geometry, uuid, inet6 ...) the identical column type only
// Rule 6: character sets equal, or the target's contains the source's (utf8mb3 -> utf8mb4);
// enum and set are MariaDB's domain types: the target's values must include the source's.

import type { ColumnDefinition } from '@kcm/agent-api';

type Category = 'integer' | 'decimal' | 'float' | 'string' | 'binary' | 'temporal' | 'bit' | 'enum' | 'set' | 'other';

const INTEGER_BYTES = new Map([['tinyint', 1], ['smallint', 2], ['mediumint', 3], ['int', 4], ['bigint', 8]]);
const STRING_TYPES = new Set(['char', 'varchar', 'tinytext', 'text', 'mediumtext', 'longtext']);
const BINARY_TYPES = new Set(['binary', 'varbinary', 'tinyblob', 'blob', 'mediumblob', 'longblob']);
const TEMPORAL_TYPES = new Set(['date', 'datetime', 'timestamp', 'time', 'year']);
/** Temporal type -> the target types that hold every one of its values. */
const TEMPORAL_WIDER = new Map([
  ['date', ['date', 'datetime']],
  ['datetime', ['datetime']],
  ['timestamp', ['timestamp', 'datetime']],
  ['time', ['time']],
  ['year', ['year']],
]);

function categoryOf(c: ColumnDefinition): Category {
  const t = c.data_type.toLowerCase();
  if (INTEGER_BYTES.has(t)) return 'integer';
  if (t === 'decimal') return 'decimal';
  if (t === 'float' || t === 'double') return 'float';
  if (STRING_TYPES.has(t)) return 'string';
  if (BINARY_TYPES.has(t)) return 'binary';
  if (TEMPORAL_TYPES.has(t)) return 'temporal';
  if (t === 'bit' || t === 'enum' || t === 'set') return t;
  return 'other';
}

const unsigned = (c: ColumnDefinition) => /\bunsigned\b/i.test(c.column_type);

/** Why the target type cannot hold every source value (rule 5), or undefined when it can. */
export function typeNarrowing(source: ColumnDefinition, target: ColumnDefinition): string | undefined {
  if (source.column_type.toLowerCase() === target.column_type.toLowerCase()) return undefined;
  const [sc, tc] = [categoryOf(source), categoryOf(target)];
  if (sc !== tc) return `${source.column_type} and ${target.column_type} are of different categories (${sc}, ${tc})`;
  const narrower = `${target.column_type} is narrower than ${source.column_type}`;
  const s = source.data_type.toLowerCase();
  const t = target.data_type.toLowerCase();
  switch (sc) {
    case 'integer': {
      const [sb, tb] = [INTEGER_BYTES.get(s)!, INTEGER_BYTES.get(t)!];
      if (!unsigned(source) && unsigned(target)) return `${target.column_type} is unsigned, ${source.column_type} is signed`;
      const fits = unsigned(source) === unsigned(target) ? tb >= sb : tb > sb;
      return fits ? undefined : narrower;
    }
    case 'decimal': {
      const intDigits = (c: ColumnDefinition) => c.numeric_precision - c.numeric_scale;
      if (unsigned(target) && !unsigned(source)) return `${target.column_type} is unsigned, ${source.column_type} is signed`;
      return intDigits(target) >= intDigits(source) && target.numeric_scale >= source.numeric_scale ? undefined : narrower;
    }
    case 'float':
      if (unsigned(target) && !unsigned(source)) return `${target.column_type} is unsigned, ${source.column_type} is signed`;
      return s === 'double' && t === 'float' ? narrower : undefined;
    case 'string':
    case 'binary':
    case 'bit':
      return target.char_max_length >= source.char_max_length && (sc !== 'bit' || target.numeric_precision >= source.numeric_precision) ? undefined : narrower;
    case 'temporal':
      if (!TEMPORAL_WIDER.get(s)!.includes(t)) return `${source.column_type} values do not all fit ${target.column_type}`;
      return target.datetime_precision >= source.datetime_precision ? undefined : `${target.column_type} keeps fewer fractional digits than ${source.column_type}`;
    case 'enum':
    case 'set':
      return undefined; // their values: rule 6
    case 'other':
      return `${source.column_type} may only go to the identical type, not ${target.column_type}`;
  }
}

/** Character set -> the sets it contains besides itself. Unicode sets hold every character. */
function contains(target: string, source: string): boolean {
  const t = target.toLowerCase();
  const s = source.toLowerCase().replace(/^utf8$/, 'utf8mb3');
  const tt = t.replace(/^utf8$/, 'utf8mb3');
  if (tt === s) return true;
  if (s === 'binary' || tt === 'binary') return false;
  if (['utf8mb4', 'utf16', 'utf16le', 'utf32'].includes(tt)) return true;
  if (['utf8mb3', 'ucs2'].includes(tt)) return ['ascii', 'latin1', 'utf8mb3', 'ucs2'].includes(s);
  return s === 'ascii';
}

/** The values of an enum('a','b') or set('a','b') column type ('' quotes doubled in the catalog). */
export function memberValues(columnType: string): string[] {
  const inner = /^(?:enum|set)\((.*)\)$/is.exec(columnType.trim())?.[1] ?? '';
  return [...inner.matchAll(/'((?:[^']|'')*)'/g)].map((m) => m[1].replace(/''/g, "'"));
}

/** Why the target's character set or domain does not contain the source's (rule 6), or undefined. */
export function domainNarrowing(source: ColumnDefinition, target: ColumnDefinition): string | undefined {
  if (source.character_set && target.character_set && !contains(target.character_set, source.character_set)) {
    return `character set ${target.character_set} does not contain ${source.character_set}`;
  }
  const kind = categoryOf(source);
  if ((kind === 'enum' || kind === 'set') && categoryOf(target) === kind) {
    const allowed = new Set(memberValues(target.column_type));
    const missing = memberValues(source.column_type).filter((v) => !allowed.has(v));
    if (missing.length > 0) return `${kind} values ${missing.map((v) => `'${v}'`).join(', ')} are not in ${target.column_type}`;
  }
  return undefined;
}
