/** Table relocation between shards and table repartition (spec 4.5). */
import { z } from 'zod';
import {
  addFieldIssue,
  enumString,
  flagString,
  idString,
  qualifiedTableString,
  repartitionPairsString,
} from '../formats';

export const EXPAND_POLICIES = ['top_hit', 'top_size'] as const;

export const getExpandTableListParas = z.object({
  cluster_id: idString(),
  shard_id: idString(),
  policy: enumString(EXPAND_POLICIES),
});

export const expandClusterParas = z
  .object({
    cluster_id: idString(),
    src_shard_id: idString(),
    dst_shard_id: idString(),
    table_list: z.array(qualifiedTableString()).min(1, 'must list at least one table'),
    // Spec: "whether to keep the source table", values not shown. kcm: a flag, true = drop
    // the source table after cut-over; default false keeps it (renamed) so nothing is lost.
    drop_old_table: flagString().default(false),
  })
  .superRefine((p, ctx) => {
    if (p.src_shard_id === p.dst_shard_id) {
      addFieldIssue(ctx, ['dst_shard_id'], 'must differ from src_shard_id', p.dst_shard_id);
    }
    if (!Array.isArray(p.table_list)) return;
    const seen = new Set<string>();
    p.table_list.forEach((name, i) => {
      if (seen.has(name)) addFieldIssue(ctx, ['table_list', i], 'must not list a table twice', name);
      seen.add(name);
    });
  });

/**
 * Pairs stay as the wire string; jobs read them with `parseRepartitionPairs` (formats.ts),
 * the same parser that validated them. Sources and targets may be in different clusters
 * and databases; all sources share one database (spec 4.5 rule 2).
 */
export const repartitionTablesParas = z.object({
  src_cluster_id: idString(),
  dst_cluster_id: idString(),
  repartition_tables: repartitionPairsString(),
});
