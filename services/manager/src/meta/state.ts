// The replicated metadata: plain JSON-serialisable records, so a snapshot is one image.
// Every Record keyed by an id, a host address or a request id is a Dict (no prototype):
// made with dict() here and in apply, and made again by withDicts() after JSON.parse.

import type { Role } from '@kcm/protocol';
import { dict, type Dict } from './dict';
import { emptyAuditState, type AuditState } from './audit';
import { backupPolicyStateWithDicts, emptyBackupPolicyState, type BackupPolicyState } from './backup-policy-records';
import { emptyLogicalBackupState, logicalBackupStateWithDicts, type LogicalBackupState } from './logical-backup-records';
import type { ClusterDrills } from './restore-drill-records';

export type MachineType = 'storage' | 'computer';
export type NodeStats = 'running' | 'dead';

/**
 * What the host's agent reported when the machine was registered, or measured since when it
 * changed enough to matter (the leader's host-facts refresher): placement reads these.
 */
export interface HostFacts {
  cores: number;
  memoryMb: number;
  /** Free bytes of each directory the registration names. */
  freeDiskBytes: Dict<number>;
  mariadbInstalled: boolean;
  postgresInstalled: boolean;
  /**
   * When the leader measured them (its clock, ms), for facts kept current by the host-facts
   * refresher (MachineFactsMeasured); absent for the facts create_machine recorded.
   */
  measuredAt?: number;
}

/** What a registration states about a machine (create_machine's paras, parsed, plus measured facts). */
export interface MachineRegistration {
  hostaddr: string;
  machineType: MachineType;
  portLow: number;
  portHigh: number;
  rackId: string;
  datadir: string;
  logdir: string;
  walLogDir: string;
  compDatadir: string;
  totalMemMb: number;
  totalCpuCores: number;
  facts: HostFacts | null;
}

export interface MachineRecord extends MachineRegistration {
  nodeStats: NodeStats;
  /** Who set nodeStats last: the health monitor revives only machines it marked dead itself. */
  nodeStatsSetBy: 'operator' | 'health';
  registeredAt: number;
}

export type JobStatus = 'started' | 'ongoing' | 'done' | 'failed';

export interface JobResultRecord {
  ok: boolean;
  errorCode: number;
  errorInfo: string;
  attachment: Record<string, unknown> | null;
}

export interface JobProgressRecord {
  step: number;
  unitsDone: number;
  unitsTotal: number;
}

export interface JobRecord {
  id: string;
  jobType: string;
  sentJobType: string;
  paras: Record<string, unknown>;
  requestId: string | null;
  /**
   * The submission's requestDigest (see JobSubmitted), so a reuse of the request id for
   * another request is told apart from a retry. Absent on jobs recorded before it existed.
   */
  requestDigest?: string;
  lockKey: string | null;
  status: JobStatus;
  submittedAt: number;
  finishedAt: number | null;
  /** Filled when the runner starts the job; a resumed job keeps them. */
  stepNames: string[];
  /** Output of each finished step, by step number; a step never runs again once here. */
  stepOutputs: Dict<unknown>;
  progress: JobProgressRecord | null;
  result: JobResultRecord | null;
  /**
   * The token name of whoever submitted it (the identity the receiving member
   * authenticated). Absent on jobs the leader submits itself (shard_failover, ...) and on
   * jobs recorded before identities existed.
   */
  submittedBy?: string;
  /** Set by cancel_job while the job runs: its runner stops at the next step boundary (meta/jobs.ts). */
  cancelRequested?: { by: string | null; at: number };
}

export interface PortAllocation {
  owner: string;
  machineType: MachineType;
}

export type ClusterStatus = 'creating' | 'ready' | 'deleting';

/**
 * A database account as the replicated metadata keeps it (the source of truth): the password
 * only sealed with the managers' secrets key (secrets/secret-box.ts); open it with
 * secrets/accounts.ts where an agent call needs it.
 */
export interface StoredAccount {
  user: string;
  sealedPassword: string;
}

export interface ClusterAccounts<A = StoredAccount> {
  /** The agents' own account on every storage node (localhost only); shared by a shard's copies. */
  admin: A;
  replication: A;
  /** DDL and DML on the cluster's databases only; what compute nodes use to reach the shards. */
  storage: A;
  /** The application's account on every compute node. */
  computer: A;
}

/** The create_cluster paras every later instance of the cluster is built with. */
export interface ClusterOptions {
  haMode: 'rbr';
  maxStorageSizeGb: number;
  maxConnections: number;
  cpuCores: number;
  cpuLimitNode: 'share' | 'quota';
  innodbSizeMb: number;
  rocksdbBlockCacheSizeMb: number;
  dbcfg: 0 | 1;
  fullsyncLevel: number;
  /**
   * Engine versions the cluster's next instances get (create_cluster's storage_version and
   * computer_version, or the manager's defaults; upgrade_cluster moves them). '' or absent:
   * each agent's default (clusters created before engines were versioned).
   */
  storageVersion?: string;
  computerVersion?: string;
}

export interface StorageNodeRecord {
  id: string;
  hostaddr: string;
  port: number;
  /** MariaDB server_id: unique within the shard (the node id, unique everywhere). */
  serverId: number;
  /** The machine's directories when the node was placed; the instance lives in <dir>/<port>. */
  datadir: string;
  logdir: string;
  walLogDir: string;
  /** The add_shards/add_nodes job that placed it (absent for a create_cluster's own nodes). */
  placedByJob?: string;
  /**
   * Set when the node was a master that a failover replaced: it must be kept read-only (or
   * stopped) and is left out of routing and restarts until it rejoins as a standby.
   */
  fenced?: NodeFence;
  /** The MariaDB version it was last measured running (meta/engine-versions.ts); absent = unknown. */
  engineVersion?: string;
}

export interface NodeFence {
  since: number;
  byJob: string;
  reason: string;
  /**
   * The new master's GTID position when it was promoted: what this node has beyond it is
   * errant (never acknowledged through the new master) and is discarded when it rejoins.
   */
  successorGtid?: string;
}

export interface ShardRecord {
  id: string;
  name: string;
  /** The node that is (or is to become) the shard's master. */
  masterNodeId: string;
  /** When masterNodeId last changed (a failover or switch committed it; ms since the epoch); absent before any change. */
  masterSince?: number;
  nodes: Dict<StorageNodeRecord>;
  /** The add_shards job that placed it (absent for a create_cluster's own shards). */
  placedByJob?: string;
  /**
   * End of the shard's no-switch window (ms since the epoch, set_noswitch): no automatic
   * failover before it. Absent = none. Read it through noSwitchUntil (meta/noswitch.ts).
   */
  noSwitchUntil?: number;
}

export interface CompRecord {
  id: string;
  name: string;
  hostaddr: string;
  port: number;
  compDatadir: string;
  /** The add_comps job that placed it (absent for a create_cluster's own compute nodes). */
  placedByJob?: string;
  /** The PostgreSQL version it was last measured running (meta/engine-versions.ts); absent = unknown. */
  engineVersion?: string;
}

export interface ClusterRecord {
  id: string;
  name: string;
  nickName: string;
  status: ClusterStatus;
  /** The create_cluster job that placed it: a re-run of that job's step finds it by this. */
  createdByJob: string;
  createdAt: number;
  options: ClusterOptions;
  accounts: ClusterAccounts;
  shards: Dict<ShardRecord>;
  comps: Dict<CompRecord>;
  /** A rotate_cluster_passwords under way, or one that failed part-way (finished by the next one). */
  passwordRotation?: PasswordRotationRecord;
  /** Present on a restore drill's scratch cluster: whose drill it is (deleted when the drill ends). */
  scratchOfDrill?: RestoreDrillScratch;
}

/** What marks a cluster as a restore drill's scratch (jobs/restore-drill). */
export interface RestoreDrillScratch {
  drillJobId: string;
  sourceClusterId: string;
}

export type ClusterAccountRole = keyof ClusterAccounts;

/**
 * New passwords recorded (sealed) before any engine is touched, so whoever leads next
 * knows them. `applied` lists the roles every node of the cluster accepts the new password
 * for: from then on kcm itself uses it (secrets/live-accounts.ts); the others stay
 * `accounts` until the rotation ends, when the new ones become `accounts`.
 */
export interface PasswordRotationRecord {
  jobId: string;
  accounts: Partial<ClusterAccounts>;
  applied: ClusterAccountRole[];
  startedAt: number;
}

/** An instance a failed job's rollback could not remove from its host: it still runs, or its files remain. */
export interface PendingInstance {
  kind: 'storage node' | 'compute node';
  id: string;
  hostaddr: string;
  port: number;
  /** A compute node's comp_datadir, so its data dir is found even without the agent's record. */
  compDatadir?: string;
}

/**
 * A rollback that could not finish (a host's agent did not answer): what is left to remove.
 * The instances stay in their cluster's record, so their ports stay taken until each is
 * really gone; the leader's rollback finisher removes them when their agents answer again.
 */
export interface PendingRollbackRecord {
  jobId: string;
  jobType: string;
  clusterId: string;
  instances: PendingInstance[];
  /** Shards the job placed: forgotten as a whole once their last node is gone (add_shards). */
  shardIds: string[];
  /** The job created the cluster: it is forgotten once its last instance is gone. */
  deleteCluster: boolean;
  /** Why the removal failed, as first recorded (shown to operators). */
  reason: string;
  recordedAt: number;
}

/** Monotonic id counters of the cluster domain; an id is never reused, even after a delete. */
export interface ClusterCounters {
  cluster: number;
  shard: number;
  node: number;
  comp: number;
}

export interface MetaState {
  /** Keyed by `${hostaddr}/${machineType}`: one host may be registered as both types. */
  machines: Dict<MachineRecord>;
  jobs: Dict<JobRecord>;
  /**
   * The jobs not finished yet, as queues in submission order: one per lock key, and one of
   * its own for each job without a key (under `#<job id>`; no lock key starts with '#').
   * The head of each queue is what the runner may run; a submission learns whether its key
   * is held, and the runner what to start, without scanning every unfinished job.
   */
  runQueues: Dict<string[]>;
  /** Ids of the finished jobs still kept, by finish time then id (JobFinished drops from the front). */
  finishedJobs: string[];
  /** Idempotency keys to the job they created. */
  requestIds: Dict<string>;
  /** hostaddr -> port -> allocation: ports are unique per host across both machine types. */
  ports: Dict<Dict<PortAllocation>>;
  counters: { job: number };
  clusters: Dict<ClusterRecord>;
  /** Top-level (not inside `counters`) so that restoring an older snapshot keeps them. */
  clusterCounters: ClusterCounters;
  /** Rollbacks that could not finish, by the id of the job that failed (meta/rollbacks.ts). */
  pendingRollbacks: Record<string, PendingRollbackRecord>;
  /** Archived binlogs of every shard, by `<cluster id>/<shard id>` (meta/binlog-archive.ts). */
  binlogArchives: Dict<ShardBinlogArchive>;
  /** Registered backup storages, by name (create_backup_storage; meta/backup.ts). */
  backupStorages: Dict<BackupStorageRecord>;
  /** Finished full backups (manual_backup_cluster), by backup set id. */
  backupSets: Dict<BackupSetRecord>;
  /** Daily logical backup schedules, their runs and backup sets (meta/logical-backups.ts). */
  logicalBackups: LogicalBackupState;
  /** Backup policies, their runs, and the objects expiry still has to delete (meta/backup-policies.ts). */
  backupPolicies: BackupPolicyState;
  /** By cluster id: its last restore drill and last passing one (meta/restore-drills.ts); absent until the first drill. */
  restoreDrills?: Dict<ClusterDrills>;
  /** Emit tokens made by create_token, by name: only their SHA-256 (meta/tokens.ts). */
  tokens: Dict<TokenRecord>;
  /** The audit trail's tip and newest records (meta/audit.ts). */
  audit: AuditState;
}

/** An Emit token in the replicated state: its digest, never the token. */
export interface TokenRecord {
  name: string;
  role: Role;
  /** Hex SHA-256 of the token's text. */
  sha256: string;
  createdAt: number;
  /** The token name of whoever created it. */
  createdBy: string;
}

/** An s3 storage's bucket (docs/backup-s3.md); the secret key only sealed. */
export interface S3StorageRecord {
  endpoint: string;
  bucket: string;
  /** Key prefix in the bucket; '' for none. */
  prefix: string;
  region: string;
  accessKeyId: string;
  /** secrets/secret-box.ts: opened only for the agent's Open call, never logged or returned. */
  sealedSecretAccessKey: string;
}

/** Where backup sets are kept; get_backup_storage reports {hostaddr, name, port, stype}. */
export interface BackupStorageRecord {
  name: string;
  /** `fs`: a directory on hostaddr, served by the agent listening on hostaddr:port; `s3`: a bucket that agent writes to. */
  stype: 'fs' | 's3';
  /** stype s3: the bucket; path is then where that agent spools uploads. */
  s3?: S3StorageRecord;
  hostaddr: string;
  port: number;
  /** The directory on hostaddr (stype fs). */
  path: string;
  createdAt: number;
  /** Encryption at rest (docs/backup-encryption.md); absent: objects are stored in clear. */
  encryption?: StorageEncryption;
}

/** A storage's key-encryption keys: new objects are wrapped with the active one; the others stay for restores until retired. */
export interface StorageEncryption {
  activeKekId: string;
  /** Oldest first; a retired KEK is removed (rotate_backup_key). */
  keks: BackupKekRecord[];
}

export interface BackupKekRecord {
  id: string;
  /** The 32-byte KEK, base64, sealed by the managers' SecretBox (never in clear in the state). */
  sealed: string;
  createdAt: number;
}

/** How a stored object is sealed: its data key, wrapped by the storage's KEK kekId (secrets/backup-keys.ts). */
export interface SealedObjectRef {
  kekId: string;
  wrappedKey: string;
}

/** One stored file of a backup set, with the checksum it was written with. */
export interface BackupObjectRecord {
  key: string;
  bytes: number;
  sha256: string;
}

/** One shard's physical backup (mariabackup --stream) in a backup set. */
export interface ShardBackupRecord extends BackupObjectRecord {
  shardId: string;
  shardName: string;
  /** The GTID position the backup is consistent with. */
  gtidPos: string;
  /** The node it was taken from. */
  sourceHostaddr: string;
  sourcePort: number;
  sourceWasMaster: boolean;
  transferMs: number;
  /** When this shard's backup was stored: it is consistent at gtidPos, reached by then. */
  storedAt: number;
  /** How the object is compressed; absent in sets from before compression (stored as they are). */
  compression?: 'zstd';
  /** Bytes of the mbstream before compression (absent: `bytes`, nothing was compressed). */
  rawBytes?: number;
  /** Sealed at its source (docs/backup-encryption.md); absent: stored in clear. */
  sealed?: SealedObjectRef;
  /**
   * What a restore drill compares (docs/backup-policies.md, "Restore drills"): each user
   * table's rows and CHECKSUM TABLE, read on the source standby held at gtidPos while it was
   * backed up. Absent when the source was the master (nothing holds a master still), in sets
   * from before drills, or when the backup's position was not the held one (checksumsOmitted).
   */
  tableChecksums?: TableChecksumRecord[];
  /** Why tableChecksums is absent, when a standby was the source. */
  checksumsOmitted?: string;
}

/** One user table of a shard at a backup's position. */
export interface TableChecksumRecord {
  database: string;
  table: string;
  rows: number;
  /** CHECKSUM TABLE's figure as text ('' for a table without one). */
  checksum: string;
}

/** A compute node's schema dump (pg_dump --schema-only) of one cluster database. */
export interface CatalogBackupRecord extends BackupObjectRecord {
  database: string;
  compId: string;
  /** 'custom': pg_dump's custom format, which a restore puts back; absent: plain SQL (sets from before it), kept only. */
  format?: 'custom';
}

/**
 * A finished full backup: of a cluster (its shards' physical backups and the compute
 * catalog), or of the metadata (clusterId "-1": one Raft-consistent image of the state).
 */
export interface BackupSetRecord {
  /** The id of the manual_backup_cluster job that took it. */
  id: string;
  clusterId: string;
  storageName: string;
  startedAt: number;
  /** The set is consistent as of its shards' GTID positions; this is when the last was stored. */
  finishedAt: number;
  shards: ShardBackupRecord[];
  catalog: CatalogBackupRecord[];
  /** Metadata backups only: the image and the Raft index it was taken at. */
  metadata?: BackupObjectRecord & { appliedIndex: number };
}

/** One closed binlog file of a shard's master, stored on a backup storage. */
export interface ArchivedBinlogRecord {
  /** Key on the storage. */
  key: string;
  storageName: string;
  /** The file's name on the master that wrote it, and that master. */
  name: string;
  serverId: number;
  hostaddr: string;
  port: number;
  bytes: number;
  sha256: string;
  /** GTID state at the file's start and at its end (the next file's start). */
  startGtidState: string;
  endGtidState: string;
  /** Unix seconds of the file's first and last events. */
  firstEventTime: number;
  lastEventTime: number;
  /** Proposer's clock when it was stored (ms). */
  archivedAt: number;
  /** Sealed on the master's host (docs/backup-encryption.md); absent: stored in clear. */
  sealed?: SealedObjectRef;
}

/**
 * What is archived of one shard: files in archive order. Kept after the cluster is deleted,
 * so a deleted cluster stays restorable to a point in time while its backups exist.
 */
export interface ShardBinlogArchive {
  clusterId: string;
  shardId: string;
  files: ArchivedBinlogRecord[];
}

export function emptyMetaState(): MetaState {
  return {
    machines: dict(),
    jobs: dict(),
    runQueues: dict(),
    finishedJobs: [],
    requestIds: dict(),
    ports: dict(),
    counters: { job: 0 },
    clusters: dict(),
    clusterCounters: { cluster: 0, shard: 0, node: 0, comp: 0 },
    pendingRollbacks: dict(),
    backupStorages: dict(),
    backupSets: dict(),
    binlogArchives: dict(),
    logicalBackups: emptyLogicalBackupState(),
    backupPolicies: emptyBackupPolicyState(),
    tokens: dict(),
    audit: emptyAuditState(),
  };
}

/**
 * The state with every dict of it (and of its jobs, clusters, shards and host ports) made a
 * Dict again, for a state read back from JSON (a snapshot image). Changes it in place.
 */
export function withDicts(state: MetaState): MetaState {
  for (const _ of withDictsInSteps(state));
  return state;
}

/** Members between two yields of withDictsInSteps: a few milliseconds. */
const DICT_MEMBERS_PER_STEP = 1_000;

/**
 * withDicts a step at a time (restoring a 100,000-job image in pieces, snapshot/image.ts).
 * `jobList`, when given, is every record of state.jobs (listing 100,000 of them is a long block).
 */
export function* withDictsInSteps(state: MetaState, jobList?: JobRecord[]): Generator<void, MetaState> {
  let done = 0;
  const counted = (): boolean => ++done % DICT_MEMBERS_PER_STEP === 0;
  state.machines = dict(state.machines);
  for (const m of Object.values(state.machines)) {
    if (m.facts) m.facts.freeDiskBytes = dict(m.facts.freeDiskBytes);
    if (counted()) yield;
  }
  // Copying 100,000 jobs' keys into a new dict is a block of its own: a null-prototype
  // object (as restoreMetaInPieces builds its large objects) already is a dict.
  state.jobs = Object.getPrototypeOf(state.jobs) === null ? state.jobs : dict(state.jobs);
  yield;
  for (const job of jobList ?? Object.values(state.jobs)) {
    job.stepOutputs = dict(job.stepOutputs);
    if (counted()) yield;
  }
  state.runQueues = dict(state.runQueues);
  state.requestIds = dict(state.requestIds);
  state.ports = dict(state.ports);
  for (const host of Object.keys(state.ports)) {
    state.ports[host] = dict(state.ports[host]);
    if (counted()) yield;
  }
  state.clusters = dict(state.clusters);
  for (const cluster of Object.values(state.clusters)) {
    cluster.shards = dict(cluster.shards);
    for (const shard of Object.values(cluster.shards)) shard.nodes = dict(shard.nodes);
    cluster.comps = dict(cluster.comps);
    if (counted()) yield;
  }
  state.pendingRollbacks = dict(state.pendingRollbacks ?? {});
  state.backupStorages = dict(state.backupStorages ?? {});
  state.backupSets = dict(state.backupSets ?? {});
  state.binlogArchives = dict(state.binlogArchives ?? {});
  state.logicalBackups = logicalBackupStateWithDicts(state.logicalBackups);
  state.backupPolicies = backupPolicyStateWithDicts(state.backupPolicies);
  if (state.restoreDrills) state.restoreDrills = dict(state.restoreDrills);
  state.tokens = dict(state.tokens ?? {});
  state.audit = state.audit ?? emptyAuditState();
  return state;
}

/** The run queue a job waits in: its lock key's, or its own when it has none. */
export const runQueueOf = (job: Pick<JobRecord, 'id' | 'lockKey'>): string => job.lockKey ?? `#${job.id}`;

export const machineKey = (hostaddr: string, machineType: MachineType): string => `${hostaddr}/${machineType}`;
