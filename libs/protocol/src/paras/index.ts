/** One paras schema per canonical job type; the compiler checks the table is exhaustive. */
import type { z } from 'zod';
import type { JobType } from '../job-types';
import { logicalBackupParas, logicalRestoreParas, clusterRestoreParas, manualBackupClusterParas } from './backup';
import {
  addCompsParas,
  addNodesParas,
  addShardsParas,
  createClusterParas,
  deleteClusterParas,
  deleteCompParas,
  deleteNodesParas,
  deleteShardsParas,
  rebuildNodeParas,
  updateInstanceCgroupParas,
} from './clusters';
import { expandClusterParas, getExpandTableListParas, repartitionTablesParas } from './expand';
import { createMachineParas, deleteMachineParas, setMachineParas } from './machines';
import { getClusterDetailParas, getVariableParas, noParas } from './queries';
import { raftMissionParas } from './raft-mission';
import { manualSwitchParas, setNoswitchParas } from './shard-ha';
import { cancelJobParas, getStatusParas, listJobsParas } from './status';
import { createBackupStorageParas, deleteBackupStorageParas } from './backup-storage';
import { rotateBackupKeyParas } from './backup-keys';
import { createTokenParas, deleteTokenParas, getAuditParas } from './auth';
import { rotateClusterPasswordsParas } from './passwords';
import { upgradeClusterParas } from './upgrade';
import { deleteBackupPolicyParas, setBackupPolicyParas } from './backup-policy';
import { runRestoreDrillParas } from './restore-drill';

export const PARAS_SCHEMAS = {
  get_status: getStatusParas,
  create_machine: createMachineParas,
  delete_machine: deleteMachineParas,
  set_machine: setMachineParas,
  create_cluster: createClusterParas,
  delete_cluster: deleteClusterParas,
  add_shards: addShardsParas,
  delete_shards: deleteShardsParas,
  add_comps: addCompsParas,
  delete_comp: deleteCompParas,
  add_nodes: addNodesParas,
  delete_nodes: deleteNodesParas,
  rebuild_node: rebuildNodeParas,
  update_instance_cgroup: updateInstanceCgroupParas,
  manual_backup_cluster: manualBackupClusterParas,
  cluster_restore: clusterRestoreParas,
  logical_backup: logicalBackupParas,
  logical_restore: logicalRestoreParas,
  get_expand_table_list: getExpandTableListParas,
  expand_cluster: expandClusterParas,
  repartition_tables: repartitionTablesParas,
  get_meta_mode: noParas,
  get_backup_storage: noParas,
  get_machine_summary: noParas,
  get_cluster_summary: noParas,
  get_cluster_detail: getClusterDetailParas,
  get_variable: getVariableParas,
  raft_mission: raftMissionParas,
  manual_switch: manualSwitchParas,
  set_noswitch: setNoswitchParas,
  create_backup_storage: createBackupStorageParas,
  delete_backup_storage: deleteBackupStorageParas,
  rotate_backup_key: rotateBackupKeyParas,
  create_token: createTokenParas,
  delete_token: deleteTokenParas,
  list_tokens: noParas,
  get_audit: getAuditParas,
  cancel_job: cancelJobParas,
  list_jobs: listJobsParas,
  rotate_cluster_passwords: rotateClusterPasswordsParas,
  upgrade_cluster: upgradeClusterParas,
  set_backup_policy: setBackupPolicyParas,
  delete_backup_policy: deleteBackupPolicyParas,
  run_restore_drill: runRestoreDrillParas,
} as const satisfies Record<JobType, z.ZodType>;

export type ParasSchemas = typeof PARAS_SCHEMAS;
/** The validated paras of a job type, as jobs receive them (numbers parsed, flags booleans, defaults filled). */
export type ParasOf<T extends JobType> = z.output<ParasSchemas[T]>;
/** The paras as a client sends them. */
export type ParasInputOf<T extends JobType> = z.input<ParasSchemas[T]>;
