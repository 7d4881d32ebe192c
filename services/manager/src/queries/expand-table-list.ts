// get_expand_table_list (spec 4.5): the tables of a shard to move first, read live from
// the shard's master.
//   top_size  data + index bytes (information_schema.TABLES), largest first
//   top_hit   rows read + rows changed since the master started (userstat's
//             TABLE_STATISTICS, on in every generated my.cnf), most accessed first
// table_list is one string of `<database>.<schema>.<table>` names, comma-separated, in
// that order: the names expand_cluster's table_list takes. `list_table` shows each
// table's measured figures beside it.

import { catalogErrorOf, type TableStat, type TableStatsReply, type Agents } from '@kcm/agent-api';
import { KcmError, type ValidRequest } from '@kcm/protocol';
import { clusterById, shardOf } from '../jobs/cluster-lookup';
import type { QueryHandler } from '../submit/manager-service';
import type { MetaState } from '../meta/state';

export type ExpandPolicy = 'top_hit' | 'top_size';

/** The one agent call this query needs (tests fake it). */
export type TableStatsOf = (hostaddr: string, port: number) => Promise<TableStatsReply>;

export interface RankedTable {
  table: string;
  bytes: number;
  hits: number;
}

/** `D_$$_S` + `T` -> `D.S.T` (the compute side's name, as expand_cluster takes it). */
export function computeSideName(stat: Pick<TableStat, 'database' | 'table'>): string {
  const cut = stat.database.indexOf('_$$_');
  return `${stat.database.slice(0, cut)}.${stat.database.slice(cut + 4)}.${stat.table}`;
}

/** Largest or most accessed first; ties by name, so the answer is stable. */
export function rankTables(stats: readonly TableStat[], policy: ExpandPolicy): RankedTable[] {
  const ranked = stats
    .filter((s) => s.database.includes('_$$_'))
    .map((s) => ({ table: computeSideName(s), bytes: s.data_bytes + s.index_bytes, hits: s.rows_read + s.rows_changed }));
  const measure = policy === 'top_size' ? (t: RankedTable) => t.bytes : (t: RankedTable) => t.hits;
  return ranked.sort((a, b) => measure(b) - measure(a) || (a.table < b.table ? -1 : a.table > b.table ? 1 : 0));
}

export const defaultTableStatsOf =
  (agents: Agents): TableStatsOf =>
  (hostaddr, port) =>
    agents.mariadbTables(hostaddr).tableStats(port);

export async function expandTableList(state: MetaState, req: ValidRequest, statsOf: TableStatsOf): Promise<Record<string, unknown>> {
  const p = req.paras as { cluster_id: string; shard_id: string; policy: ExpandPolicy };
  const cluster = clusterById(state, p.cluster_id);
  const shard = shardOf(cluster, p.shard_id);
  const master = shard.nodes[shard.masterNodeId];
  if (!master) throw KcmError.of('CONFLICT', `paras.shard_id: shard ${shard.id} has no master node to read its tables from`, { field: 'paras.shard_id' });
  let reply: TableStatsReply;
  try {
    reply = await statsOf(master.hostaddr, master.port);
  } catch (err) {
    const code = catalogErrorOf(err) === 'AGENT_UNREACHABLE' ? 'AGENT_UNREACHABLE' : 'INSTANCE_FAILED';
    throw KcmError.of(code, `reading the tables of shard ${shard.id}'s master ${master.hostaddr}:${master.port}: ${(err as Error).message}`, { cause: err });
  }
  if (p.policy === 'top_hit' && !reply.userstat) {
    throw KcmError.of(
      'CONFLICT',
      `paras.policy: top_hit needs access counts, but userstat is OFF on shard ${shard.id}'s master ${master.hostaddr}:${master.port} (SET GLOBAL userstat = ON, then ask again once it has seen traffic)`,
      { field: 'paras.policy' },
    );
  }
  const ranked = rankTables(reply.tables, p.policy);
  return {
    policy: p.policy,
    table_list: ranked.map((t) => t.table).join(','),
    // Measured on the master named here; counts start at 0 when that mariadbd (re)starts.
    master: `${master.hostaddr}:${master.port}`,
    list_table: ranked.map((t) => ({ table: t.table, bytes: String(t.bytes), hits: String(t.hits) })),
  };
}

export function expandTableListQuery(statsOf: TableStatsOf): [string, QueryHandler] {
  return ['get_expand_table_list', (req, state) => expandTableList(state, req, statsOf)];
}
