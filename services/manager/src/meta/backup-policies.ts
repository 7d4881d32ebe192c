// Backup policies in the replicated state (issue 33, docs/backup-policies.md): per cluster, a
// full backup once per period inside a daily window, and a retention. Each period's run is
// claimed here before its manual_backup_cluster job is submitted, under a request id made of
// the cluster and the period's start: a leader that dies between the claim and the job's
// submission leaves the claim, the next leader submits under the same request id (the job is
// created once), and a period already claimed is never claimed again. So a leader change
// neither loses nor doubles a run.
//
// Expiry takes records out of the state first (nothing restores from them any more) and
// queues their stored objects for deletion; the leader deletes them and drops them from the
// queue, so a deletion cut short by a leader change or an unreachable storage is finished later.

import { dict, own } from './dict';
import { emptyBackupPolicyState, type BackupPolicyRecord, type BackupPolicyState, type PendingBackupDeletion } from './backup-policy-records';
import { accepted, refused, type ApplyOutcome } from './outcome';
import type { MetaState } from './state';
import type { CommandBase, CommandKind } from './command-numbers';

export type { BackupPolicyRecord, BackupPolicyRun, BackupPolicyState, PendingBackupDeletion, RestoreDrillSchedule } from './backup-policy-records';

/** For apply only: the state's policies, made when missing (an image from before policies has none). */
function policyStateForApply(state: MetaState): BackupPolicyState {
  state.backupPolicies ??= emptyBackupPolicyState();
  return state.backupPolicies;
}

/** The policy of a cluster, if it has one (read only). */
export function policyOfCluster(state: MetaState, clusterId: string): BackupPolicyRecord | undefined {
  return state.backupPolicies ? own(state.backupPolicies.policies, clusterId) : undefined;
}

/** Every policy, by cluster id (read only). */
export function allPolicies(state: MetaState): BackupPolicyRecord[] {
  return Object.values(state.backupPolicies?.policies ?? {}).sort((a, b) => Number(a.clusterId) - Number(b.clusterId));
}

/** The objects expiry still has to delete (read only). */
export function pendingDeletions(state: MetaState): PendingBackupDeletion[] {
  return Object.values(state.backupPolicies?.pendingDeletions ?? {});
}

/** set_backup_policy: adds or replaces the policy of a cluster. */
export interface BackupPolicySet extends CommandBase<typeof CommandKind.BackupPolicySet> {
  policy: Omit<BackupPolicyRecord, 'setAt' | 'lastRun' | 'lastDrill'>;
}

/** delete_backup_policy. */
export interface BackupPolicyRemoved extends CommandBase<typeof CommandKind.BackupPolicyRemoved> {
  clusterId: string;
}

/** The leader takes the run of one period (before submitting its job). */
export interface BackupPolicyRunClaimed extends CommandBase<typeof CommandKind.BackupPolicyRunClaimed> {
  clusterId: string;
  periodStart: number;
  claimedBy: string;
}

/** The claimed run's job was submitted. */
export interface BackupPolicyRunSubmitted extends CommandBase<typeof CommandKind.BackupPolicyRunSubmitted> {
  clusterId: string;
  periodStart: number;
  jobId: string;
}

/**
 * Expiry: the sets and archived binlogs outside a cluster's retention leave the state and
 * their objects are queued for deletion. Ids or keys no longer present are skipped (a repeat).
 */
export interface BackupsExpired extends CommandBase<typeof CommandKind.BackupsExpired> {
  clusterId: string;
  /** Each set with its objects' prefix on its storage (jobs/backup.ts backupSetPrefix). */
  sets: { id: string; prefix: string }[];
  /** Archived binlogs by shard id, by key. */
  binlogs: { shardId: string; keys: string[] }[];
}

/** Objects queued by BackupsExpired are deleted from their storage. */
export interface BackupDeletionsDone extends CommandBase<typeof CommandKind.BackupDeletionsDone> {
  prefixes: string[];
}

/** The request id of a period's backup job: the same on every leader, so the job is created once. */
export const policyRunRequestId = (clusterId: string, periodStart: number): string => `backup-policy:${clusterId}:${periodStart}`;

export function applyBackupPolicySet(state: MetaState, cmd: BackupPolicySet): ApplyOutcome<null> {
  if (!own(state.clusters, cmd.policy.clusterId)) return refused('NOT_FOUND', `cluster ${cmd.policy.clusterId} does not exist`);
  const s = policyStateForApply(state);
  const before = own(s.policies, cmd.policy.clusterId);
  // A replaced policy keeps its last run and drill: a period that ran does not run again.
  s.policies[cmd.policy.clusterId] = { ...cmd.policy, setAt: cmd.at, lastRun: before?.lastRun ?? null, ...(before?.lastDrill ? { lastDrill: before.lastDrill } : {}) };
  return accepted(null);
}

export function applyBackupPolicyRemoved(state: MetaState, cmd: BackupPolicyRemoved): ApplyOutcome<null> {
  const s = policyStateForApply(state);
  if (!own(s.policies, cmd.clusterId)) return refused('NOT_FOUND', `cluster ${cmd.clusterId} has no backup policy`);
  delete s.policies[cmd.clusterId];
  return accepted(null);
}

export function applyBackupPolicyRunClaimed(state: MetaState, cmd: BackupPolicyRunClaimed): ApplyOutcome<null> {
  const policy = own(policyStateForApply(state).policies, cmd.clusterId);
  if (!policy) return refused('NOT_FOUND', `cluster ${cmd.clusterId} has no backup policy`);
  const last = policy.lastRun;
  if (last && last.periodStart >= cmd.periodStart) return refused('CONFLICT', `the backup policy of cluster ${cmd.clusterId} already ran the period starting ${new Date(last.periodStart).toISOString()}`);
  policy.lastRun = { periodStart: cmd.periodStart, claimedAt: cmd.at, claimedBy: cmd.claimedBy, jobId: null };
  return accepted(null);
}

export function applyBackupPolicyRunSubmitted(state: MetaState, cmd: BackupPolicyRunSubmitted): ApplyOutcome<null> {
  const run = own(policyStateForApply(state).policies, cmd.clusterId)?.lastRun;
  if (!run || run.periodStart !== cmd.periodStart) return refused('NOT_FOUND', `cluster ${cmd.clusterId} has no claimed backup run for ${cmd.periodStart}`);
  run.jobId ??= cmd.jobId;
  return accepted(null);
}

export function applyBackupsExpired(state: MetaState, cmd: BackupsExpired): ApplyOutcome<{ sets: number; binlogs: number }> {
  const pending = policyStateForApply(state).pendingDeletions;
  let sets = 0;
  let binlogs = 0;
  for (const { id, prefix } of cmd.sets) {
    const set = own(state.backupSets, id);
    if (!set || set.clusterId !== cmd.clusterId) continue;
    delete state.backupSets[id];
    pending[prefix] = { storageName: set.storageName, prefix, what: `set ${set.id}`, queuedAt: cmd.at };
    sets++;
  }
  for (const { shardId, keys } of cmd.binlogs) {
    const archive = own(state.binlogArchives ?? dict(), `${cmd.clusterId}/${shardId}`);
    if (!archive) continue;
    const gone = new Set(keys);
    for (const f of archive.files.filter((f) => gone.has(f.key))) {
      pending[f.key] = { storageName: f.storageName, prefix: f.key, what: `binlog ${cmd.clusterId}/${shardId} ${f.name}`, queuedAt: cmd.at };
      binlogs++;
    }
    archive.files = archive.files.filter((f) => !gone.has(f.key));
  }
  return accepted({ sets, binlogs });
}

export function applyBackupDeletionsDone(state: MetaState, cmd: BackupDeletionsDone): ApplyOutcome<null> {
  const pending = policyStateForApply(state).pendingDeletions;
  for (const prefix of cmd.prefixes) delete pending[prefix];
  return accepted(null);
}
