/** Cluster, shard, compute node and storage node jobs, and CPU cgroups (spec 2.4, 4.3, 8). */
import { z } from 'zod';
import {
  addFieldIssue,
  clusterNameString,
  enumString,
  flagString,
  hostAddressList,
  hostAddressString,
  idString,
  integerString,
  portString,
  textString,
} from '../formats';
import { computerVersionString, storageVersionString } from './upgrade';

export const HA_MODES = ['rbr', 'mgr'] as const;
export const CPU_LIMIT_MODES = ['share', 'quota'] as const;
export const CGROUP_MODES = ['quota', 'share'] as const;
export const INSTANCE_TYPES = ['mysql', 'pg'] as const;
export const ZERO_ONE = ['0', '1'] as const;

/** Spec 8: one master plus at least two standbys. */
export const MIN_NODES_PER_SHARD = 3;

export const createClusterParas = z
  .object({
    nick_name: textString(64),
    ha_mode: enumString(HA_MODES),
    shards: integerString(1),
    nodes: integerString(MIN_NODES_PER_SHARD),
    comps: integerString(1),
    max_storage_size: integerString(1), // GB; checked at placement against free disk, not a quota
    max_connections: integerString(1),
    cpu_cores: integerString(1),
    cpu_limit_node: enumString(CPU_LIMIT_MODES),
    innodb_size: integerString(1),
    rocksdb_block_cache_size_M: integerString(0),
    dbcfg: enumString(ZERO_ONE).default('0'),
    fullsync_level: integerString(0),
    // The spec's table marks them R, but its text says "if not specified, existing machines
    // are chosen" and the reference system's clients leave them out: absent = [] = kcm
    // places the nodes on running machines. (add_shards/add_comps/add_nodes have no such
    // text in the spec, so they keep their list required.)
    storage_iplists: hostAddressList().default([]),
    computer_iplists: hostAddressList().default([]),
    install_proxysql: enumString(ZERO_ONE).default('0'),
    // Beyond the spec (issue 31): the engine versions the cluster's instances run; absent =
    // the manager's defaults (config defaultStorageVersion / defaultComputerVersion).
    storage_version: storageVersionString().optional(),
    computer_version: computerVersionString().optional(),
  })
  .superRefine((p, ctx) => {
    if (typeof p.nodes === 'number' && typeof p.fullsync_level === 'number' && p.fullsync_level > p.nodes - 1) {
      addFieldIssue(ctx, ['fullsync_level'], `must be <= nodes - 1 (${p.nodes - 1} standbys)`, p.fullsync_level);
    }
    if (p.install_proxysql === '1' && typeof p.shards === 'number' && p.shards !== 1) {
      addFieldIssue(ctx, ['shards'], 'must be 1 when install_proxysql is "1" (spec 4.3)', p.shards);
    }
  });

/**
 * A cluster named by cluster_name or by cluster_id: at least one, and both must name the
 * same cluster (checked against the state by the job). `primary` is the one the spec lists
 * as required for the job: it comes first, and a request with neither is told it is missing.
 */
export function clusterReferenceParas(primary: 'cluster_name' | 'cluster_id') {
  const fields = { cluster_name: clusterNameString().optional(), cluster_id: idString().optional() };
  const other = primary === 'cluster_name' ? 'cluster_id' : 'cluster_name';
  return z.object({ [primary]: fields[primary], [other]: fields[other] } as typeof fields).superRefine((p, ctx) => {
    if (p.cluster_name === undefined && p.cluster_id === undefined) {
      ctx.addIssue({ code: 'custom', message: `is required (or paras.${other})`, path: [primary] });
    }
  });
}

/** By cluster_id as the spec has it, or by cluster_name as get_cluster_detail takes it. */
export const deleteClusterParas = clusterReferenceParas('cluster_id');

export const addShardsParas = z.object({
  cluster_id: idString(),
  shards: integerString(1),
  nodes: integerString(MIN_NODES_PER_SHARD),
  storage_iplists: hostAddressList(),
});

export const deleteShardsParas = z.object({ cluster_id: idString(), shard_id: idString() });

export const addCompsParas = z.object({
  cluster_id: idString(),
  comps: integerString(1),
  computer_iplists: hostAddressList(),
});

export const deleteCompParas = z.object({ cluster_id: idString(), comp_id: idString() });

export const addNodesParas = z.object({
  cluster_id: idString(),
  shard_id: idString().optional(),
  nodes: integerString(1),
  storage_iplists: hostAddressList(),
});

export const deleteNodesParas = z.object({
  cluster_id: idString(),
  shard_id: idString().optional(),
  hostaddr: hostAddressString(),
  port: portString(),
});

const rebuildTarget = z.object({
  hostaddr: hostAddressString(),
  port: portString(),
  need_backup: flagString().default(false),
  hdfs_host: textString(255).optional(),
  pv_limit: integerString(0).optional(), // MB/s; absent or 0 = no limit
});

export const rebuildNodeParas = z
  .object({
    cluster_id: idString(),
    shard_id: idString().optional(),
    rb_nodes: z.array(rebuildTarget).min(1, 'must list at least one node to rebuild'),
    allow_pull_from_master: flagString().default(false),
    allow_replica_delay: integerString(0).optional(), // seconds
  })
  .superRefine((p, ctx) => {
    if (!Array.isArray(p.rb_nodes)) return;
    const seen = new Set<string>();
    p.rb_nodes.forEach((node, i) => {
      const key = `${node.hostaddr}:${node.port}`;
      if (seen.has(key)) addFieldIssue(ctx, ['rb_nodes', i], `must not list ${key} twice`, { hostaddr: node.hostaddr, port: String(node.port) });
      seen.add(key);
    });
  });

export const updateInstanceCgroupParas = z.object({
  ip: hostAddressString(),
  port: portString(),
  type: enumString(INSTANCE_TYPES),
  cpu_cores: integerString(1),
  cgroup_mode: enumString(CGROUP_MODES),
});
