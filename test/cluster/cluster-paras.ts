// The create_cluster paras of the real-engine tests and benches, written once: the smallest
// cluster the test hosts hold (1 shard x 3 MariaDB nodes, 1 compute node on the last host,
// 64 MB buffer pools, CPU shares), which each caller changes only where its case differs.

import type { ParasInputOf } from '@kcm/protocol';
import { HOSTS } from './cluster-fixture';

/** Paras a test names only when its case is about them (engine versions: the manager's defaults otherwise). */
type OptionalParas = 'storage_version' | 'computer_version';

/** create_cluster's paras as sent, every field present but the engine versions. */
export type CreateClusterParas = Required<Omit<ParasInputOf<'create_cluster'>, OptionalParas>> & Pick<ParasInputOf<'create_cluster'>, OptionalParas>;

/**
 * create_cluster paras: the test default with `overrides` over it. The storage nodes go on
 * `hosts` (default the cluster fixture's three), the compute node on the last of them.
 */
export function clusterParas(overrides: Partial<CreateClusterParas> = {}, hosts: readonly string[] = HOSTS): CreateClusterParas {
  return {
    nick_name: 'kcm_test', ha_mode: 'rbr', shards: '1', nodes: '3', comps: '1', max_storage_size: '1', max_connections: '100',
    cpu_cores: '1', cpu_limit_node: 'share', innodb_size: '64', rocksdb_block_cache_size_M: '0', dbcfg: '1', fullsync_level: '1',
    storage_iplists: [...hosts], computer_iplists: [hosts[hosts.length - 1]], install_proxysql: '0',
    ...overrides,
  };
}
