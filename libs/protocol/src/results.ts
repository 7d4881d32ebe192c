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
  /** Whether every shard has its replicas on distinct machines, in words. */
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

/** raft_mission: what its task did (add_peer: learner, voter; remove_peer: removed; transfer_leader: leader). */
export type RaftMissionResult = {
  learner?: string;
  voter?: string;
  removed?: string;
  leader?: string;
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
  manual_backup_cluster: EmptyResult;
  cluster_restore: EmptyResult;
  logical_backup: LogicalBackupResult;
  logical_restore: LogicalRestoreResult;
  expand_cluster: EmptyResult;
  repartition_tables: EmptyResult;
  raft_mission: RaftMissionResult;
}>;

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
