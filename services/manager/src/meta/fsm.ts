// The metadata state machine: one apply switch over the numbered command kinds.

import { applyBinlogArchived } from './binlog-archive';
import { applyEngineVersionsRecorded } from './engine-versions';
import { applyClusterCreated, applyClusterDeleted, applyClusterStatusSet, applyInstancesPlaced, applyInstancesRemoved } from './clusters';
import { CommandKind, type Command, type LoggedCommand } from './commands';
import { applyJobCancelRequested, applyJobFinished, applyJobProgress, applyJobStarted, applyJobStepDone, applyJobSubmitted } from './jobs';
import { applyLogicalBackupRunClaimed, applyLogicalBackupRunFinished, applyLogicalBackupScheduled } from './logical-backups';
import { applyMachineFactsMeasured, applyMachineRegistered, applyMachineRemoved, applyMachineStatusSet } from './machines';
import { applyNoSwitchSet } from './noswitch';
import { applyPasswordRotationApplied, applyPasswordRotationFinished, applyPasswordRotationStarted } from './password-rotation';
import type { ApplyOutcome } from './outcome';
import { UnknownCommandKindError } from './apply-stop';
import { applyRollbackInstancesRemoved, applyRollbackRecorded, dropPendingRollbackOf, dropPendingRollbacksOf } from './rollbacks';
import type { MetaState } from './state';
import { applyNodeFenceSet, applyShardMasterChanged } from './shard-ha';
import { applyTokenCreated, applyTokenDeleted } from './tokens';
import { applyBackupDeletionsDone, applyBackupPolicyRemoved, applyBackupPolicyRunClaimed, applyBackupPolicyRunSubmitted, applyBackupPolicySet, applyBackupsExpired } from './backup-policies';
import { applyBackupSetRecorded, applyBackupStorageCreated, applyBackupStorageDeleted } from './backup';
import { applyBackupKekAdded, applyBackupKekRetired } from './backup-keys';
import { applyRestoreDrillRecorded, applyRestoreDrillRunClaimed, applyRestoreDrillRunSubmitted } from './restore-drills';

/** Every kind applyCommand knows; CommandBatch only as a whole entry, never inside one. */
const COMMAND_KINDS: ReadonlySet<unknown> = new Set<unknown>(Object.values(CommandKind).filter((kind) => kind !== CommandKind.CommandBatch));

/**
 * Applies what one log entry carries: a command, or a CommandBatch whose commands apply in
 * order exactly as consecutive entries would (their outcomes in the same order). `onApplied`
 * hears of each command after it took effect.
 *
 * Throws UnknownCommandKindError, before any of the entry's commands takes effect, when one
 * of them is a kind this kcm does not know (apply-stop.ts): the member must stop there.
 */
export function applyLogged(
  state: MetaState,
  logged: LoggedCommand,
  onApplied?: (cmd: Command, outcome: ApplyOutcome) => void,
): ApplyOutcome | ApplyOutcome[] {
  const applyOne = (cmd: Command): ApplyOutcome => {
    const outcome = applyCommand(state, cmd);
    onApplied?.(cmd, outcome);
    return outcome;
  };
  // A batch inside a batch is never proposed by this kcm: it is an unknown kind.
  const commands: readonly { kind: unknown }[] = logged.kind === CommandKind.CommandBatch ? logged.commands : [logged];
  const unknown = commands.find((cmd) => !COMMAND_KINDS.has(cmd.kind));
  if (unknown) throw new UnknownCommandKindError(unknown.kind);
  return logged.kind === CommandKind.CommandBatch ? logged.commands.map(applyOne) : applyOne(logged);
}

/**
 * Applies one committed command to the state, in place. Deterministic: the same
 * state and command give the same state and outcome on every member.
 */
export function applyCommand(state: MetaState, cmd: Command): ApplyOutcome {
  switch (cmd.kind) {
    case CommandKind.MachineRegistered:
      return applyMachineRegistered(state, cmd);
    case CommandKind.MachineRemoved:
      return applyMachineRemoved(state, cmd);
    case CommandKind.MachineStatusSet:
      return applyMachineStatusSet(state, cmd);
    case CommandKind.JobSubmitted:
      return applyJobSubmitted(state, cmd);
    case CommandKind.JobStarted:
      return applyJobStarted(state, cmd);
    case CommandKind.JobStepDone:
      return applyJobStepDone(state, cmd);
    case CommandKind.JobProgress:
      return applyJobProgress(state, cmd);
    case CommandKind.JobFinished: {
      const outcome = applyJobFinished(state, cmd);
      if (cmd.outcome.ok) dropPendingRollbackOf(state, cmd.jobId);
      return outcome;
    }
    case CommandKind.ClusterCreated:
      return applyClusterCreated(state, cmd);
    case CommandKind.InstancesPlaced:
      return applyInstancesPlaced(state, cmd);
    case CommandKind.InstancesRemoved:
      return applyInstancesRemoved(state, cmd);
    case CommandKind.ClusterStatusSet:
      return applyClusterStatusSet(state, cmd);
    case CommandKind.ClusterDeleted: {
      const outcome = applyClusterDeleted(state, cmd);
      dropPendingRollbacksOf(state, cmd.clusterId);
      return outcome;
    }
    case CommandKind.RollbackRecorded:
      return applyRollbackRecorded(state, cmd);
    case CommandKind.RollbackInstancesRemoved:
      return applyRollbackInstancesRemoved(state, cmd);
    case CommandKind.ShardMasterChanged:
      return applyShardMasterChanged(state, cmd);
    case CommandKind.NodeFenceSet:
      return applyNodeFenceSet(state, cmd);
    case CommandKind.NoSwitchSet:
      return applyNoSwitchSet(state, cmd);
    case CommandKind.BackupStorageCreated:
      return applyBackupStorageCreated(state, cmd);
    case CommandKind.BackupStorageDeleted:
      return applyBackupStorageDeleted(state, cmd);
    case CommandKind.BackupSetRecorded:
      return applyBackupSetRecorded(state, cmd);
    case CommandKind.BinlogArchived:
      return applyBinlogArchived(state, cmd);
    case CommandKind.LogicalBackupScheduled:
      return applyLogicalBackupScheduled(state, cmd);
    case CommandKind.LogicalBackupRunClaimed:
      return applyLogicalBackupRunClaimed(state, cmd);
    case CommandKind.LogicalBackupRunFinished:
      return applyLogicalBackupRunFinished(state, cmd);
    case CommandKind.TokenCreated:
      return applyTokenCreated(state, cmd);
    case CommandKind.TokenDeleted:
      return applyTokenDeleted(state, cmd);
    case CommandKind.JobCancelRequested:
      return applyJobCancelRequested(state, cmd);
    case CommandKind.PasswordRotationStarted:
      return applyPasswordRotationStarted(state, cmd);
    case CommandKind.PasswordRotationApplied:
      return applyPasswordRotationApplied(state, cmd);
    case CommandKind.PasswordRotationFinished:
      return applyPasswordRotationFinished(state, cmd);
    case CommandKind.MachineFactsMeasured:
      return applyMachineFactsMeasured(state, cmd);
    case CommandKind.EngineVersionsRecorded:
      return applyEngineVersionsRecorded(state, cmd);
    case CommandKind.BackupPolicySet:
      return applyBackupPolicySet(state, cmd);
    case CommandKind.BackupPolicyRemoved:
      return applyBackupPolicyRemoved(state, cmd);
    case CommandKind.BackupPolicyRunClaimed:
      return applyBackupPolicyRunClaimed(state, cmd);
    case CommandKind.BackupPolicyRunSubmitted:
      return applyBackupPolicyRunSubmitted(state, cmd);
    case CommandKind.BackupsExpired:
      return applyBackupsExpired(state, cmd);
    case CommandKind.BackupDeletionsDone:
      return applyBackupDeletionsDone(state, cmd);
    case CommandKind.BackupKekAdded:
      return applyBackupKekAdded(state, cmd);
    case CommandKind.BackupKekRetired:
      return applyBackupKekRetired(state, cmd);
    case CommandKind.RestoreDrillRecorded:
      return applyRestoreDrillRecorded(state, cmd);
    case CommandKind.RestoreDrillRunClaimed:
      return applyRestoreDrillRunClaimed(state, cmd);
    case CommandKind.RestoreDrillRunSubmitted:
      return applyRestoreDrillRunSubmitted(state, cmd);
    default: {
      // A command from a newer kcm, or a retired kind (9-11): never guess, never skip it
      // (apply-stop.ts). The compiler checks that every kind has its case above.
      const unknown: { kind: unknown } = cmd satisfies never;
      throw new UnknownCommandKindError(unknown.kind);
    }
  }
}
