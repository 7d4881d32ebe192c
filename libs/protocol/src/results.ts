/**
 * What get_status attaches to an async job: its result when done (one type per job type,
 * beside the paras schemas), its progress while ongoing. The manager's jobs build these
 * types and the CLI reads them, so a field renamed on one side fails to compile on the
 * other. Numbers travel as decimal strings, as in the spec's examples. Type aliases, not
 * interfaces, so that each is a Record<string, unknown> (the reply envelope's attachment).
 */
import type { AsyncJobType } from './job-types';

/** A job whose result the spec leaves empty. */
export type EmptyResult = Record<string, never>;

export type ShardNodeResult = {
  node_id: string;
  hostaddr: string;
  port: string;
  master: string;
};

export type CreateClusterResult = {
  cluster_id: string;
  cluster_name: string;
  nick_name: string;
  shards: string;
  comps: string;
  computer_user: string;
  computer_pwd: string;
  storage_user: string;
  storage_pwd: string;
  list_shard: { shard_id: string; shard_name: string; nodes: string; list_node: ShardNodeResult[] }[];
  list_comp: CompResult[];
  /** Which placement rules the cluster meets (masters on distinct machines, replicas on distinct racks or machines), in words; "not met: ..." names each rule that could not be. */
  placement: string;
};

export type CompResult = {
  comp_id: string;
  comp_name: string;
  hostaddr: string;
  port: string;
};

/** One entry of delete_cluster's computer_step (one per compute node removed). */
export type ComputerStepResult = {
  cluster_id: string;
  computer_hosts: string;
  computer_id: string;
  computer_state: 'done';
  error_code: number;
  error_info: string;
  rollback_flag: number;
};

/** One entry of delete_cluster's shard_step (one per shard removed). */
export type ShardStepResult = {
  cluster_id: string;
  error_code: number;
  error_info: string;
  rollback_flag: number;
  shard_ids: string;
  storage_hosts: string;
  storage_id: string;
  storage_state: 'done';
};

export type DeleteClusterResult = {
  cluster_id: string;
  cluster_name: string;
  job_steps: string;
  shard_id: string;
  computer_id: string;
  storage_state: 'done';
  computer_state: 'done';
  shard_step: ShardStepResult[];
  computer_step: ComputerStepResult[];
};

/** The cluster after a grow job, as add_shards, add_comps and add_nodes report it. */
export type GrownClusterResult = {
  cluster_id: string;
  cluster_name: string;
  shards: string;
  comps: string;
};

export type AddShardsResult = GrownClusterResult & {
  list_shard: { shard_id: string; shard_name: string }[];
};

export type AddCompsResult = GrownClusterResult & {
  list_comp: CompResult[];
};

export type AddNodesResult = GrownClusterResult & {
  list_shard: { shard_id: string; shard_name: string; nodes: string; list_node: { hostaddr: string; node_id: string; port: string }[] }[];
};

/** Where one rebuilt standby's copy came from (the spec's result is {}; this is for the operator). */
export type RebuiltNodeResult = {
  node_id: string;
  hostaddr: string;
  port: string;
  source: string;
  gtid_pos: string;
  bytes: string;
  transfer_ms: string;
  kept_old_data: string;
};

export type RebuildNodeResult = {
  list_node: RebuiltNodeResult[];
};

export type UpdateInstanceCgroupResult = {
  ip: string;
  port: string;
  type: 'mysql' | 'pg';
  cpu_cores: string;
  cgroup_mode: string;
  cgroup_path: string;
  pids: string;
};

/** cluster_restore: one entry per shard pair (source shard -> destination shard). */
export type RestoredShardResult = {
  src_shard_id: string;
  dst_shard_id: string;
  /** The GTID position of the full backup restored, and the one reached after the binlog replay. */
  backup_gtid: string;
  restored_gtid: string;
  /** Archived binlog files replayed. */
  binlogs: string;
  /**
   * XA branches of multi-shard transactions the replay left prepared on this shard (open at
   * restore_time), committed because their decision was recorded by then, or rolled back.
   */
  xa_committed: string;
  xa_rolled_back: string;
};

/** cluster_restore: the compute-only objects (views, functions, types, sequences) put back on one compute node's database. */
export type RestoredCatalogResult = {
  comp_id: string;
  database: string;
  /** As `<kind> <schema> <name>`, e.g. `VIEW public recent_orders`. */
  objects: string[];
  /** Why nothing was restored here, when nothing was. */
  note?: string;
};

/** cluster_restore: which backup set it started from, how far each shard was brought, and the compute catalog put back. */
export type ClusterRestoreResult = {
  src_cluster_id: string;
  dst_cluster_id: string;
  /** Unix seconds: rows written before it are restored, rows written at or after it are not. */
  restore_time: string;
  backup_id: string;
  list_shard: RestoredShardResult[];
  list_catalog: RestoredCatalogResult[];
};

/** raft_mission: what its task did (add_peer: learner, voter; remove_peer: removed; transfer_leader: leader). */
export type RaftMissionResult = {
  learner?: string;
  voter?: string;
  removed?: string;
  leader?: string;
};

/** How long one step of a switchover took. */
export type SwitchStepTiming = { step: string; ms: string };

/**
 * manual_switch: who is master now, and how long writes were held. The write stall runs from
 * the moment the old master turned read-only to the moment the compute nodes reached the
 * new, writable master (kcm's measure; a client may see less, never more, plus its retry).
 */
export type ManualSwitchResult = {
  cluster_id: string;
  shard_id: string;
  /** `<ip>_<port>`, as the paras name nodes. */
  old_master: string;
  new_master: string;
  /** The old master's gtid_binlog_pos when writes stopped: the new master had applied it before taking over. */
  gtid_pos: string;
  write_stall_ms: string;
  /** Other standbys now replicating from the new master (`<ip>_<port>`, comma-separated). */
  standbys_repointed: string;
  /** Standbys that could not be re-pointed now, with why ('' = none); rebuild_node or the reconciler takes them on. */
  standbys_failed: string;
  /** Compute nodes whose foreign server points at the new master (comp names, comma-separated). */
  comps_repointed: string;
  list_step: SwitchStepTiming[];
};

/** set_noswitch: the window of each shard it touched; noswitch_until is Unix seconds, '' when lifted. */
export type SetNoswitchResult = {
  cluster_id: string;
  list_shard: { shard_id: string; noswitch_until: string }[];
};

/** Where one shard's physical backup of a backup set lies (manual_backup_cluster). */
export type ShardBackupResult = {
  shard_id: string;
  shard_name: string;
  /** `<storage name>:<key>` inside the backup storage. */
  location: string;
  bytes: string;
  sha256: string;
  gtid_pos: string;
  /** The node it was taken from, `<hostaddr>:<port>`, and whether it was the master. */
  source: string;
  source_master: string;
};

/** A compute node's schema dump of one cluster database. */
export type CatalogBackupResult = {
  database: string;
  location: string;
  bytes: string;
};

/**
 * manual_backup_cluster: the backup set (DESIGN.md section 2). A cluster's set lists its
 * shards and catalog; a metadata backup (cluster_id -1) has one image (location, bytes,
 * sha256, applied_index) and empty lists.
 */
export type ManualBackupClusterResult = {
  backup_id: string;
  cluster_id: string;
  storage: string;
  /** When the set was finished: Unix seconds, and the manager's local time. */
  backup_time: string;
  backup_time_local: string;
  bytes: string;
  list_shard: ShardBackupResult[];
  list_catalog: CatalogBackupResult[];
  location?: string;
  sha256?: string;
  applied_index?: string;
};

/** create_backup_storage: the storage as get_backup_storage lists it, and its measured free space. */
export type CreateBackupStorageResult = {
  name: string;
  stype: string;
  hostaddr: string;
  port: string;
  path: string;
  free_bytes: string;
  /** "on" or "off" (docs/backup-encryption.md). */
  encryption: string;
};

/** rotate_backup_key: the storage's keys after it (oldest first, comma-separated) and the one new objects are wrapped with. */
export type RotateBackupKeyResult = {
  name: string;
  active_kek_id: string;
  kek_ids: string;
};

/** logical_backup: the daily schedules it set (object type, and each object with its window). */
export type LogicalBackupResult = {
  backup_type: string;
  backup: { db_table: string; backup_time: string }[];
};

/**
 * logical_restore (spec 4.4): `done_dts`, every restored table as
 * `<database>_$$_<schema>.<table>` followed by a comma, for table, schema and db restores alike.
 */
export type LogicalRestoreResult = {
  done_dts: string;
};

/** Each result type is checked to cover every async job type (a new one fails to compile until it has its entry). */
type EveryAsyncJobType<T extends Record<AsyncJobType, unknown>> = T;

export type JobResults = EveryAsyncJobType<{
  create_machine: EmptyResult;
  delete_machine: EmptyResult;
  set_machine: EmptyResult;
  create_cluster: CreateClusterResult;
  delete_cluster: DeleteClusterResult;
  add_shards: AddShardsResult;
  delete_shards: EmptyResult;
  add_comps: AddCompsResult;
  delete_comp: EmptyResult;
  add_nodes: AddNodesResult;
  delete_nodes: EmptyResult;
  rebuild_node: RebuildNodeResult;
  update_instance_cgroup: UpdateInstanceCgroupResult;
  // Answered UNSUPPORTED until their families land; each defines its result then.
  manual_backup_cluster: ManualBackupClusterResult;
  cluster_restore: ClusterRestoreResult;
  logical_backup: LogicalBackupResult;
  logical_restore: LogicalRestoreResult;
  expand_cluster: ExpandClusterResult;
  repartition_tables: RepartitionTablesResult;
  raft_mission: RaftMissionResult;
  manual_switch: ManualSwitchResult;
  set_noswitch: SetNoswitchResult;
  create_backup_storage: CreateBackupStorageResult;
  delete_backup_storage: EmptyResult;
  rotate_backup_key: RotateBackupKeyResult;
  create_token: TokenResult;
  delete_token: EmptyResult;
  cancel_job: CancelJobResult;
  rotate_cluster_passwords: RotateClusterPasswordsResult;
  upgrade_cluster: UpgradeClusterResult;
  set_backup_policy: BackupPolicyResult;
  delete_backup_policy: EmptyResult;
  run_restore_drill: RestoreDrillResult;
}>;

/**
 * set_backup_policy, and `backup_policy` of get_cluster_detail: the policy as it stands, every
 * number as a string like every other result; keep_days/keep_sets absent when not set.
 */
export type BackupPolicyResult = {
  cluster_id: string;
  full_every_hours: string;
  window: string;
  keep_days?: string;
  keep_sets?: string;
  storage: string;
  /** The policy's restore drills (docs/restore-drills.md), when it schedules them. */
  drill_every_days?: string;
  drill_storage_iplists?: string[];
  drill_computer_iplists?: string[];
};

/**
 * rotate_cluster_passwords: the accounts that got new passwords, and the new passwords of
 * the two accounts a client uses (create_cluster's field names), present only when rotated.
 */
export type RotateClusterPasswordsResult = {
  cluster_id: string;
  /** Comma-separated account names, e.g. `admin,replication,storage,computer`. */
  rotated: string;
  computer_user?: string;
  computer_pwd?: string;
  storage_user?: string;
  storage_pwd?: string;
};

/** upgrade_cluster: one instance moved to another engine version (or found there already). */
export type UpgradedInstance = {
  /** `<ip>_<port>`, as the paras of manual_switch name nodes. */
  instance: string;
  /** Storage nodes: the shard; compute nodes: the comp's name. */
  shard_id?: string;
  comp_name?: string;
  /** What the running instance answered before and after (SELECT VERSION(), SHOW server_version). */
  version_before: string;
  version_after: string;
  /** From the stop to the instance answering its health check again ('0' when it was already there). */
  ms: string;
};

/**
 * upgrade_cluster: every instance it moved, in the order it moved them, and each shard's
 * planned switchover (a master is never restarted while it is the master).
 */
export type UpgradeClusterResult = {
  cluster_id: string;
  storage_version: string;
  computer_version: string;
  list_node: UpgradedInstance[];
  list_comp: UpgradedInstance[];
  list_switch: { shard_id: string; old_master: string; new_master: string; write_stall_ms: string }[];
};

/**
 * cancel_job's result: the job and what became of it: `canceled` (it was waiting and never
 * ran; it is failed with CANCELED now) or `stopping` (it is running: it stops at its next
 * step boundary, rolls back what it created, and ends failed with CANCELED).
 */
export type CancelJobResult = { job_id: string; outcome: 'canceled' | 'stopping' };

/** create_token's result: the token's name and role (the token itself only in the acknowledgement, once). */
export type TokenResult = { name: string; role: string };

/** The attachment get_status shows for a done job of type T. */
export type ResultOf<T extends AsyncJobType> = JobResults[T];

/** What get_status attaches while a job is ongoing (DESIGN.md section 2: events). */
export type JobProgressAttachment = {
  progress: {
    /** The step running now, 1-based, out of `steps`. */
    step: number;
    steps: number;
    step_name: string;
    /** Units of the running step done out of total, when the step reports them. */
    done?: number;
    total?: number;
    unit?: string;
  };
};

/** get_status's attachment: a done job's result, an ongoing job's progress, or null (queued or failed). */
export type StatusAttachment = JobResults[AsyncJobType] | JobProgressAttachment | null;

/**
 * expand_cluster's result: per moved table, the rows copied, re-copied by the catch-up and
 * verified, the source left behind (renamed aside, or '' when dropped), the measured
 * write-blocked window of its cut-over (ms: the longest a compute node held writes, lock
 * granted to commit) and the whole cut-over (ms, first hold sent to last re-point answered).
 */
export type ExpandClusterResult = {
  cluster_id: string;
  src_shard_id: string;
  dst_shard_id: string;
  blocked_ms_max: string;
  /** copy_started_at / copy_ended_at: the copy's span, ms since the epoch (the tables copy at once). */
  list_table: { table: string; rows_copied: string; rows_resynced: string; rows_verified: string; copy_ms: string; copy_started_at: string; copy_ended_at: string; blocked_ms: string; cut_over_ms: string; old_table: string }[];
};

/**
 * repartition_tables' result: per source table, its target, the name the target has after
 * the switch, where the source went, the copy's figures and the writes' blocked window.
 */
export type RepartitionTablesResult = {
  src_cluster_id: string;
  dst_cluster_id: string;
  blocked_ms_max: string;
  list_table: { source: string; target: string; table: string; old_table: string; rows_copied: string; rows_resynced: string; rows_verified: string; copy_ms: string; blocked_ms: string }[];
};

/**
 * get_cluster_detail (sync, beyond the spec's fields; issue 31): the engine versions. Each
 * node's and compute node's `engine_version` is what kcm last measured it running ("unknown"
 * for instances recorded before engines were versioned); the cluster's storage_version and
 * computer_version are what its next instances get ('' = each host's default).
 */
export type ClusterDetailEngineVersions = { storage_version: string; computer_version: string };
export type InstanceEngineVersion = { engine_version: string };

/**
 * A restore drill (run_restore_drill's result, and `restore_drill_last` of get_cluster_detail):
 * which set was restored to which point, whether the restored tables matched the figures
 * recorded at backup time, RTO (restore start to verified, ms) and data-age RPO (the drill's
 * start minus the restored point, s). A failed drill's job has no result: the query shows it.
 */
export type RestoreDrillResult = {
  cluster_id: string;
  job_id: string;
  /** 'true' when every recorded table came back with its rows and checksum. */
  passed: 'true' | 'false';
  /** The set whose recorded figures the copy was checked against. */
  backup_id: string;
  /** The set restored ('' when the drill failed before choosing); differs from backup_id in a point-in-time drill. */
  restored_backup_id: string;
  /** 'set' (the set as taken) or 'point_in_time' (the previous set plus archived binlogs). */
  mode: 'set' | 'point_in_time';
  /** Unix seconds of the restored point (the set's end). */
  point_time: string;
  rto_ms: string;
  rpo_s: string;
  tables_checked: string;
  list_mismatch: { table: string; what: string }[];
  scratch_cluster_id: string;
  /** 'true', or 'pending': a host did not answer, its instances are removed when it does (a recorded rollback). */
  scratch_deleted: 'true' | 'pending';
  /** Unix seconds the drill ended. */
  finished_at: string;
  /** Why it failed, when it did. */
  error?: string;
};
