/**
 * Help text for each job type, generated from the paras schemas (required/optional,
 * defaults, rules) plus the small description table below (what a field means). The rules
 * are never written twice: they come from the schemas.
 */
import { canonicalJobType, JOB_MODES, JOB_TYPE_ALIASES, type JobMode, type JobType } from './job-types';
import { PARAS_SCHEMAS } from './paras';
import { fieldFacts, objectShapeOf } from './schema-walk';

export interface ParaDescription {
  name: string;
  required: boolean;
  /** What the field means. */
  description: string;
  /** The accepted values in words, from the schema. */
  rule: string;
  default?: unknown;
  /** Fields of each element, for arrays of objects. */
  items?: ParaDescription[];
}

export interface JobDescription {
  jobType: JobType;
  aliases: string[];
  mode: JobMode;
  summary: string;
  paras: ParaDescription[];
  /** Rules between fields, in words. */
  notes: string[];
}

interface JobDoc {
  summary: string;
  notes?: string[];
  /** Meanings that differ from the shared FIELD_DOCS for this job. */
  fields?: Record<string, string>;
}

/** Meaning of each para name; the same name means the same thing in every job unless a job overrides it. */
export const FIELD_DOCS: Readonly<Record<string, string>> = {
  hostaddr: 'IP address of the machine',
  machine_type: 'storage (hosts storage nodes) or computer (hosts compute nodes)',
  port_range: 'ports new nodes on this machine are allocated from',
  rack_id: 'rack the machine is in',
  datadir: 'data directory for storage nodes',
  logdir: 'log directory',
  wal_log_dir: 'WAL log directory',
  comp_datadir: 'data directory for compute nodes',
  total_mem: 'usable memory, MB',
  total_cpu_cores: 'usable logical cores',
  node_stats: 'running (online, can receive nodes) or dead (offline)',
  nick_name: 'business name of the cluster',
  ha_mode: 'replication mode: rbr (semi-sync replication) or mgr',
  shards: 'number of shards',
  nodes: 'storage nodes per shard (one master, the rest standbys)',
  comps: 'number of compute nodes',
  max_storage_size: 'maximum storage per node, GB (checked at placement)',
  max_connections: 'maximum connections per node',
  cpu_cores: 'CPU cores per node',
  cpu_limit_node: 'CPU isolation: share (soft) or quota (hard)',
  innodb_size: 'storage engine buffer pool, MB',
  rocksdb_block_cache_size_M: 'RocksDB block cache, MB (product version 1.1 and later)',
  dbcfg: '1 = small-memory mode, 0 = normal',
  fullsync_level: 'standbys that must acknowledge each commit (semi-sync)',
  storage_iplists: 'machines for storage nodes; empty = kcm chooses running machines',
  computer_iplists: 'machines for compute nodes; empty = kcm chooses running machines',
  install_proxysql: '1 = install a proxy (single-shard clusters only)',
  cluster_id: 'id of the cluster',
  cluster_name: 'generated name of the cluster',
  shard_id: 'id of the shard',
  comp_id: 'id of the compute node',
  port: 'port of the instance',
  rb_nodes: 'standby nodes to rebuild',
  need_backup: 'back up the node before rebuilding it',
  hdfs_host: 'where the standby backup is stored',
  pv_limit: 'transfer speed limit, MB/s (0 = none)',
  allow_pull_from_master: 'copy from the master when no standby is a suitable source',
  allow_replica_delay: 'seconds of replication delay above which a standby is not used as a source',
  ip: 'IP address of the instance',
  type: 'mysql (storage node instance) or pg (compute node instance)',
  cgroup_mode: 'quota (hard CPU limit) or share (soft CPU weight)',
  src_cluster_id: 'cluster the data comes from',
  dst_cluster_id: 'cluster the data goes to',
  restore_time: 'point in time to restore to (manager local time, or Unix seconds)',
  backup_type: 'what each entry names: table, schema or db',
  backup: 'daily backups to set up, each run inside its window',
  db_table: 'object name: <db>_$$_<schema>.<table>, <db>_$$_<schema> or <db>',
  backup_time: 'daily window the backup runs in',
  restore_type: 'what each entry names: table, schema or db',
  restore: 'objects to restore and the time to restore each to',
  policy: 'top_hit (most accessed tables) or top_size (largest tables)',
  src_shard_id: 'shard the tables move from',
  dst_shard_id: 'shard the tables move to',
  table_list: 'tables to move, <database>.<schema>.<table>',
  drop_old_table: 'drop the source table after cut-over (default keeps it)',
  repartition_tables: 'source=>target table pairs, comma-separated',
  variable: 'storage node variable name',
  task_type: 'transfer_leader, add_peer or remove_peer',
  target_leader: 'manager member to hand leadership to',
  peer: 'manager member to add or remove',
  master_hostaddr: 'the shard\'s current master, <ip>_<port>',
  assign_hostaddr: 'the standby of the same shard to make master, <ip>_<port>',
  timeout: 'seconds the no-switch window lasts (required with type 1)',
};

const JOB_DOCS: Readonly<Record<JobType, JobDoc>> = {
  get_status: { summary: 'Report the status and result of an async job (job_id in the envelope).' },
  create_machine: { summary: 'Register a machine whose agent will host nodes.' },
  delete_machine: { summary: 'Remove a machine that hosts no nodes.' },
  set_machine: { summary: 'Mark a machine online (running) or offline (dead).' },
  create_cluster: {
    summary: 'Create a cluster of shards (MariaDB) and compute nodes (PostgreSQL).',
    notes: ['fullsync_level <= nodes - 1', 'install_proxysql "1" requires shards "1"', 'storage_version and computer_version default to the manager\'s defaultStorageVersion and defaultComputerVersion'],
    fields: { storage_version: 'MariaDB version the storage nodes run, e.g. 10.11.19 (beyond the spec)', computer_version: 'PostgreSQL version the compute nodes run, e.g. 15.20 (beyond the spec)' },
  },
  delete_cluster: {
    summary: 'Delete a cluster, its shards and compute nodes.',
    notes: ['cluster_id or cluster_name is required; given both, they must name the same cluster'],
    fields: { cluster_name: 'name of the cluster, instead of cluster_id' },
  },
  add_shards: { summary: 'Add shards to a cluster.', fields: { shards: 'number of shards to add', nodes: 'storage nodes per new shard' } },
  delete_shards: { summary: 'Delete one shard of a cluster.' },
  add_comps: { summary: 'Add compute nodes to a cluster.', fields: { comps: 'number of compute nodes to add' } },
  delete_comp: { summary: 'Delete one compute node of a cluster.' },
  add_nodes: {
    summary: 'Add standby storage nodes to one shard or to every shard.',
    fields: { nodes: 'storage nodes to add per shard', shard_id: 'only this shard (default: every shard)' },
  },
  delete_nodes: { summary: 'Delete one storage node.', fields: { hostaddr: 'machine of the node', port: 'port of the node' } },
  rebuild_node: { summary: 'Rebuild standby nodes from a healthy copy.', notes: ['a node may be listed once'] },
  update_instance_cgroup: { summary: 'Change the CPU isolation of one instance.', fields: { cpu_cores: 'CPU cores for the instance' } },
  manual_backup_cluster: { summary: 'Take a full backup of a cluster, or of the metadata with cluster_id -1.', fields: { cluster_id: 'cluster to back up, -1 = the metadata' } },
  cluster_restore: { summary: 'Restore a cluster to a point in time into a new empty cluster.', notes: ['dst_cluster_id differs from src_cluster_id'] },
  logical_backup: { summary: 'Set up daily logical backups of tables, schemas or databases.', notes: ['each db_table has the shape its backup_type requires', 'without backup_type, the db_table shape names the type (all entries of one type)'] },
  logical_restore: {
    summary: 'Restore tables, schemas or databases from logical backups.',
    notes: ['use restore[], or the older form db_table + restore_time', 'each db_table has the shape its restore_type requires', 'without restore_type, the db_table shape names the type (all entries of one type)'],
    fields: { db_table: 'older form: the one object to restore', restore_time: 'older form: the time to restore it to' },
  },
  get_expand_table_list: { summary: 'List candidate tables to move off a shard.', fields: { shard_id: 'source shard' } },
  expand_cluster: { summary: 'Move tables from one shard to another online.', notes: ['dst_shard_id differs from src_shard_id'] },
  repartition_tables: { summary: 'Copy tables into pre-created target tables online, then switch names (online DDL).', notes: ['all source tables are in one database'] },
  get_meta_mode: { summary: 'Report how the metadata is replicated (no_rep or mgr).' },
  get_backup_storage: { summary: 'List backup storage.' },
  get_machine_summary: { summary: 'List machines and their status.' },
  get_cluster_summary: { summary: 'List clusters.' },
  get_cluster_detail: { summary: 'Show a cluster with live status of every node.', notes: ['cluster_name or cluster_id is required'], fields: { cluster_id: 'id of the cluster, instead of cluster_name' } },
  get_variable: { summary: 'Read a variable of a storage node.', fields: { port: 'port of the storage node' } },
  raft_mission: {
    summary: 'Change the manager group: transfer leadership, add or remove a member.',
    notes: ['target_leader is required for transfer_leader, peer for add_peer and remove_peer'],
  },
  manual_switch: {
    summary: 'Switch a shard\'s master to a chosen standby (planned; writes held only while it catches up).',
    notes: [
      'master_hostaddr must be the shard\'s current master and assign_hostaddr one of its standbys',
      'refused when the standby is more transactions behind than the manager\'s manualSwitchMaxBehindTrx',
    ],
  },
  rotate_cluster_passwords: {
    summary: 'Give some or all of a cluster\'s generated database accounts new passwords, on every storage and compute node (beyond the spec).',
    notes: [
      'the new storage and computer passwords are in get_status of this job, shown to its submitter and to admins',
      'refused while another job runs or waits on the cluster',
      'a rotation that failed part-way is finished by submitting it again (without accounts, or with the same ones)',
    ],
    fields: { accounts: 'accounts to rotate: admin, replication, storage, computer (default: all four)' },
  },
  upgrade_cluster: {
    summary: 'Move a cluster to other MariaDB and/or PostgreSQL versions while it serves, one instance at a time (beyond the spec).',
    notes: [
      'storage nodes: the standbys one at a time, then a planned switchover of each shard to an upgraded standby, then the old master',
      'compute nodes one at a time: the sessions of the one restarting are disconnected, the others see nothing',
      'stops and says why at the first instance that fails its health check, leaving the cluster serving; submit it again to carry on',
      'refused while a manager of the group or an agent of the cluster runs a kcm that cannot do it',
    ],
    fields: { storage_version: 'MariaDB version every storage node runs afterwards, e.g. 10.11.19', computer_version: 'PostgreSQL version every compute node runs afterwards, e.g. 15.20' },
  },
  set_backup_policy: {
    summary: 'Back up a cluster on a schedule and expire what its retention no longer needs (beyond the spec).',
    notes: [
      'one policy per cluster: setting it again replaces it, keeping its last run (a period that ran does not run again)',
      'a full backup runs once per period of full_every_hours, at the first moment of the period inside the window',
      'retention: every set of the last keep_days days and the newest one before them, and the newest keep_sets sets; binlogs from the oldest kept set on',
      'get_cluster_detail shows the policy, its last run and the restorable window',
    ],
    fields: {
      full_every_hours: 'hours between full backups (default 24)',
      window: 'daily window HH:MM:SS-HH:MM:SS (manager local time) a backup may start in (default all day)',
      keep_days: 'point-in-time restore stays possible to any moment of the last keep_days days',
      keep_sets: 'the newest keep_sets full backups are kept',
      storage_name: 'backup storage of the policy\'s backups (default: the first registered)',
      drill_every_days: 'run a restore drill (run_restore_drill) once every N days, on the drill machines (docs/restore-drills.md)',
      drill_storage_iplists: 'machines of the scheduled drills\' scratch storage nodes',
      drill_computer_iplists: 'machines of the scheduled drills\' scratch compute node',
    },
  },
  delete_backup_policy: {
    summary: 'Stop backing up a cluster on a schedule; its backup sets and binlogs stay (beyond the spec).',
  },
  run_restore_drill: {
    summary: 'Restore a backup set into a scratch cluster, check its tables against the figures recorded at backup time, measure RTO and RPO, delete the scratch cluster (beyond the spec).',
    notes: [
      'the scratch cluster has the source\'s shard count and options, is marked as the drill\'s scratch, and is deleted whatever the outcome',
      'a drill whose tables differ from what was recorded ends failed with DATA_CHECK_FAILED; get_cluster_detail shows the last drill either way',
      'docs/restore-drills.md: what a drill costs, its metrics and alerts',
    ],
    fields: {
      cluster_id: 'the cluster whose backups are drilled',
      storage_iplists: 'machines of the scratch cluster\'s storage nodes',
      computer_iplists: 'machines of the scratch cluster\'s compute node',
      nodes: 'storage nodes per shard of the scratch cluster (default 3)',
      backup_id: 'the backup set to check (default: the newest with recorded checksums)',
      point_in_time: '1: restore the set before backup_id and replay the archived binlogs up to backup_id\'s point',
    },
  },
  cancel_job: {
    summary: 'Stop a job (beyond the spec): a waiting job never runs; a running one stops at its next step boundary and rolls back what it created.',
    notes: ['the canceled job ends failed with CANCELED (2004)', 'a job that already ended is refused (CONFLICT)'],
    fields: { job_id: 'the job to stop' },
  },
  set_noswitch: {
    summary: 'Suspend automatic failover of a shard (or every shard of a cluster) for a while.',
    notes: ['timeout is required with type 1', 'without shard_id: every shard the cluster has now'],
    fields: { type: '1 = open a window of timeout seconds, 0 = close it now', shard_id: 'only this shard (default: every shard of the cluster)' },
  },
  create_backup_storage: {
    summary: 'Register a backup storage: a directory on a host whose kcm agent stores and serves backups (beyond the spec).',
    notes: ['the agent at hostaddr:port must answer and the directory must be writable (s3: the bucket must answer and take a probe object)', 'full backups go to the storage registered first'],
    fields: { name: 'unique name of the storage', stype: 'fs (a directory on the host) or s3 (an S3-compatible bucket the host\'s agent writes to, docs/backup-s3.md)', hostaddr: 'host of the storage (s3: of the agent that writes to the bucket)', port: "port of the storage host's kcm agent", path: 'fs: directory on the host that holds the backups; s3: directory where the agent spools uploads', endpoint: 's3: http(s)://host[:port] of the S3-compatible service', bucket: 's3: the bucket (must exist)', prefix: 's3: key prefix inside the bucket (default none)', region: 's3: default us-east-1', access_key_id: 's3: access key id', secret_access_key: 's3: secret key, sealed before it is stored, never shown', encryption: 'on (default): every object sealed at its source with its own key (docs/backup-encryption.md); off: stored in clear' },
  },
  delete_backup_storage: {
    summary: 'Forget a backup storage that holds no backup set (beyond the spec).',
    fields: { name: 'name of the storage' },
  },
  rotate_backup_key: {
    summary: 'A new key-encryption key for a storage\'s new backup objects; old objects keep theirs (beyond the spec).',
    notes: [
      'old keys stay and still open the objects they wrap; retire one with retire_kek_id once nothing kept needs it',
      'retiring the active key, or one a kept backup set or archived binlog needs, is refused (CONFLICT)',
      'a storage with encryption off has no key to rotate (CONFLICT)',
    ],
    fields: { name: 'name of the storage', retire_kek_id: 'retire this old key instead of rotating' },
  },
  create_token: {
    summary: 'Make an Emit token with a role; the reply carries the token once, kcm keeps only its SHA-256 (beyond the spec).',
    notes: ['names are unique', 'roles: viewer (queries), operator (plus machine and cluster jobs), admin (plus raft_mission, backup storage, tokens, audit)'],
    fields: { name: 'name of the token (shown in job records and the audit trail)', role: 'viewer, operator or admin', token_sha256: 'SHA-256 of a token you made yourself (then the reply carries no token)' },
  },
  delete_token: { summary: 'Delete an Emit token made by create_token (beyond the spec).', fields: { name: 'name of the token' } },
  list_tokens: { summary: 'List Emit tokens: names and roles, never tokens or hashes (beyond the spec).' },
  get_audit: {
    summary: 'List the audit trail: who sent which mutating request, when and from where (beyond the spec).',
    fields: { since: 'first record number to list (default: the newest records)', limit: 'most records to list, 1-10000 (default 100)' },
  },
  list_jobs: {
    summary: 'List the newest jobs with their status, progress and error (beyond the spec).',
    notes: ['newest first; unfinished jobs and the newest finished ones are kept (finishedJobsKept)', 'elapsed_ms: from submission to its end, or to now while it has not ended'],
    fields: { limit: 'most jobs to list, 1-1000 (default 50)' },
  },
};

function describeFields(shape: Record<string, Parameters<typeof fieldFacts>[0]>, overrides: Record<string, string>): ParaDescription[] {
  return Object.entries(shape).map(([name, schema]) => {
    const facts = fieldFacts(schema);
    const out: ParaDescription = {
      name,
      required: facts.required,
      description: overrides[name] ?? FIELD_DOCS[name] ?? '',
      rule: facts.rule,
    };
    if (facts.defaultValue !== undefined) out.default = facts.defaultValue;
    if (facts.items) out.items = describeFields(facts.items, overrides);
    return out;
  });
}

export function describeJob(jobType: JobType): JobDescription;
export function describeJob(sent: string): JobDescription | undefined;
export function describeJob(sent: string): JobDescription | undefined {
  const jobType = canonicalJobType(sent);
  if (jobType === undefined) return undefined;
  const doc = JOB_DOCS[jobType];
  return {
    jobType,
    aliases: Object.keys(JOB_TYPE_ALIASES).filter((alias) => JOB_TYPE_ALIASES[alias] === jobType),
    mode: JOB_MODES[jobType],
    summary: doc.summary,
    paras: describeFields(objectShapeOf(PARAS_SCHEMAS[jobType]) ?? {}, doc.fields ?? {}),
    notes: doc.notes ?? [],
  };
}
