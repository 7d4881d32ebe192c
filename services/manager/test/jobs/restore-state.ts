// Metadata for cluster_restore tests: a source cluster's backup set and binlog archive, and
// destination clusters of a chosen shard count, without running the jobs that make them.

import type { ArchivedBinlogRecord, ClusterRecord, MetaState, ShardBackupRecord, ShardRecord } from '../../src/meta/state';
import { cluster } from '../helpers/cluster-state';
import { storedAccount } from '../../../../test/helpers/secrets';

export const BACKUP_FINISHED_S = 1_800_000_000;

/** A ready cluster whose shards have one master each, on host h<cluster>, ports 57000 + shard. */
export function clusterWithShards(id: string, shardCount: number): ClusterRecord {
  const c = cluster(id, 'ready', [], []);
  c.shards = Object.create(null);
  c.accounts = { admin: storedAccount({ user: 'a', password: 'pa' }), replication: storedAccount({ user: 'r', password: 'pr' }), storage: storedAccount({ user: 's', password: 'ps' }), computer: storedAccount({ user: 'c', password: 'pc' }) };
  c.options = { haMode: 'rbr', maxStorageSizeGb: 1, maxConnections: 100, cpuCores: 1, cpuLimitNode: 'share', innodbSizeMb: 64, rocksdbBlockCacheSizeMb: 0, dbcfg: 1, fullsyncLevel: 1 };
  for (let i = 1; i <= shardCount; i++) {
    const shardId = `${id}${i}`;
    const nodeId = `${id}${i}1`;
    const shard: ShardRecord = {
      id: shardId,
      name: `shard_${shardId}`,
      masterNodeId: nodeId,
      nodes: Object.assign(Object.create(null), { [nodeId]: { id: nodeId, hostaddr: `h${id}`, port: 57000 + i, serverId: Number(nodeId), datadir: '/d', logdir: '/l', walLogDir: '/w' } }),
    };
    c.shards[shardId] = shard;
  }
  return c;
}

export function archivedFile(shardId: string, n: number, endSeq: number, firstS: number, lastS: number, storageName = 'main'): ArchivedBinlogRecord {
  const name = `mariadb-bin.${String(n).padStart(6, '0')}`;
  return {
    key: `cluster_1/binlogs/shard_${shardId}/1/${firstS}-${name}`, storageName, name, serverId: 1, hostaddr: 'h1', port: 57001, bytes: 10, sha256: '',
    startGtidState: `0-1-${endSeq - 5}`, endGtidState: `0-1-${endSeq}`, firstEventTime: firstS, lastEventTime: lastS, archivedAt: 0,
  };
}

/**
 * Source cluster 1 (2 shards: 11, 12) with one backup set finished at BACKUP_FINISHED_S at
 * GTID 0-1-10 per shard, binlogs archived up to BACKUP_FINISHED_S + 100; destination
 * clusters 2 (2 shards) and 3 (1 shard). Storage `main` at `storage` (host:port) and `root`.
 */
export function restoreState(state: MetaState, storage: { hostaddr: string; port: number; root: string }): void {
  state.clusters['1'] = clusterWithShards('1', 2);
  state.clusters['2'] = clusterWithShards('2', 2);
  state.clusters['3'] = clusterWithShards('3', 1);
  state.backupStorages['main'] = { name: 'main', stype: 'fs', hostaddr: storage.hostaddr, port: storage.port, path: storage.root, createdAt: 0 };
  const shardBackup = (shardId: string): ShardBackupRecord => ({
    shardId, shardName: `shard_${shardId}`, key: `cluster_1/backup_5/shard_${shardId}.mbstream`, bytes: 10, sha256: '', gtidPos: '0-1-10',
    sourceHostaddr: 'h1', sourcePort: 57001, sourceWasMaster: false, transferMs: 1, storedAt: BACKUP_FINISHED_S * 1000,
  });
  state.backupSets['5'] = {
    id: '5', clusterId: '1', storageName: 'main', startedAt: (BACKUP_FINISHED_S - 10) * 1000, finishedAt: BACKUP_FINISHED_S * 1000,
    shards: [shardBackup('11'), shardBackup('12')], catalog: [],
  };
  for (const shardId of ['11', '12']) {
    state.binlogArchives[`1/${shardId}`] = {
      clusterId: '1', shardId,
      files: [archivedFile(shardId, 1, 10, BACKUP_FINISHED_S - 50, BACKUP_FINISHED_S - 5), archivedFile(shardId, 2, 15, BACKUP_FINISHED_S - 5, BACKUP_FINISHED_S + 40), archivedFile(shardId, 3, 20, BACKUP_FINISHED_S + 40, BACKUP_FINISHED_S + 100)],
    };
  }
}
