// Backup queries: get_backup_storage (spec 4.6: list_backup_storage[] of {hostaddr, name,
// port, stype}, with path and the full and logical backup sets each storage keeps), and a cluster's backup sets in get_cluster_detail (`list_backup`, oldest
// first, each as manual_backup_cluster's result names it). Metadata backups are listed by
// get_backup_storage's `list_metadata_backup`.

import type { QueryHandler } from '../submit/manager-service';
import { backupSetResult } from '../jobs/backup';
import { backupSetsOf, METADATA_BACKUP_CLUSTER_ID } from '../meta/backup';
import type { MetaState } from '../meta/state';
import { backupPolicyDetail } from './backup-policy';
import { restoreDrillDetail } from './restore-drills';

export function backupStorageList(state: MetaState): Record<string, unknown> {
  const storages = Object.values(state.backupStorages).sort((a, b) => a.createdAt - b.createdAt || (a.name < b.name ? -1 : 1));
  return {
    list_backup_storage: storages.map((s) => ({
      hostaddr: s.hostaddr,
      name: s.name,
      port: String(s.port),
      stype: s.stype,
      path: s.path,
      // stype s3: the bucket, never its credentials (the secret key is sealed and stays so).
      ...(s.s3 ? { endpoint: s.s3.endpoint, bucket: s.s3.bucket, prefix: s.s3.prefix, region: s.s3.region } : {}),
      backup_sets: String(Object.values(state.backupSets).filter((b) => b.storageName === s.name).length),
      // Logical backup sets with a part kept here (logical_backup; beyond the spec's fields, like backup_sets).
      logical_backup_sets: String(Object.values(state.logicalBackups.sets).filter((set) => set.parts.some((p) => p.storage === s.name)).length),
    })),
    list_metadata_backup: backupSetsOf(state, METADATA_BACKUP_CLUSTER_ID).map(backupSetResult),
  };
}

/** get_cluster_detail with the cluster's backup sets, backup policy, restorable window and restore drills added. */
export function withBackupSets(detail: QueryHandler): QueryHandler {
  return async (req, state) => {
    const reply = await detail(req, state);
    const clusterId = typeof reply.cluster_id === 'string' ? reply.cluster_id : undefined;
    return clusterId === undefined ? reply : { ...reply, list_backup: backupSetsOf(state, clusterId).map(backupSetResult), ...backupPolicyDetail(state, clusterId), ...restoreDrillDetail(state, clusterId) };
  };
}
