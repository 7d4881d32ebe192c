// The rules of catalog sync, checked on the pure planner: what is imported, re-imported,
// dropped, kept or skipped for one compute database.

import { describe, expect, it } from 'vitest';
import { partitionMembership, planDatabase, planSchemas, remoteDatabases, remoteSchemas, SCHEMA_MARK, type LocalForeignTable } from '../../src/capabilities/postgres/catalog-plan';
import { mapMariadbDefault } from '../../src/capabilities/postgres/column-defaults';
import { attributeSignature, remoteColumn, splitRemoteDb, type RemoteColumn, type RemoteTable, type ShardView } from '../../src/capabilities/postgres/shard-catalog';

const ID = remoteColumn('id', 'NO', null, 'int(11)', 'NEVER');
const ATTRS = attributeSignature([ID]);
const remote = (table: string, signature = 'sig', remoteDb = 'app_$$_public', columns: RemoteColumn[] = [ID]): RemoteTable => ({
  remoteDb, ...splitRemoteDb(remoteDb)!, table, signature, columns, attributes: attributeSignature(columns),
});
const shard = (shardId: string, tables: RemoteTable[], reachable = true): ShardView => ({ shardId, reachable, problem: reachable ? '' : 'down', tables });
const local = (table: string, server = 'shard_1', signature = 'sig', schema = 'public', attributes = ATTRS): LocalForeignTable => ({ schema, table, server, signature, attributes });
const imported = (table: string, signature = 'sig', columns: RemoteColumn[] = [ID]) => ({ table, signature, columns, attributes: attributeSignature(columns) });
const summary = (plan: ReturnType<typeof planDatabase>) => plan.changes.map((c) => `${c.action} ${c.schema}.${c.table}@${c.shard_id}${c.reason ? ` (${c.reason})` : ''}`).sort();

describe('catalog sync plan', () => {
  it('maps MariaDB database D_$$_S to database D, schema S', () => {
    expect(splitRemoteDb('app_$$_sales')).toEqual({ database: 'app', schema: 'sales' });
    expect(splitRemoteDb('my_app_$$_public')).toEqual({ database: 'my_app', schema: 'public' });
    expect(splitRemoteDb('plain')).toBeUndefined();
    expect(splitRemoteDb('_$$_x')).toBeUndefined();
  });

  it('imports new tables in one batch per shard and schema, only for its own database', () => {
    const plan = planDatabase('app', [shard('1', [remote('a'), remote('b'), remote('c', 'sig', 'other_$$_public')]), shard('2', [remote('d')])], [], new Set());
    expect(plan.imports).toEqual([
      { shardId: '1', schema: 'public', remoteDb: 'app_$$_public', tables: [imported('a'), imported('b')] },
      { shardId: '2', schema: 'public', remoteDb: 'app_$$_public', tables: [imported('d')] },
    ]);
    expect(plan.drops).toEqual([]);
    expect(plan.foreignTables).toBe(3);
  });

  it('changes nothing when every foreign table matches its source', () => {
    const plan = planDatabase('app', [shard('1', [remote('a')])], [local('a')], new Set());
    expect(plan).toEqual({ drops: [], imports: [], alters: [], changes: [], foreignTables: 1 });
  });

  it('drops a foreign table whose source is gone, also when its shard left the cluster', () => {
    const plan = planDatabase('app', [shard('1', [])], [local('a'), local('b', 'shard_9')], new Set());
    expect(summary(plan)).toEqual(['dropped public.a@1 (source table is gone)', 'dropped public.b@9 (source table is gone)']);
    expect(plan.foreignTables).toBe(0);
  });

  it('keeps the foreign tables of an unreachable shard untouched', () => {
    const plan = planDatabase('app', [shard('1', [], false)], [local('a')], new Set());
    expect(plan).toEqual({ drops: [], imports: [], alters: [], changes: [], foreignTables: 1 });
  });

  it('re-imports a table whose columns changed or that moved to another shard', () => {
    const plan = planDatabase('app', [shard('1', [remote('a', 'new')]), shard('2', [remote('b')])], [local('a', 'shard_1', 'old'), local('b', 'shard_1')], new Set());
    expect(summary(plan)).toEqual(['reimported public.a@1 (columns changed)', 'reimported public.b@2 (moved from shard_1)']);
    expect(plan.drops.map((d) => d.table)).toEqual(['a', 'b']);
    expect(plan.foreignTables).toBe(2);
  });

  it('a table on two shards mid-move stays on the shard it is on', () => {
    const plan = planDatabase('app', [shard('1', [remote('a')]), shard('2', [remote('a')])], [local('a', 'shard_2')], new Set());
    expect(plan.changes).toEqual([]);
  });

  it('skips names that are not plain identifiers and names a local relation already has', () => {
    const plan = planDatabase('app', [shard('1', [remote('bad-name'), remote('mine')])], [], new Set(['public.mine']));
    expect(summary(plan)).toEqual(['skipped public.bad-name@1 (not a plain identifier)', 'skipped public.mine@1 (a local relation that kcm did not create has this name)']);
    expect(plan.imports).toEqual([]);
  });
});

describe('column NOT NULL and defaults on the foreign tables', () => {
  // COLUMN_DEFAULT exactly as MariaDB 10.11 reports it for `money int DEFAULT 1000`, `flag int NOT NULL DEFAULT 7`, ...
  const money = remoteColumn('money', 'YES', '1000', 'int(11)', 'NEVER');
  const flag = remoteColumn('flag', 'NO', '7', 'int(11)', 'NEVER');

  it('maps literals, NULL and the current time; leaves out what has no safe PostgreSQL form', () => {
    const cases: [string | null, string, string | null | { unmapped: RegExp }][] = [
      [null, 'int(11)', null],
      ['NULL', 'varchar(10)', null],
      ['1000', 'int(11)', '1000'],
      ['-1.50', 'decimal(5,2)', '-1.50'],
      ['1e3', 'double', '1e3'],
      ["'NULL'", 'varchar(10)', "'NULL'"],
      ["''", 'text', "''"],
      ["'it''s'", 'varchar(20)', "'it''s'"],
      ["'a\\\\b\\nc'", 'varchar(20)', "'a\\b\nc'"],
      ["'b'", "enum('a','b')", "'b'"],
      ['current_timestamp()', 'timestamp', 'CURRENT_TIMESTAMP'],
      ['current_timestamp(3)', 'datetime(3)', 'CURRENT_TIMESTAMP'],
      ['curdate()', 'date', 'CURRENT_DATE'],
      ['uuid()', 'varchar(40)', { unmapped: /no safe PostgreSQL equivalent/ }],
      ['(1 + 2)', 'int(11)', { unmapped: /no safe PostgreSQL equivalent/ }],
      ["b'1'", 'bit(1)', { unmapped: /no safe PostgreSQL equivalent/ }],
      ["'a' || 'b'", 'varchar(9)', { unmapped: /no safe PostgreSQL equivalent/ }],
      ["'x'); DROP TABLE t; --'", 'varchar(9)', { unmapped: /no safe PostgreSQL equivalent/ }],
      ["'0000-00-00 00:00:00'", 'datetime', { unmapped: /zero date/ }],
      ["'a\\\\b'", 'blob', { unmapped: /binary string with backslashes/ }],
      ["'a\\0b'", 'varchar(9)', { unmapped: /NUL/ }],
      ["'a\\qb'", 'varchar(9)', { unmapped: /no safe PostgreSQL equivalent/ }],
    ];
    for (const [raw, type, expected] of cases) {
      const mapped = mapMariadbDefault(raw, type);
      if (expected !== null && typeof expected === 'object') expect('unmapped' in mapped && mapped.unmapped, `${raw}`).toMatch(expected.unmapped);
      else expect(mapped, `${raw}`).toEqual({ sql: expected });
    }
    expect(mapMariadbDefault('NULL', 'int(11)', true)).toEqual({ sql: null }); // a generated column has no default to carry
  });

  it('carries NOT NULL and the mapped default of every column into a new foreign table', () => {
    const plan = planDatabase('app', [shard('1', [remote('t', 'sig', 'app_$$_public', [ID, money, flag])])], [], new Set());
    expect(plan.imports[0].tables[0].columns.map((c) => [c.name, c.notNull, c.defaultSql])).toEqual([
      ['id', true, null],
      ['money', false, '1000'],
      ['flag', true, '7'],
    ]);
  });

  it('alters a foreign table in place when a default or NOT NULL changes on the shard, without re-importing it', () => {
    const before = remote('t', 'sig', 'app_$$_public', [ID, money, flag]);
    const after = remote('t', 'sig', 'app_$$_public', [ID, remoteColumn('money', 'NO', '2000', 'int(11)', 'NEVER'), flag]);
    expect(after.attributes).not.toBe(before.attributes);
    const plan = planDatabase('app', [shard('1', [after])], [local('t', 'shard_1', 'sig', 'public', before.attributes)], new Set());
    expect(summary(plan)).toEqual(['altered public.t@1 (NOT NULL or defaults changed)']);
    expect(plan.drops).toEqual([]);
    expect(plan.imports).toEqual([]);
    expect(plan.alters).toEqual([{ schema: 'public', shardId: '1', table: 't', signature: 'sig', attributes: after.attributes, columns: after.columns }]);
    expect(planDatabase('app', [shard('1', [after])], [local('t', 'shard_1', 'sig', 'public', after.attributes)], new Set()).alters).toEqual([]);
  });

  it('alters a foreign table made before defaults were carried (no attributes in its comment)', () => {
    const plan = planDatabase('app', [shard('1', [remote('t', 'sig', 'app_$$_public', [ID, money])])], [local('t', 'shard_1', 'sig', 'public', '')], new Set());
    expect(summary(plan)).toEqual(['altered public.t@1 (NOT NULL or defaults changed)']);
  });

  it('reports a default it cannot carry, on every round, without re-importing or altering again', () => {
    const u = remoteColumn('u', 'YES', 'uuid()', 'varchar(40)', 'NEVER');
    const t = remote('t', 'sig', 'app_$$_public', [ID, u]);
    expect(u).toMatchObject({ defaultSql: null, unmapped: 'an expression with no safe PostgreSQL equivalent' });
    const skip = 'skipped public.t@1 (defaults not carried: u (uuid(): an expression with no safe PostgreSQL equivalent))';
    expect(summary(planDatabase('app', [shard('1', [t])], [], new Set()))).toEqual(['imported public.t@1', skip]);
    const steady = planDatabase('app', [shard('1', [t])], [local('t', 'shard_1', 'sig', 'public', t.attributes)], new Set());
    expect(summary(steady)).toEqual([skip]);
    expect(steady).toMatchObject({ drops: [], imports: [], alters: [], foreignTables: 1 });
  });

  it('schemas follow the shards: made when a shard has D_$$_S (tables or not), dropped when marked and no reachable shard has it', () => {
    const views: ShardView[] = [{ ...shard('1', [remote('a', 'sig', 'app_$$_sales')]), schemas: [{ database: 'app', schema: 'sales' }, { database: 'app', schema: 'empty' }, { database: 'new', schema: 'public' }] }];
    expect([...remoteSchemas('app', views)].sort()).toEqual(['empty', 'sales']);
    expect([...remoteDatabases(views)].sort()).toEqual(['app', 'new']);
    const local = new Map<string, string | null>([['sales', SCHEMA_MARK], ['public', 'standard public schema'], ['gone', SCHEMA_MARK], ['mine', null], ['kcm_ddl', null]]);
    expect(planSchemas(new Set(['sales', 'empty', 'public']), local, true)).toEqual({ creates: ['empty'], drops: ['gone'], marks: ['public'] });
    // An unreachable shard may still hold 'gone': nothing is dropped.
    expect(planSchemas(new Set(['sales']), local, false).drops).toEqual([]);
  });

  it('a marked schema an extension lives in is never dropped: public, home of mysql_fdw, stays when no shard has postgres_$$_public any more (issue 35, defect 9)', () => {
    // delete_shards of the one shard that had postgres_$$_public: the shards name no schema of the database.
    const local = new Map<string, string | null>([['public', SCHEMA_MARK], ['gone', SCHEMA_MARK], ['kcm_ddl', null]]);
    expect(planSchemas(new Set(), local, true, new Set(['public', 'kcm_ddl']))).toEqual({ creates: [], drops: ['gone'], marks: [] });
  });
});

describe('catalog sync plan: the partition record on the shard is the truth (followPartitions)', () => {
  const bound = 'FOR VALUES FROM (1) TO (501)';
  const record = { schema: 'public', table: 'transfer_account', key: 'RANGE (id)', bound };
  const partition = (table: string, p = record): RemoteTable => ({ ...remote(table), partition: p });
  const attached = (table: string, p: typeof record | undefined, server = 'shard_1'): LocalForeignTable => ({ ...local(table, server), partitionOf: partitionMembership(p) });

  it('keeps a partition attached as its shard table records', () => {
    const plan = planDatabase('app', [shard('1', [partition('transfer_account_01')])], [attached('transfer_account_01', record)], new Set(), true);
    expect(plan.changes).toEqual([]);
    expect(plan.drops).toEqual([]);
  });

  it('re-imports one attached elsewhere here than the record says (ATTACH or DETACH through another compute node)', () => {
    const detachedElsewhere = planDatabase('app', [shard('1', [remote('transfer_account_01')])], [attached('transfer_account_01', record)], new Set(), true);
    expect(detachedElsewhere.drops.map((d) => d.table)).toEqual(['transfer_account_01']);
    expect(detachedElsewhere.imports.flatMap((b) => b.tables.map((t) => t.table))).toEqual(['transfer_account_01']);
    const attachedElsewhere = planDatabase('app', [shard('1', [partition('transfer_account_01')])], [attached('transfer_account_01', undefined)], new Set(), true);
    expect(attachedElsewhere.imports.flatMap((b) => b.tables.map((t) => ({ table: t.table, partition: t.partition })))).toEqual([{ table: 'transfer_account_01', partition: record }]);
  });

  it('a partition renamed aside by a move (its record cleared) becomes a plain table, apart from the moved one', () => {
    const plan = planDatabase('app', [shard('1', [remote('transfer_account_01__moved_7')]), shard('2', [partition('transfer_account_01')])], [attached('transfer_account_01', record, 'shard_2')], new Set(), true);
    expect(summary(plan)).toEqual(['imported public.transfer_account_01__moved_7@1']);
    expect(plan.imports[0].tables[0].partition).toBeUndefined();
  });

  it('without followPartitions (a node without kcm_ddl), membership is not compared', () => {
    const plan = planDatabase('app', [shard('1', [remote('transfer_account_01')])], [attached('transfer_account_01', record)], new Set());
    expect(plan.drops).toEqual([]);
  });
});

