// Replicated commands of the metadata state machine: what one Raft log entry carries, and
// its encoding. The numbering (append-only) is command-numbers.ts.
//
// Everything a command needs that is not derivable from the replicated state (wall time,
// facts the proposer measured) travels inside the command, so apply stays deterministic.

import { CommandKind, type CommandBase } from './command-numbers';
import type { MachineFactsMeasured, MachineRegistered, MachineRemoved, MachineStatusSet } from './machines';
import type { JobCancelRequested, JobFinished, JobProgress, JobStarted, JobStepDone, JobSubmitted } from './jobs';
import type { ClusterCreated, ClusterDeleted, ClusterStatusSet, InstancesPlaced, InstancesRemoved } from './clusters';
import type { RollbackInstancesRemoved, RollbackRecorded } from './rollbacks';
import type { NodeFenceSet, ShardMasterChanged } from './shard-ha';
import type { NoSwitchSet } from './noswitch';
import type { BackupSetRecorded, BackupStorageCreated, BackupStorageDeleted } from './backup';
import type { BackupKekAdded, BackupKekRetired } from './backup-keys';
import type { RestoreDrillRecorded, RestoreDrillRunClaimed, RestoreDrillRunSubmitted } from './restore-drills';
import type { BinlogArchived } from './binlog-archive';
import type { LogicalBackupRunClaimed, LogicalBackupRunFinished, LogicalBackupScheduled } from './logical-backups';
import type { TokenCreated, TokenDeleted } from './tokens';
import type { PasswordRotationApplied, PasswordRotationFinished, PasswordRotationStarted } from './password-rotation';
import type { EngineVersionsRecorded } from './engine-versions';
import type { BackupDeletionsDone, BackupPolicyRemoved, BackupPolicyRunClaimed, BackupPolicyRunSubmitted, BackupPolicySet, BackupsExpired } from './backup-policies';

// Every command type is declared by its domain, beside its apply; they are named here too,
// so that code outside meta/ has one place to take a command from.
export { CommandKind } from './command-numbers';
export type { CommandBase } from './command-numbers';
export type { MachineFactsMeasured, MachineRegistered, MachineRemoved, MachineStatusSet } from './machines';
export type { JobCancelRequested, JobFinished, JobProgress, JobStarted, JobStepDone, JobSubmitted } from './jobs';
export type { ClusterCreated, ClusterDeleted, ClusterStatusSet, InstancePlacement, InstancesPlaced, InstancesRemoved } from './clusters';
export type { RollbackInstancesRemoved, RollbackRecorded } from './rollbacks';
export type { NodeFenceSet, ShardMasterChanged } from './shard-ha';
export type { NoSwitchSet } from './noswitch';
export type { BackupSetRecorded, BackupStorageCreated, BackupStorageDeleted } from './backup';
export type { BackupKekAdded, BackupKekRetired } from './backup-keys';
export type { RestoreDrillRecorded, RestoreDrillRunClaimed, RestoreDrillRunSubmitted } from './restore-drills';
export type { BinlogArchived } from './binlog-archive';
export type { LogicalBackupRunClaimed, LogicalBackupRunFinished, LogicalBackupScheduled } from './logical-backups';
export type { TokenCreated, TokenDeleted } from './tokens';
export type { PasswordRotationApplied, PasswordRotationFinished, PasswordRotationStarted } from './password-rotation';
export type { EngineVersionsRecorded } from './engine-versions';
export type { BackupDeletionsDone, BackupPolicyRemoved, BackupPolicyRunClaimed, BackupPolicyRunSubmitted, BackupPolicySet, BackupsExpired } from './backup-policies';

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
  | LogicalBackupRunFinished
  | EngineVersionsRecorded
  | BackupPolicySet
  | BackupPolicyRemoved
  | BackupPolicyRunClaimed
  | BackupPolicyRunSubmitted
  | BackupsExpired
  | BackupDeletionsDone
  | BackupKekAdded
  | BackupKekRetired
  | RestoreDrillRecorded
  | RestoreDrillRunClaimed
  | RestoreDrillRunSubmitted;

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
