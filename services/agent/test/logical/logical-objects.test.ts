// How a logical dump request resolves against what an instance holds (no engine: the
// catalog is given), above all a partitioned parent, which no shard holds as a table: kcm_ddl
// records it in the COMMENT of each partition it placed on a shard.

import { describe, expect, it } from 'vitest';
import type { LogicalDumpRequest } from '@kcm/agent-api';
import { dumpObjectArgs, selectDumpObjects, type InstanceCatalog } from '../../src/capabilities/mariadb/logical/logical-objects';

const partitionComment = (schema: string, parent: string, bound: string) => JSON.stringify({ kcm_partition_of: [schema, parent], key: 'RANGE (id)', bound });

const catalog: InstanceCatalog = {
  databases: ['mysql', 'shop_$$_public', 'shop_$$_audit'],
  tables: [
    { db: 'shop_$$_public', name: 'orders', comment: '' },
    { db: 'shop_$$_public', name: 'acct_03', comment: partitionComment('public', 'acct', 'FOR VALUES FROM (201) TO (301)') },
    { db: 'shop_$$_public', name: 'acct_01', comment: partitionComment('public', 'acct', 'FOR VALUES FROM (1) TO (101)') },
    { db: 'shop_$$_public', name: 'other_01', comment: partitionComment('public', 'other', 'FOR VALUES FROM (1) TO (101)') },
    // A partition of a parent of the same name in another schema is not one of public.acct's.
    { db: 'shop_$$_audit', name: 'acct_09', comment: partitionComment('audit', 'acct', 'FOR VALUES FROM (1) TO (9)') },
  ],
};
const req = (p: Partial<LogicalDumpRequest>): LogicalDumpRequest => ({ port: 3306, databases: [], database_prefix: '', tables: [], ...p });

describe('a logical dump request resolved against the instance', () => {
  it('a table name that is a partitioned parent stands for the partitions of it in that database, sorted', () => {
    const objects = selectDumpObjects(catalog, req({ databases: ['shop_$$_public'], tables: ['acct'] }), 3306);
    expect(objects).toEqual({ databases: ['shop_$$_public'], tables: ['acct_01', 'acct_03'], tableNames: ['shop_$$_public.acct_01', 'shop_$$_public.acct_03'] });
    expect(dumpObjectArgs(objects)).toEqual(['--', 'shop_$$_public', 'acct_01', 'acct_03']);
  });

  it('a table is itself, whatever partitions name it', () => {
    expect(selectDumpObjects(catalog, req({ databases: ['shop_$$_public'], tables: ['orders'] }), 3306).tableNames).toEqual(['shop_$$_public.orders']);
  });

  it('a name that is neither is NOT_FOUND, saying so', () => {
    expect(() => selectDumpObjects(catalog, req({ databases: ['shop_$$_public'], tables: ['gone'] }), 3306)).toThrow(
      /table shop_\$\$_public\.gone does not exist, nor any partition of a partitioned table gone, on the instance on port 3306/,
    );
    expect(() => selectDumpObjects(catalog, req({ databases: ['nope_$$_public'] }), 3306)).toThrow(/database nope_\$\$_public does not exist/);
  });

  it('listing only, what is missing is left out: an instance that holds none of it names no table, and never the whole database', () => {
    expect(selectDumpObjects(catalog, req({ databases: ['shop_$$_public'], tables: ['gone'] }), 3306, true)).toEqual({ databases: ['shop_$$_public'], tables: [], tableNames: [] });
    expect(selectDumpObjects(catalog, req({ databases: ['nope_$$_public'], tables: ['acct'] }), 3306, true).tableNames).toEqual([]);
    expect(selectDumpObjects(catalog, req({ database_prefix: 'shop_$$_' }), 3306, true).tableNames).toHaveLength(5);
  });
});
