// The numbering of the metadata state machine's commands.
//
// Numbering is append-only: a command's number is written into the Raft log and read back
// by every future version of kcm, so never renumber or reuse one; add new kinds at the end.
// Each domain of the replicated state declares its commands beside its apply function
// (machines.ts, jobs.ts, clusters.ts, ...) on these numbers; commands.ts gathers them into
// what one log entry carries and encodes it.

export const CommandKind = {
  MachineRegistered: 1,
  MachineRemoved: 2,
  MachineStatusSet: 3,
  JobSubmitted: 4,
  JobStarted: 5,
  JobStepDone: 6,
  JobProgress: 7,
  JobFinished: 8,
  // 9, 10 and 11 are retired: PortsAllocated, PortsReleased and MachineFactsRecorded were
  // never proposed (ports are taken and returned inside ClusterCreated, InstancesPlaced and
  // InstancesRemoved; facts come with MachineRegistered). An entry with one of them stops
  // apply as an unknown kind (meta/apply-stop.ts). Never reuse these numbers.
  ClusterCreated: 12,
  InstancesPlaced: 13,
  InstancesRemoved: 14,
  ClusterStatusSet: 15,
  ClusterDeleted: 16,
  CommandBatch: 17,
  RollbackRecorded: 18,
  RollbackInstancesRemoved: 19,
  // Shard high availability (meta/shard-ha.ts) and no-switch windows (meta/noswitch.ts).
  ShardMasterChanged: 20,
  NodeFenceSet: 21,
  NoSwitchSet: 22,
  // Backup storage and full backups (meta/backup.ts).
  BackupStorageCreated: 23,
  BackupStorageDeleted: 24,
  BackupSetRecorded: 25,
  // Continuous binlog archiving for point-in-time restore (meta/binlog-archive.ts).
  BinlogArchived: 26,
  // Logical backups (meta/logical-backups.ts).
  LogicalBackupScheduled: 27,
  LogicalBackupRunClaimed: 28,
  LogicalBackupRunFinished: 29,
  // Emit tokens (meta/tokens.ts).
  TokenCreated: 30,
  TokenDeleted: 31,
  // cancel_job (meta/jobs.ts applyJobCancelRequested).
  JobCancelRequested: 32,
  // rotate_cluster_passwords (meta/password-rotation.ts).
  PasswordRotationStarted: 33,
  PasswordRotationApplied: 34,
  PasswordRotationFinished: 35,
  // Host facts measured by the leader's host-facts refresher (meta/machines.ts).
  MachineFactsMeasured: 36,
  // Engine versions of a cluster's instances (meta/engine-versions.ts).
  EngineVersionsRecorded: 37,
  // Backup policies and retention (meta/backup-policies.ts).
  BackupPolicySet: 38,
  BackupPolicyRemoved: 39,
  BackupPolicyRunClaimed: 40,
  BackupPolicyRunSubmitted: 41,
  BackupsExpired: 42,
  BackupDeletionsDone: 43,
  // Key-encryption keys of backup storages (meta/backup-keys.ts).
  BackupKekAdded: 44,
  BackupKekRetired: 45,
  // Restore drills: their outcomes and the policies' scheduled drills (meta/restore-drills.ts).
  RestoreDrillRecorded: 46,
  RestoreDrillRunClaimed: 47,
  RestoreDrillRunSubmitted: 48,
} as const;
export type CommandKind = (typeof CommandKind)[keyof typeof CommandKind];

/** What every command carries: its number, and when it was proposed. */
export interface CommandBase<K extends CommandKind> {
  kind: K;
  /** Proposer's wall clock (ms), for display and generated names only; never for ordering. */
  at: number;
}
