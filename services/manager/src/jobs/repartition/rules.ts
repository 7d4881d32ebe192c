// The spec's repartition rules (4.5), checked against the source and the pre-created target
// table as their engines describe them, before anything is copied. Pure: the job reads the
// descriptions and the row probes' results through the agents and hands them in here.
//
//   1 source and target tables exist (base tables) in their clusters
//   2 every source table of one task is in one database
//   3 every source column is in the target (any order); extra target columns have a
//     default or allow NULL
//   4 same-named columns: a source NULL may not meet a target NOT NULL; source data must
//     pass a target check on that column                              (row probes)
//   5 same-named column types: the same, or the same category and the target equal or
//     wider (column-types.ts)
//   6 character sets: equal or the target's contains the source's; enum/set (MariaDB's
//     domain types): the target's values include the source's
//   7 source data satisfies the target's primary and unique keys and its table checks
//                                                                       (row probes)
// Every refusal names its rule, the table and the column.

import type { ColumnDefinition, ProbeResult, RowProbe, TableDescription } from '@kcm/agent-api';
import { domainNarrowing, typeNarrowing } from './column-types';

export interface TableName {
  database: string;
  table: string;
}
export interface RepartitionTablePair {
  source: TableName;
  target: TableName;
}

export interface RuleViolation {
  rule: 1 | 2 | 3 | 4 | 5 | 6 | 7;
  /** `database.table` the refusal is about. */
  table: string;
  /** The column it is about ('' when the rule is about a whole table). */
  column: string;
  message: string;
}

const nameOf = (t: TableName) => `${t.database}.${t.table}`;
const byName = (columns: readonly ColumnDefinition[]) => new Map(columns.map((c) => [c.name.toLowerCase(), c]));

/** Rule 2 (the gateway already refuses a request that breaks it; kept here so the checker is whole). */
export function oneSourceDatabase(pairs: readonly RepartitionTablePair[]): RuleViolation[] {
  const databases = [...new Set(pairs.map((p) => p.source.database))];
  if (databases.length <= 1) return [];
  return [{ rule: 2, table: nameOf(pairs[0].source), column: '', message: `rule 2: the source tables of one task must be in one database, found ${databases.join(', ')}` }];
}

/** Rule 1: the table is there, once, and is a base table. `where` names its cluster. */
export function tableExists(name: TableName, side: 'source' | 'target', where: string, found: TableDescription | undefined, shardsHolding: number): RuleViolation[] {
  const table = nameOf(name);
  const refuse = (why: string): RuleViolation[] => [{ rule: 1, table, column: '', message: `rule 1: ${side} table ${table} ${why}` }];
  if (shardsHolding === 0 || !found?.exists) return refuse(`does not exist in ${where}${side === 'target' ? ' (create it before the call)' : ''}`);
  if (shardsHolding > 1) return refuse(`exists on ${shardsHolding} shards of ${where}; kcm cannot tell which one is the table`);
  if (found.table_type !== 'BASE TABLE') return refuse(`is a ${found.table_type}, not a table`);
  return [];
}

/** Rules 3, 5 and 6 for one pair: what the definitions alone show. */
export function structureViolations(pair: RepartitionTablePair, source: TableDescription, target: TableDescription): RuleViolation[] {
  const out: RuleViolation[] = [];
  const src = nameOf(pair.source);
  const dst = nameOf(pair.target);
  const targetColumns = byName(target.columns);
  const sourceColumns = byName(source.columns);
  for (const s of source.columns) {
    const t = targetColumns.get(s.name.toLowerCase());
    if (!t) {
      out.push({ rule: 3, table: dst, column: s.name, message: `rule 3: source column ${src}.${s.name} has no column of that name in target ${dst}` });
      continue;
    }
    const narrowing = typeNarrowing(s, t);
    if (narrowing) out.push({ rule: 5, table: dst, column: s.name, message: `rule 5: column ${s.name}, ${src} -> ${dst}: ${narrowing}` });
    const domain = domainNarrowing(s, t);
    if (domain) out.push({ rule: 6, table: dst, column: s.name, message: `rule 6: column ${s.name}, ${src} -> ${dst}: ${domain}` });
  }
  for (const t of target.columns) {
    if (sourceColumns.has(t.name.toLowerCase()) || t.nullable || t.has_default) continue;
    out.push({ rule: 3, table: dst, column: t.name, message: `rule 3: target column ${dst}.${t.name} is not in source ${src} and has neither a default nor NULL allowed` });
  }
  return out;
}

/** A row probe of the source table and how to read its result as a refusal. */
export interface PlannedProbe {
  rule: 4 | 7;
  column: string;
  probe: Partial<RowProbe>;
  refusal(result: ProbeResult): string;
}

/** Backticked identifiers a check clause reads (MariaDB stores clauses with them). */
export function clauseColumns(clause: string): string[] {
  return [...new Set([...clause.matchAll(/`((?:[^`]|``)+)`/g)].map((m) => m[1].replace(/``/g, '`').toLowerCase()))];
}

/**
 * Rules 4 and 7: the probes of the source rows the target's constraints need. Only what
 * the definitions cannot settle is probed: a NOT NULL target column whose source allows
 * NULL, a target key the source has no identical unique key for, every target check whose
 * columns are all in the source.
 */
export function plannedProbes(pair: RepartitionTablePair, source: TableDescription, target: TableDescription): PlannedProbe[] {
  const src = nameOf(pair.source);
  const dst = nameOf(pair.target);
  const sourceColumns = byName(source.columns);
  const probes: PlannedProbe[] = [];
  for (const t of target.columns) {
    const s = sourceColumns.get(t.name.toLowerCase());
    if (!s || t.nullable || !s.nullable) continue;
    probes.push({
      rule: 4,
      column: s.name,
      probe: { null_column: s.name },
      refusal: (r) => `rule 4: column ${s.name}: ${r.violations} rows of ${src} hold NULL, target ${dst}.${t.name} is NOT NULL`,
    });
  }
  const sourceKeys = new Set(source.unique_keys.map((k) => keySignature(k.columns)));
  for (const key of target.unique_keys) {
    const columns = key.columns.map((c) => sourceColumns.get(c.toLowerCase())?.name);
    if (columns.some((c) => c === undefined) || sourceKeys.has(keySignature(key.columns))) continue;
    const named = columns as string[];
    probes.push({
      rule: 7,
      column: named.join(','),
      probe: { duplicate_columns: named },
      refusal: (r) => `rule 7: column ${named.join(', ')}: ${r.violations} values occur more than once in ${src} (e.g. ${r.example}), target ${dst} has unique key ${key.name} on it`,
    });
  }
  for (const check of target.checks) {
    const columns = clauseColumns(check.clause);
    if (columns.length === 0 || columns.some((c) => !sourceColumns.has(c))) continue;
    const names = columns.map((c) => sourceColumns.get(c)!.name);
    const rule = names.length === 1 ? 4 : 7;
    probes.push({
      rule,
      column: names.join(','),
      probe: { false_check: check.clause },
      refusal: (r) => `rule ${rule}: column ${names.join(', ')}: ${r.violations} rows of ${src} fail target ${dst}'s check ${check.name} (${check.clause})`,
    });
  }
  return probes;
}

const keySignature = (columns: readonly string[]) => columns.map((c) => c.toLowerCase()).sort().join('\u0000');

/** The refusals among the probes' results (in the probes' order). */
export function probeViolations(pair: RepartitionTablePair, probes: readonly PlannedProbe[], results: readonly ProbeResult[]): RuleViolation[] {
  return probes.flatMap((p, i) => {
    const r = results[i];
    if (!r || r.violations === 0) return [];
    return [{ rule: p.rule, table: nameOf(pair.target), column: p.column, message: p.refusal(r) }];
  });
}

/** One error text for all refusals (each already names its rule, table and column). */
export function refusalText(violations: readonly RuleViolation[]): string {
  return `repartition refused before copying anything: ${violations.map((v) => v.message).join('; ')}`;
}
