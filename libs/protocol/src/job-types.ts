/**
 * Job types, their modes and the aliases accepted on the wire.
 *
 * Canonical spelling = the first one the spec lists. Aliases are other spellings the
 * spec's own examples send; they resolve to the canonical type, and replies echo the
 * spelling the client sent.
 */
export const PROTOCOL_VERSION = '1.0';

export const JOB_TYPES = [
  'get_status',
  // machines (spec 4.2)
  'create_machine',
  'delete_machine',
  'set_machine',
  // clusters, shards, nodes (spec 4.3)
  'create_cluster',
  'delete_cluster',
  'add_shards',
  'delete_shards',
  'add_comps',
  'delete_comp',
  'add_nodes',
  'delete_nodes',
  'rebuild_node',
  'update_instance_cgroup',
  // backup and recovery (spec 4.4)
  'manual_backup_cluster',
  'cluster_restore',
  'logical_backup',
  'logical_restore',
  // expansion and repartition (spec 4.5)
  'get_expand_table_list',
  'expand_cluster',
  'repartition_tables',
  // queries (spec 4.6)
  'get_meta_mode',
  'get_backup_storage',
  'get_machine_summary',
  'get_cluster_summary',
  'get_cluster_detail',
  'get_variable',
  // manager membership (spec 4.7)
  'raft_mission',
  // shard high availability, beyond the spec's list (reference system names; DESIGN.md 2, 8)
  'manual_switch',
  'set_noswitch',
  // backup storage (beyond the spec's list: where full backups go, issue 14)
  'create_backup_storage',
  'delete_backup_storage',
  // a new key-encryption key for a storage's new objects, or an old one retired (issue 33)
  'rotate_backup_key',
  // tokens and the audit trail (beyond the spec's list: authentication with roles, issue 16)
  'create_token',
  'delete_token',
  'list_tokens',
  'get_audit',
  // stopping a job (beyond the spec's list, issue 19)
  'cancel_job',
  // the job list, newest first, for the web console and `kcm get list_jobs` (beyond the spec's list, issue 19)
  'list_jobs',
  // new generated passwords for a cluster's accounts (beyond the spec's list, issue 16)
  'rotate_cluster_passwords',
  // move a cluster to other engine versions while it serves (beyond the spec's list, issue 31)
  'upgrade_cluster',
  // full backups on a schedule with a retention, per cluster (beyond the spec's list, issue 33)
  'set_backup_policy',
  'delete_backup_policy',
  // restore a backup set into a scratch cluster, check it, delete it (beyond the spec's list, issue 33)
  'run_restore_drill',
] as const;

export type JobType = (typeof JOB_TYPES)[number];

export const JOB_TYPE_ALIASES: Readonly<Record<string, JobType>> = Object.freeze({
  delete_shard: 'delete_shards',
  delete_node: 'delete_nodes',
  table_repartition: 'repartition_tables',
  get_meta_summary: 'get_meta_mode',
});

export type JobMode = 'async' | 'sync';

/** sync: the reply carries the result (status `done`); async: the reply is `accept` + job_id. */
export const JOB_MODES = Object.freeze({
  get_status: 'sync',
  create_machine: 'async',
  delete_machine: 'async',
  set_machine: 'async',
  create_cluster: 'async',
  delete_cluster: 'async',
  add_shards: 'async',
  delete_shards: 'async',
  add_comps: 'async',
  delete_comp: 'async',
  add_nodes: 'async',
  delete_nodes: 'async',
  rebuild_node: 'async',
  update_instance_cgroup: 'async',
  manual_backup_cluster: 'async', // the spec leaves it open: async, and the result names the backup
  cluster_restore: 'async',
  logical_backup: 'async',
  logical_restore: 'async',
  get_expand_table_list: 'sync', // spec 4.5: a query, answered directly
  expand_cluster: 'async',
  repartition_tables: 'async',
  get_meta_mode: 'sync',
  get_backup_storage: 'sync',
  get_machine_summary: 'sync',
  get_cluster_summary: 'sync',
  get_cluster_detail: 'sync',
  get_variable: 'sync',
  raft_mission: 'async',
  manual_switch: 'async',
  set_noswitch: 'async', // a write to the replicated state, so it takes the one path every write takes: a job
  create_backup_storage: 'async',
  delete_backup_storage: 'async',
  rotate_backup_key: 'async',
  create_token: 'async',
  delete_token: 'async',
  list_tokens: 'sync',
  get_audit: 'sync',
  cancel_job: 'async', // a write to the replicated state: the one path every write takes
  list_jobs: 'sync',
  rotate_cluster_passwords: 'async',
  upgrade_cluster: 'async',
  set_backup_policy: 'async',
  delete_backup_policy: 'async',
  run_restore_drill: 'async',
} as const satisfies Record<JobType, JobMode>);

/** The job types answered with a job_id and run by the leader's job runner (each needs a runner entry or 'unsupported'). */
export type AsyncJobType = { [T in JobType]: (typeof JOB_MODES)[T] extends 'async' ? T : never }[JobType];

const CANONICAL = new Set<string>(JOB_TYPES);

export function isJobType(value: string): value is JobType {
  return CANONICAL.has(value);
}

/** The canonical job type for a spelling sent by a client, or undefined if kcm does not know it. */
export function canonicalJobType(sent: string): JobType | undefined {
  if (isJobType(sent)) return sent;
  return Object.hasOwn(JOB_TYPE_ALIASES, sent) ? JOB_TYPE_ALIASES[sent] : undefined;
}
