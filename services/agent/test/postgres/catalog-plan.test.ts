// The rules of catalog sync, checked on the pure planner: what is imported, re-imported,
// dropped, kept or skipped for one compute database.

import { describe, expect, it } from 'vitest';
import { planDatabase, type LocalForeignTable } from '../../src/capabilities/postgres/catalog-plan';
import { splitRemoteDb, type RemoteTable, type ShardView } from '../../src/capabilities/postgres/shard-catalog';

const remote = (table: string, signature = 'sig', remoteDb = 'app_$$_public'): RemoteTable => ({ remoteDb, ...splitRemoteDb(remoteDb)!, table, signature });
const shard = (shardId: string, tables: RemoteTable[], reachable = true): ShardView => ({ shardId, reachable, problem: reachable ? '' : 'down', tables });
const local = (table: string, server = 'shard_1', signature = 'sig', schema = 'public'): LocalForeignTable => ({ schema, table, server, signature });
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
      { shardId: '1', schema: 'public', remoteDb: 'app_$$_public', tables: [{ table: 'a', signature: 'sig' }, { table: 'b', signature: 'sig' }] },
      { shardId: '2', schema: 'public', remoteDb: 'app_$$_public', tables: [{ table: 'd', signature: 'sig' }] },
    ]);
    expect(plan.drops).toEqual([]);
    expect(plan.foreignTables).toBe(3);
  });

  it('changes nothing when every foreign table matches its source', () => {
    const plan = planDatabase('app', [shard('1', [remote('a')])], [local('a')], new Set());
    expect(plan).toEqual({ drops: [], imports: [], changes: [], foreignTables: 1 });
  });

  it('drops a foreign table whose source is gone, also when its shard left the cluster', () => {
    const plan = planDatabase('app', [shard('1', [])], [local('a'), local('b', 'shard_9')], new Set());
    expect(summary(plan)).toEqual(['dropped public.a@1 (source table is gone)', 'dropped public.b@9 (source table is gone)']);
    expect(plan.foreignTables).toBe(0);
  });

  it('keeps the foreign tables of an unreachable shard untouched', () => {
    const plan = planDatabase('app', [shard('1', [], false)], [local('a')], new Set());
    expect(plan).toEqual({ drops: [], imports: [], changes: [], foreignTables: 1 });
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
