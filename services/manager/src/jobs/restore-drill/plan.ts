// What a restore drill restores and checks (docs/restore-drills.md), chosen from the replicated
// state at submission and committed with the job, so every resume restores the same set:
//  - mode 'set': the set (backup_id, or the cluster's newest set with recorded checksums) as it
//    was taken, checked against its own figures;
//  - mode 'point_in_time': the set before it, plus the archived binlogs up to its point,
//    checked against its figures: the binlog archive is drilled too.
// And the scratch cluster's create_cluster paras: the set's shard count, the source's options,
// on the machines the operator named.

import { gtidCovers } from '@kcm/agent-api';
import { KcmError, type ParasOf } from '@kcm/protocol';
import { archivedUpTo, shardArchive } from '../../meta/binlog-archive';
import { backupSetsOf } from '../../meta/backup';
import { own } from '../../meta/dict';
import type { BackupSetRecord, ClusterOptions, MetaState } from '../../meta/state';

export type DrillParas = ParasOf<'run_restore_drill'>;
type CreateParas = ParasOf<'create_cluster'>;

export type DrillMode = 'set' | 'point_in_time';

/** The drill's choice, as committed (ids only: the records are read from the state by each step). */
export interface DrillChoice {
  mode: DrillMode;
  /** The set whose recorded figures the restored copy must match. */
  checkedBackupId: string;
  /** The set restored: checkedBackupId, or the set before it in a point-in-time drill. */
  restoredBackupId: string;
}

/** The paras a drill is committed with: its choice and its scratch cluster's create paras filled in. */
export type ResolvedDrillParas = DrillParas & { choice?: DrillChoice; scratch?: CreateParas };

/** A set every shard of which recorded its tables' figures (a standby source held at the set's point). */
export const hasRecordedChecksums = (set: BackupSetRecord): boolean => set.shards.length > 0 && set.shards.every((s) => s.tableChecksums !== undefined);

/** Why a set cannot be checked, or undefined when it can. */
function uncheckable(set: BackupSetRecord): string | undefined {
  const omitted = set.shards.find((s) => s.tableChecksums === undefined);
  if (!omitted) return set.shards.length === 0 ? 'it holds no shard' : undefined;
  return `shard ${omitted.shardName} recorded no table checksums (${omitted.checksumsOmitted ?? (omitted.sourceWasMaster ? 'it was backed up from its master' : 'a set from before checksums were recorded')})`;
}

/** The set and mode a drill of `p` restores and checks, or the refusal naming the field. */
export function chooseDrillSets(state: MetaState, p: DrillParas): DrillChoice {
  const sets = backupSetsOf(state, p.cluster_id);
  if (sets.length === 0) throw KcmError.of('NOT_FOUND', `paras.cluster_id: cluster ${p.cluster_id} has no backup set; run manual_backup_cluster first`, { field: 'paras.cluster_id' });
  let checked: BackupSetRecord | undefined;
  if (p.backup_id !== undefined) {
    checked = own(state.backupSets, p.backup_id);
    if (!checked || checked.clusterId !== p.cluster_id) throw KcmError.of('NOT_FOUND', `paras.backup_id: cluster ${p.cluster_id} has no backup set ${p.backup_id}`, { field: 'paras.backup_id' });
    const why = uncheckable(checked);
    if (why) throw KcmError.of('CONFLICT', `paras.backup_id: set ${checked.id} cannot be drilled: ${why}`, { field: 'paras.backup_id' });
  } else {
    checked = sets.filter(hasRecordedChecksums).at(-1);
    if (!checked) throw KcmError.of('CONFLICT', `paras.cluster_id: no backup set of cluster ${p.cluster_id} recorded table checksums (${uncheckable(sets.at(-1)!)}); a set backed up from a standby does`, { field: 'paras.cluster_id' });
  }
  if (p.point_in_time !== '1') return { mode: 'set', checkedBackupId: checked.id, restoredBackupId: checked.id };
  const before = sets.filter((s) => s.finishedAt < checked.finishedAt).at(-1);
  if (!before) throw KcmError.of('CONFLICT', `paras.point_in_time: set ${checked.id} is the oldest of cluster ${p.cluster_id}; a point-in-time drill restores the set before it and replays the binlogs up to it`, { field: 'paras.point_in_time' });
  if (before.shards.length !== checked.shards.length) {
    throw KcmError.of('CONFLICT', `paras.point_in_time: set ${before.id} has ${before.shards.length} shard(s) and set ${checked.id} ${checked.shards.length}; the cluster's shards changed between them`, { field: 'paras.point_in_time' });
  }
  // The replay ends at the checked set's exact positions: the archive must reach them.
  for (const shard of checked.shards) {
    const reached = archivedUpTo(shardArchive(state, p.cluster_id, shard.shardId));
    if (!gtidCovers(reached, shard.gtidPos)) {
      throw KcmError.of('CONFLICT', `paras.point_in_time: the archived binlogs of shard ${shard.shardName} reach ${reached || 'nothing'}, short of set ${checked.id}'s ${shard.gtidPos}; wait for archiving to catch up`, { field: 'paras.point_in_time' });
    }
  }
  return { mode: 'point_in_time', checkedBackupId: checked.id, restoredBackupId: before.id };
}

/** The scratch cluster: the restored set's shard count, the source's options (its last known ones), the named machines. */
export function scratchClusterParas(state: MetaState, p: DrillParas, choice: DrillChoice): CreateParas {
  const restored = own(state.backupSets, choice.restoredBackupId)!;
  const source = own(state.clusters, p.cluster_id);
  const o: Partial<ClusterOptions> = source?.options ?? {};
  const nodes = p.nodes ?? 3;
  return {
    nick_name: `restore_drill_of_cluster_${p.cluster_id}_set_${choice.checkedBackupId}`,
    ha_mode: 'rbr',
    shards: restored.shards.length,
    nodes,
    comps: 1,
    max_storage_size: o.maxStorageSizeGb ?? 1,
    max_connections: o.maxConnections ?? 100,
    cpu_cores: o.cpuCores ?? 1,
    cpu_limit_node: o.cpuLimitNode ?? 'share',
    innodb_size: o.innodbSizeMb ?? 64,
    rocksdb_block_cache_size_M: o.rocksdbBlockCacheSizeMb ?? 0,
    dbcfg: o.dbcfg === 1 ? '1' : '0',
    fullsync_level: Math.min(o.fullsyncLevel ?? 1, nodes - 1),
    storage_iplists: p.storage_iplists,
    computer_iplists: p.computer_iplists,
    install_proxysql: '0',
    ...(o.storageVersion ? { storage_version: o.storageVersion } : {}),
    ...(o.computerVersion ? { computer_version: o.computerVersion } : {}),
  };
}
