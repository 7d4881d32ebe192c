import { describe, expect, it } from 'vitest';
import { replacementStatements, repointStatements, type ForeignTableShape } from '../../src/capabilities/table-move/foreign-table-ddl';

const shape: ForeignTableShape = {
  schema: 'public',
  table: 'orders',
  server: 'shard_1',
  options: ['dbname=postgres_$$_public', 'table_name=orders'],
  owner: 'app',
  comment: 'kcm:sync',
  partitionOf: null,
  bound: null,
  columns: [{ name: 'id', type: 'integer', notNull: true, default: null, options: [] }],
  grants: [{ grantee: 'reader', privilege: 'SELECT' }],
};

describe('a hold prepares the replacement foreign table before its lock and only swaps names under it', () => {
  it('makes the replacement on the target under a temporary name, with owner, comment and grants, and touches nothing of the table it replaces', () => {
    const sql = replacementStatements(shape, 'shard_2');
    expect(sql[1]).toMatch(/^CREATE FOREIGN TABLE "public"\."orders__kcm_move" .* SERVER "shard_2"/);
    expect(sql).toContain('ALTER FOREIGN TABLE "public"."orders__kcm_move" OWNER TO "app"');
    expect(sql.some((s) => s.startsWith('COMMENT ON FOREIGN TABLE "public"."orders__kcm_move"'))).toBe(true);
    expect(sql).toContain('GRANT SELECT ON "public"."orders__kcm_move" TO "reader"');
    expect(sql.filter((s) => s.includes('"orders"'))).toEqual([]);
  });

  it('under the lock, only drops the old table and renames the prepared one when the definition is unchanged', () => {
    expect(repointStatements(shape, 'shard_2', { server: 'shard_2', from: { ...shape } })).toEqual([
      'DROP FOREIGN TABLE "public"."orders"',
      'ALTER FOREIGN TABLE "public"."orders__kcm_move" RENAME TO "orders"',
    ]);
  });

  it('makes the replacement again under the lock when the definition changed between the two reads', () => {
    const altered = { ...shape, columns: [...shape.columns, { name: 'note', type: 'text', notNull: false, default: null, options: [] }] };
    const sql = repointStatements(altered, 'shard_2', { server: 'shard_2', from: shape });
    expect(sql[0]).toBe('DROP FOREIGN TABLE IF EXISTS "public"."orders__kcm_move"');
    expect(sql.find((s) => s.startsWith('CREATE FOREIGN TABLE'))).toContain('"note" text');
    expect(sql.slice(-2)).toEqual(['DROP FOREIGN TABLE "public"."orders"', 'ALTER FOREIGN TABLE "public"."orders__kcm_move" RENAME TO "orders"']);
  });

  it('drops an unused replacement when the re-point names another server, or the table is already there', () => {
    expect(repointStatements(shape, 'shard_3', { server: 'shard_2', from: shape }).find((s) => s.startsWith('CREATE'))).toContain('SERVER "shard_3"');
    expect(repointStatements({ ...shape, server: 'shard_2' }, 'shard_2', { server: 'shard_2', from: shape })).toEqual(['DROP FOREIGN TABLE IF EXISTS "public"."orders__kcm_move"']);
  });

  it('without a prepared replacement, makes the whole re-point under the lock as before', () => {
    const sql = repointStatements(shape, 'shard_2', null);
    expect(sql.slice(0, 2).map((s) => s.split(' (')[0])).toEqual(['DROP FOREIGN TABLE IF EXISTS "public"."orders__kcm_move"', 'CREATE FOREIGN TABLE "public"."orders__kcm_move"']);
    expect(repointStatements({ ...shape, server: 'shard_2' }, 'shard_2', null)).toEqual([]);
  });
});

describe('a partition is re-pointed with its parent: detached, swapped, attached with its bound, routed again', () => {
  const partition: ForeignTableShape = { ...shape, table: 'transfer_account_01', partitionOf: 'transfer_account', bound: 'FOR VALUES FROM (1) TO (501)' };

  it('prepares the replacement unattached, and under the lock drops the routing rule, swaps, attaches and rebuilds the rule', () => {
    expect(replacementStatements(partition, 'shard_2').some((s) => /ATTACH|transfer_account[^_]/.test(s))).toBe(false);
    expect(repointStatements(partition, 'shard_2', { server: 'shard_2', from: partition })).toEqual([
      'DROP RULE IF EXISTS kcm_route_insert ON transfer_account',
      'ALTER TABLE transfer_account DETACH PARTITION "public"."transfer_account_01"',
      'DROP FOREIGN TABLE "public"."transfer_account_01"',
      'ALTER FOREIGN TABLE "public"."transfer_account_01__kcm_move" RENAME TO "transfer_account_01"',
      'ALTER TABLE transfer_account ATTACH PARTITION "public"."transfer_account_01" FOR VALUES FROM (1) TO (501)',
      "SELECT kcm_ddl.route_rows('transfer_account'::regclass)",
    ]);
  });

  it('refuses a DEFAULT partition, which kcm does not route, before making anything', () => {
    expect(() => replacementStatements({ ...partition, bound: 'DEFAULT' }, 'shard_2')).toThrow(/DEFAULT partition is not supported/);
  });
});
