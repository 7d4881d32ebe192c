import { describe, expect, it } from 'vitest';
import type { TableStat, TableStatsReply } from '@kcm/agent-api';
import { KcmError, parseRequest, type ValidRequest } from '@kcm/protocol';
import { expandTableList, rankTables, type TableStatsOf } from '../../src/queries/expand-table-list';
import { cluster, stateWith } from '../helpers/cluster-state';

const stat = (database: string, table: string, data: number, index: number, read: number, changed: number): TableStat => ({
  database, table, data_bytes: data, index_bytes: index, rows_read: read, rows_changed: changed,
});

const STATS: TableStat[] = [
  stat('postgres_$$_public', 'small', 16_384, 0, 90_000, 10),
  stat('postgres_$$_public', 'big', 4_000_000, 1_000_000, 5, 0),
  stat('shop_$$_sales', 'orders', 1_000_000, 2_000_000, 100, 100),
];

function request(paras: Record<string, string>): ValidRequest {
  const parsed = parseRequest({ version: '1.0', job_type: 'get_expand_table_list', timestamp: '1700000000', paras });
  if (!parsed.ok) throw parsed.error;
  return parsed.request as ValidRequest;
}

describe('get_expand_table_list', () => {
  it('top_size orders by data + index bytes, top_hit by rows read + changed; names are <database>.<schema>.<table>', () => {
    expect(rankTables(STATS, 'top_size').map((t) => t.table)).toEqual(['postgres.public.big', 'shop.sales.orders', 'postgres.public.small']);
    expect(rankTables(STATS, 'top_hit').map((t) => t.table)).toEqual(['postgres.public.small', 'shop.sales.orders', 'postgres.public.big']);
  });

  it('asks the master of the named shard and answers table_list as one comma-separated string', async () => {
    const asked: string[] = [];
    const statsOf: TableStatsOf = async (host, port) => {
      asked.push(`${host}:${port}`);
      return { tables: STATS, userstat: true };
    };
    const state = stateWith(cluster('7', 'ready', [['1', '10.0.0.1', 3306], ['2', '10.0.0.2', 3306]], []));
    const reply = await expandTableList(state, request({ cluster_id: '7', shard_id: '71', policy: 'top_size' }), statsOf);
    expect(asked).toEqual(['10.0.0.1:3306']);
    expect(reply.table_list).toBe('postgres.public.big,shop.sales.orders,postgres.public.small');
    expect(reply.list_table).toContainEqual({ table: 'postgres.public.big', bytes: '5000000', hits: '5' });
  });

  it('an unknown cluster or shard is NOT_FOUND naming the field; top_hit without userstat is refused naming policy', async () => {
    const state = stateWith(cluster('7', 'ready', [['1', '10.0.0.1', 3306]], []));
    const off: TableStatsOf = async (): Promise<TableStatsReply> => ({ tables: STATS, userstat: false });
    const failure = (paras: Record<string, string>) => expandTableList(state, request(paras), off).then(() => undefined, (e: KcmError) => e);
    expect(await failure({ cluster_id: '8', shard_id: '71', policy: 'top_size' })).toMatchObject({ errorName: 'NOT_FOUND', message: expect.stringContaining('paras.cluster_id') });
    expect(await failure({ cluster_id: '7', shard_id: '72', policy: 'top_size' })).toMatchObject({ errorName: 'NOT_FOUND', message: expect.stringContaining('paras.shard_id') });
    expect(await failure({ cluster_id: '7', shard_id: '71', policy: 'top_hit' })).toMatchObject({ errorName: 'CONFLICT', field: 'paras.policy', message: expect.stringMatching(/userstat is OFF/) });
  });
});
