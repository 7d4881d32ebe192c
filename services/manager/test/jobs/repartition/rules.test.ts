// Spec 4.5 repartition rules 1-7: each refused case names its rule, the table and the column.

import { describe, expect, it } from 'vitest';
import type { ColumnDefinition, TableDescription } from '@kcm/agent-api';
import {
  clauseColumns,
  oneSourceDatabase,
  plannedProbes,
  probeViolations,
  structureViolations,
  tableExists,
  type RepartitionTablePair,
} from '../../../src/jobs/repartition/rules';
import { memberValues } from '../../../src/jobs/repartition/column-types';

function col(name: string, columnType: string, extra: Partial<ColumnDefinition> = {}): ColumnDefinition {
  const dataType = columnType.replace(/\(.*$/, '').replace(/ .*$/, '').toLowerCase();
  const length = Number(/\((\d+)\)/.exec(columnType)?.[1] ?? 0);
  const textLengths: Record<string, number> = { tinytext: 255, text: 65535, mediumtext: 16777215, longtext: 4294967295 };
  const isString = ['char', 'varchar', 'tinytext', 'text', 'mediumtext', 'longtext'].includes(dataType);
  return {
    name, ordinal: 1, column_type: columnType, data_type: dataType, nullable: true, has_default: false,
    character_set: isString ? 'utf8mb4' : '', char_max_length: isString ? (textLengths[dataType] ?? length) : 0,
    numeric_precision: 0, numeric_scale: 0, datetime_precision: 0, extra: '', ...extra,
  };
}

function table(name: string, columns: ColumnDefinition[], more: Partial<TableDescription> = {}): TableDescription {
  return { database: 'db_$$_public', table: name, exists: true, table_type: 'BASE TABLE', columns, unique_keys: [], checks: [], ...more };
}

const PAIR: RepartitionTablePair = { source: { database: 'db_$$_public', table: 't1' }, target: { database: 'db_$$_public', table: 't1_new' } };
const check = (source: ColumnDefinition[], target: ColumnDefinition[]) => structureViolations(PAIR, table('t1', source), table('t1_new', target));

describe('repartition rules (spec 4.5)', () => {
  it('rule 1: a missing target, a missing source, a table on two shards, a view: each refused naming rule 1 and the table', () => {
    expect(tableExists(PAIR.target, 'target', 'cluster 2', undefined, 0)).toEqual([
      expect.objectContaining({ rule: 1, table: 'db_$$_public.t1_new', message: expect.stringMatching(/^rule 1: target table db_\$\$_public\.t1_new does not exist in cluster 2/) }),
    ]);
    expect(tableExists(PAIR.source, 'source', 'cluster 1', undefined, 0)[0].message).toMatch(/rule 1: source table db_\$\$_public\.t1 does not exist/);
    expect(tableExists(PAIR.source, 'source', 'cluster 1', table('t1', []), 2)[0].message).toMatch(/rule 1: .* exists on 2 shards/);
    expect(tableExists(PAIR.target, 'target', 'cluster 2', table('t1_new', [], { table_type: 'VIEW' }), 1)[0].message).toMatch(/rule 1: .* is a VIEW/);
    expect(tableExists(PAIR.target, 'target', 'cluster 2', table('t1_new', []), 1)).toEqual([]);
  });

  it('rule 2: source tables in two databases are refused naming rule 2', () => {
    const other = { ...PAIR, source: { database: 'other_$$_public', table: 't2' } };
    expect(oneSourceDatabase([PAIR, other])).toEqual([expect.objectContaining({ rule: 2, message: expect.stringMatching(/^rule 2: .*db_\$\$_public, other_\$\$_public/) })]);
    expect(oneSourceDatabase([PAIR, { ...PAIR, source: { database: 'db_$$_public', table: 't9' } }])).toEqual([]);
  });

  it('rule 3: a source column missing from the target, and an extra NOT NULL target column without default, are refused naming the column; order may differ', () => {
    expect(check([col('id', 'int(11)'), col('name', 'varchar(10)')], [col('id', 'int(11)')])).toEqual([
      { rule: 3, table: 'db_$$_public.t1_new', column: 'name', message: expect.stringMatching(/^rule 3: source column db_\$\$_public\.t1\.name has no column/) },
    ]);
    expect(check([col('id', 'int(11)')], [col('id', 'int(11)'), col('note', 'varchar(5)', { nullable: false })])).toEqual([
      expect.objectContaining({ rule: 3, column: 'note', message: expect.stringMatching(/rule 3: target column .*note .*neither a default nor NULL/) }),
    ]);
    expect(check([col('a', 'int(11)'), col('B', 'int(11)')], [col('b', 'int(11)'), col('a', 'int(11)'), col('x', 'int(11)', { nullable: false, has_default: true }), col('y', 'int(11)')])).toEqual([]);
  });

  it('rule 4: a nullable source column meeting a NOT NULL target is probed for NULLs; rows found refuse naming the column', () => {
    const source = table('t1', [col('id', 'int(11)', { nullable: false }), col('v', 'int(11)')]);
    const target = table('t1_new', [col('id', 'int(11)', { nullable: false }), col('v', 'int(11)', { nullable: false })]);
    const probes = plannedProbes(PAIR, source, target);
    expect(probes.map((p) => p.probe)).toEqual([{ null_column: 'v' }]);
    expect(probeViolations(PAIR, probes, [{ violations: 3, example: '' }])).toEqual([
      { rule: 4, table: 'db_$$_public.t1_new', column: 'v', message: expect.stringMatching(/^rule 4: column v: 3 rows of db_\$\$_public\.t1 hold NULL/) },
    ]);
    expect(probeViolations(PAIR, probes, [{ violations: 0, example: '' }])).toEqual([]);
  });

  it('rule 4: source data failing a target check on one column refuses naming that column', () => {
    const source = table('t1', [col('qty', 'int(11)')]);
    const target = table('t1_new', [col('qty', 'int(11)')], { checks: [{ name: 'qty', clause: '`qty` > 0' }] });
    const probes = plannedProbes(PAIR, source, target);
    expect(probes.map((p) => [p.rule, p.probe])).toEqual([[4, { false_check: '`qty` > 0' }]]);
    expect(probeViolations(PAIR, probes, [{ violations: 2, example: '' }])[0].message).toMatch(/^rule 4: column qty: 2 rows .* fail target .*check qty/);
  });

  it('rule 5: a narrower type or another category is refused naming the column; wider types of the spec pass', () => {
    const refused = (s: ColumnDefinition, t: ColumnDefinition) => check([s], [t]).filter((v) => v.rule === 5);
    expect(refused(col('n', 'bigint(20)'), col('n', 'int(11)'))).toEqual([expect.objectContaining({ column: 'n', message: expect.stringMatching(/^rule 5: column n, .*int\(11\) is narrower than bigint\(20\)/) })]);
    expect(refused(col('n', 'int(11)'), col('n', 'varchar(20)'))[0].message).toMatch(/rule 5: column n.*different categories \(integer, string\)/);
    expect(refused(col('s', 'varchar(11)'), col('s', 'varchar(10)'))[0].message).toMatch(/rule 5: column s/);
    expect(refused(col('f', 'double'), col('f', 'float'))[0].message).toMatch(/rule 5: column f/);
    expect(refused(col('u', 'int(11)'), col('u', 'bigint(20) unsigned'))[0].message).toMatch(/rule 5: column u.*unsigned/);
    expect(refused(col('d', 'decimal(10,2)', { numeric_precision: 10, numeric_scale: 2 }), col('d', 'decimal(10,3)', { numeric_precision: 10, numeric_scale: 3 }))[0].column).toBe('d');
    expect(refused(col('t', 'datetime(3)', { datetime_precision: 3 }), col('t', 'datetime', { datetime_precision: 0 }))[0].column).toBe('t');
    // The spec's examples of equal or wider: int -> bigint, float -> float/double, varchar(10) -> varchar(11), char(11), text.
    for (const [s, t] of [['int(11)', 'bigint(20)'], ['float', 'double'], ['float', 'float'], ['varchar(10)', 'varchar(11)'], ['varchar(10)', 'char(11)'], ['varchar(10)', 'text'], ['int(10) unsigned', 'bigint(20)'], ['date', 'datetime'], ['timestamp', 'datetime']]) {
      expect(refused(col('c', s), col('c', t))).toEqual([]);
    }
  });

  it('rule 6: a target character set that does not contain the source one, or an enum missing source values, is refused naming the column', () => {
    const v = check([col('s', 'varchar(10)', { character_set: 'utf8mb4' })], [col('s', 'varchar(10)', { character_set: 'latin1' })]);
    expect(v).toEqual([expect.objectContaining({ rule: 6, column: 's', message: expect.stringMatching(/^rule 6: column s, .*character set latin1 does not contain utf8mb4/) })]);
    expect(check([col('s', 'varchar(10)', { character_set: 'utf8mb3' })], [col('s', 'varchar(10)', { character_set: 'utf8mb4' })])).toEqual([]);
    const e = check([col('e', "enum('a','b','it''s')")], [col('e', "enum('a','c')")]);
    expect(e).toEqual([expect.objectContaining({ rule: 6, column: 'e', message: expect.stringContaining("enum values 'b', 'it's' are not in") })]);
    expect(check([col('e', "enum('a','b')")], [col('e', "enum('b','a','c')")])).toEqual([]);
    expect(memberValues("set('x','y''z')")).toEqual(['x', "y'z"]);
  });

  it('rule 7: a target unique key the source does not have is probed for duplicates; duplicates refuse naming the columns; an identical source key needs no probe', () => {
    const source = table('t1', [col('id', 'int(11)', { nullable: false }), col('email', 'varchar(50)')], { unique_keys: [{ name: 'PRIMARY', columns: ['id'] }] });
    const target = table('t1_new', [col('id', 'int(11)', { nullable: false }), col('email', 'varchar(50)')], {
      unique_keys: [{ name: 'PRIMARY', columns: ['id'] }, { name: 'by_email', columns: ['email'] }],
    });
    const probes = plannedProbes(PAIR, source, target);
    expect(probes.map((p) => p.probe)).toEqual([{ duplicate_columns: ['email'] }]);
    expect(probeViolations(PAIR, probes, [{ violations: 1, example: 'a@x' }])).toEqual([
      { rule: 7, table: 'db_$$_public.t1_new', column: 'email', message: expect.stringMatching(/^rule 7: column email: 1 values occur more than once .*e\.g\. a@x.*unique key by_email/) },
    ]);
  });

  it('rule 7: a table check over several columns refuses naming them', () => {
    const source = table('t1', [col('lo', 'int(11)'), col('hi', 'int(11)')]);
    const target = table('t1_new', [col('lo', 'int(11)'), col('hi', 'int(11)')], { checks: [{ name: 'ordered', clause: '`lo` <= `hi`' }] });
    const probes = plannedProbes(PAIR, source, target);
    expect(clauseColumns('`lo` <= `hi`')).toEqual(['lo', 'hi']);
    expect(probeViolations(PAIR, probes, [{ violations: 4, example: '' }])).toEqual([expect.objectContaining({ rule: 7, column: 'lo,hi', message: expect.stringMatching(/^rule 7: column lo, hi: 4 rows .*check ordered/) })]);
  });
});
