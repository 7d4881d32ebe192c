// Replicated commands of the metadata state machine: what one Raft log entry carries, and
// its encoding. The numbering (append-only) is command-numbers.ts.
//
// Everything a command needs that is not derivable from the replicated state (wall time,
// facts the proposer measured) travels inside the command, so apply stays deterministic.

import type { ArchivedBinlogRecord, BackupSetRecord, BackupStorageRecord, ClusterAccountRole, ClusterAccounts, ClusterOptions, ClusterStatus, HostFacts, JobResultRecord, MachineRegistration, MachineType, NodeStats, PendingRollbackRecord } from './state';
import type { ObjectType, Role } from '@kcm/protocol';
import type { LogicalBackupPart } from './logical-backup-records';
import type { AuditRecord } from '../audit/chain';
import { CommandKind, type CommandBase } from './command-numbers';

export { CommandKind } from './command-numbers';
export type { CommandBase } from './command-numbers';

export interface MachineRegistered extends CommandBase<typeof CommandKind.MachineRegistered>, MachineRegistration {}

export interface MachineRemoved extends CommandBase<typeof CommandKind.MachineRemoved> {
  hostaddr: string;
  machineType: MachineType;
}

export interface MachineStatusSet extends CommandBase<typeof CommandKind.MachineStatusSet> {
  hostaddr: string;
  nodeStats: NodeStats;
  /** Who moved it: an operator's set_machine or the leader's health monitor. */
  reason: 'operator' | 'health';
}

/**
 * What a host's agent measured, when it differs enough from what is recorded (see the
 * host-facts refresher): recorded on every machine record of the host, each keeping the
 * free space of the directories its own registration names. The measuring leader's clock
 * is `at`, kept as the facts' measuredAt. Refused (NOT_FOUND) for a host no longer registered.
 */
export interface MachineFactsMeasured extends CommandBase<typeof CommandKind.MachineFactsMeasured> {
  hostaddr: string;
  facts: Omit<HostFacts, 'measuredAt'>;
}

export interface JobSubmitted extends CommandBase<typeof CommandKind.JobSubmitted> {
  jobType: string;
  sentJobType: string;
  paras: Record<string, unknown>;
  /** Client idempotency key: the same key yields the same job, never a second one. */
  requestId: string | null;
  /**
   * With a request id: requestDigest(jobType, paras as validated, before any name was
   * resolved to an id), from the proposer. The same key with another digest is CONFLICT.
   * Absent in entries written before: such a submission matches whatever reuses its key.
   */
  requestDigest?: string;
  /** Jobs with the same lock key (e.g. `cluster:7`) run one at a time in submission order. */
  lockKey: string | null;
  /**
   * The job's steps, named by the submitter. When given and no unfinished job holds the
   * lock key, the job is runnable at once and this entry also starts it (status ongoing,
   * as JobStarted would), saving the runner a commit; otherwise it waits in started and
   * the runner commits JobStarted when its turn comes. Absent in entries written before.
   */
  stepNames?: string[];
  /**
   * The leader's maxJobsPerCluster: with a `cluster:` lock key, refused (OVERLOADED) when
   * that many unfinished jobs already hold it. Carried in the entry so every member reaches
   * the same verdict. Absent (internal jobs such as failovers, older entries): no limit.
   */
  maxJobsPerLock?: number;
  /** The submitter's token name (JobRecord.submittedBy); absent for the leader's own jobs. */
  submittedBy?: string;
  /**
   * The submission's audit record, numbered and chained by the leader (audit/chain.ts).
   * Apply refuses the whole submission when it does not follow the chain (meta/audit.ts).
   * Absent on the leader's own jobs and on entries written before the audit trail.
   */
  audit?: AuditRecord;
}

export interface JobStarted extends CommandBase<typeof CommandKind.JobStarted> {
  jobId: string;
  stepNames: string[];
}

export interface JobStepDone extends CommandBase<typeof CommandKind.JobStepDone> {
  jobId: string;
  step: number;
  output: unknown;
}

export interface JobProgress extends CommandBase<typeof CommandKind.JobProgress> {
  jobId: string;
  step: number;
  unitsDone: number;
  unitsTotal: number;
}

export interface JobFinished extends CommandBase<typeof CommandKind.JobFinished> {
  jobId: string;
  outcome: JobResultRecord;
  /**
   * How many finished jobs the history keeps, this one included: the oldest finished ones
   * beyond it are dropped in the same apply. Chosen by the leader that proposes (its
   * config) and carried here, so every member drops exactly the same jobs whatever its
   * own config says. Absent (entries written before the limit existed): nothing is dropped.
   */
  keepFinished?: number;
}

/** Where the proposer wants new instances: one host per storage node or compute node. */
export interface InstancePlacement {
  /** New shards, each with the hosts of its nodes in order (the first becomes the master). */
  newShards: { hosts: string[] }[];
  /** Nodes added to existing shards of the cluster. */
  newNodes: { shardId: string; hostaddr: string }[];
  /** Hosts of new compute nodes. */
  newComps: string[];
}

/**
 * A new cluster with its first shards and compute nodes. Ids, names, ports and server ids
 * are assigned in apply from the replicated state; all or nothing.
 */
export interface ClusterCreated extends CommandBase<typeof CommandKind.ClusterCreated> {
  jobId: string;
  nickName: string;
  options: ClusterOptions;
  /** Generated by the proposing job; kept in the replicated state, never logged. */
  accounts: ClusterAccounts;
  placement: InstancePlacement;
}

/** More shards, nodes or compute nodes in an existing cluster (add_shards, add_nodes, add_comps). */
export interface InstancesPlaced extends CommandBase<typeof CommandKind.InstancesPlaced> {
  clusterId: string;
  jobId: string;
  placement: InstancePlacement;
}

/** Forgets instances that were removed from their hosts and returns their ports. */
export interface InstancesRemoved extends CommandBase<typeof CommandKind.InstancesRemoved> {
  clusterId: string;
  nodeIds: string[];
  compIds: string[];
  /** Shards to forget as a whole (their nodes too). */
  shardIds: string[];
}

export interface ClusterStatusSet extends CommandBase<typeof CommandKind.ClusterStatusSet> {
  clusterId: string;
  status: ClusterStatus;
}

/** Forgets the cluster and returns the ports of all its instances. */
export interface ClusterDeleted extends CommandBase<typeof CommandKind.ClusterDeleted> {
  clusterId: string;
}

/**
 * A failed job's rollback: every instance it has to remove from its host (all of them,
 * also those already removed: RollbackInstancesRemoved follows for those), kept until each
 * is gone. Recording it again (the job's rollback re-run by a new leader) replaces the record.
 */
export interface RollbackRecorded extends CommandBase<typeof CommandKind.RollbackRecorded>, Omit<PendingRollbackRecord, 'recordedAt'> {}

/**
 * Instances of a pending rollback that are gone from their hosts: forgotten, their ports
 * returned. When the last one goes, the job's shards (or its whole cluster) go too and
 * the record is dropped. Removing what is already forgotten is a no-op.
 */
export interface RollbackInstancesRemoved extends CommandBase<typeof CommandKind.RollbackInstancesRemoved> {
  jobId: string;
  nodeIds: string[];
  compIds: string[];
}

/**
 * A shard's master moved to another of its nodes (failover, switchover). With
 * `fenceOldMaster`, the old master is recorded fenced in the same apply: no moment exists
 * where the metadata names a new master and the old one is not fenced.
 */
export interface ShardMasterChanged extends CommandBase<typeof CommandKind.ShardMasterChanged> {
  clusterId: string;
  shardId: string;
  masterNodeId: string;
  /** The master this replaces; refused when the shard's master is another one by now. */
  previousMasterNodeId: string;
  jobId: string;
  fenceOldMaster: boolean;
  /** Why it is fenced (shown in get_cluster_detail). */
  fenceReason?: string;
  /** The new master's GTID position at promotion (see NodeFence.successorGtid). */
  successorGtid?: string;
}

/**
 * Sets or clears a node's fence: a fenced node is never started writable, never given
 * client traffic, and left alone by the instance reconciler until it rejoins its shard.
 */
export interface NodeFenceSet extends CommandBase<typeof CommandKind.NodeFenceSet> {
  clusterId: string;
  shardId: string;
  nodeId: string;
  fenced: boolean;
  jobId: string;
  reason: string;
}

/**
 * Opens (untilMs set) or closes (null) the no-switch window of shards of one cluster: no
 * automatic failover of those shards before untilMs (the proposer's clock + the timeout,
 * carried here so every member stores the same deadline). A shard that is gone is skipped.
 */
export interface NoSwitchSet extends CommandBase<typeof CommandKind.NoSwitchSet> {
  clusterId: string;
  shardIds: string[];
  untilMs: number | null;
}

/** Registers a backup storage (create_backup_storage); names are unique. */
export interface BackupStorageCreated extends CommandBase<typeof CommandKind.BackupStorageCreated>, Omit<BackupStorageRecord, 'createdAt'> {}

/** Forgets a backup storage that holds no recorded backup set (delete_backup_storage). */
export interface BackupStorageDeleted extends CommandBase<typeof CommandKind.BackupStorageDeleted> {
  name: string;
}

/** A finished full backup; recording the same set id again is a no-op (a resumed job). */
export interface BackupSetRecorded extends CommandBase<typeof CommandKind.BackupSetRecorded> {
  set: BackupSetRecord;
}

/** A shard master's closed binlog is on backup storage; the same key again is a no-op (a repeated round). */
export interface BinlogArchived extends CommandBase<typeof CommandKind.BinlogArchived> {
  clusterId: string;
  shardId: string;
  file: ArchivedBinlogRecord;
}

/** logical_backup: daily schedules of tables, schemas or databases of a cluster (added or replaced). */
export interface LogicalBackupScheduled extends CommandBase<typeof CommandKind.LogicalBackupScheduled> {
  clusterId: string;
  jobId: string;
  objectType: ObjectType;
  entries: { dbTable: string; window: string; startSecond: number; endSecond: number }[];
}

/** The leader's scheduler takes the run of one schedule's window (windowDay: the local date it opened). */
export interface LogicalBackupRunClaimed extends CommandBase<typeof CommandKind.LogicalBackupRunClaimed> {
  scheduleKey: string;
  windowDay: string;
  claimedBy: string;
}

/** A claimed run ended: its backup set when it succeeded, why not otherwise. */
export interface LogicalBackupRunFinished extends CommandBase<typeof CommandKind.LogicalBackupRunFinished> {
  scheduleKey: string;
  runId: string;
  ok: boolean;
  error?: string;
  set?: { takenAt: number; parts: LogicalBackupPart[] };
}

/** An Emit token made by create_token: its digest only; names are unique, and so are digests. */
export interface TokenCreated extends CommandBase<typeof CommandKind.TokenCreated> {
  name: string;
  role: Role;
  sha256: string;
  createdBy: string;
}

export interface TokenDeleted extends CommandBase<typeof CommandKind.TokenDeleted> {
  name: string;
}

/**
 * Stop a job: one still waiting in its run queue (never started) ends failed with CANCELED
 * in this apply; a running one is marked, and its runner stops at the next step boundary,
 * rolls back, and finishes it failed with CANCELED.
 */
export interface JobCancelRequested extends CommandBase<typeof CommandKind.JobCancelRequested> {
  jobId: string;
  /** The token name of whoever asked (audit and the job's error), or null. */
  by: string | null;
  /** As in JobFinished: the finished-job history the leader keeps. */
  keepFinished?: number;
}

/**
 * Records a rotation's new (sealed) passwords before any engine is touched. With a rotation
 * of another job left unfinished, that one is taken over as it is (its passwords, what is
 * applied) and `accounts` is ignored: its passwords may already be on some nodes.
 */
export interface PasswordRotationStarted extends CommandBase<typeof CommandKind.PasswordRotationStarted> {
  clusterId: string;
  jobId: string;
  accounts: Partial<ClusterAccounts>;
}

/** Every node of the cluster accepts the rotation's new password of these roles. */
export interface PasswordRotationApplied extends CommandBase<typeof CommandKind.PasswordRotationApplied> {
  clusterId: string;
  jobId: string;
  roles: ClusterAccountRole[];
}

/** The rotation's passwords become the cluster's accounts; the rotation record goes. */
export interface PasswordRotationFinished extends CommandBase<typeof CommandKind.PasswordRotationFinished> {
  clusterId: string;
  jobId: string;
}

export type Command =
  | PasswordRotationStarted
  | PasswordRotationApplied
  | PasswordRotationFinished
  | JobCancelRequested
  | TokenCreated
  | TokenDeleted
  | MachineRegistered
  | MachineRemoved
  | MachineStatusSet
  | MachineFactsMeasured
  | JobSubmitted
  | JobStarted
  | JobStepDone
  | JobProgress
  | JobFinished
  | ClusterCreated
  | InstancesPlaced
  | InstancesRemoved
  | ClusterStatusSet
  | ClusterDeleted
  | RollbackRecorded
  | RollbackInstancesRemoved
  | ShardMasterChanged
  | NodeFenceSet
  | NoSwitchSet
  | BackupStorageCreated
  | BackupStorageDeleted
  | BackupSetRecorded
  | BinlogArchived
  | LogicalBackupScheduled
  | LogicalBackupRunClaimed
  | LogicalBackupRunFinished;

/**
 * Several commands in one log entry, applied in order exactly as if each had its own entry,
 * each with its own outcome. The leader packs the commands proposed in one turn of its
 * event loop (RaftMetaStore): under load, most of a log entry's cost (its LevelDB put on
 * every member, its replication, its proposal bookkeeping) does not grow with its size.
 */
export interface CommandBatch extends CommandBase<typeof CommandKind.CommandBatch> {
  commands: Command[];
}

/** What one Raft log entry carries. */
export type LoggedCommand = Command | CommandBatch;

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

export function encodeCommand(cmd: LoggedCommand): Uint8Array {
  return textEncoder.encode(JSON.stringify(cmd));
}

/**
 * One entry holding already-JSON-encoded commands, without encoding them again: a single
 * command as itself, several as a CommandBatch.
 */
export function encodeCommands(at: number, commandsJson: readonly string[]): Uint8Array {
  if (commandsJson.length === 1) return textEncoder.encode(commandsJson[0]);
  return textEncoder.encode(`{"kind":${CommandKind.CommandBatch},"at":${at},"commands":[${commandsJson.join(',')}]}`);
}

export function decodeCommand(data: Uint8Array): LoggedCommand {
  return JSON.parse(textDecoder.decode(data)) as LoggedCommand;
}
