// Restore drills in the replicated state (jobs/restore-drill, docs/restore-drills.md): the
// outcome of each cluster's last drill and the last one that passed (what get_cluster_detail
// and the kcm_restore_drill_* metrics show, the same on every member), and the runs of the
// drills a backup policy schedules. A scheduled drill is claimed here before its job is
// submitted under a request id made of the cluster and the period, exactly as a policy's
// backup run is (meta/backup-policies.ts): a leader change neither loses nor doubles one.

import { dict, own, type Dict } from './dict';
import type { ClusterDrills } from './restore-drill-records';
import { emptyBackupPolicyState, type BackupPolicyRun } from './backup-policy-records';
import { accepted, refused, type ApplyOutcome } from './outcome';
import type { MetaState } from './state';
import type { CommandBase, CommandKind } from './command-numbers';

export type { ClusterDrills, DrillMismatch, RestoreDrillOutcome } from './restore-drill-records';

/** A drill ended (passed or failed); the same job recorded again replaces its own record. */
export interface RestoreDrillRecorded extends CommandBase<typeof CommandKind.RestoreDrillRecorded> {
  outcome: ClusterDrills['last'];
}

/** The leader takes a policy's drill of one period (before submitting its job). */
export interface RestoreDrillRunClaimed extends CommandBase<typeof CommandKind.RestoreDrillRunClaimed> {
  clusterId: string;
  periodStart: number;
  claimedBy: string;
}

/** The claimed drill's job was submitted. */
export interface RestoreDrillRunSubmitted extends CommandBase<typeof CommandKind.RestoreDrillRunSubmitted> {
  clusterId: string;
  periodStart: number;
  jobId: string;
}

/** The request id of a period's drill job: the same on every leader, so the job is created once. */
export const drillRunRequestId = (clusterId: string, periodStart: number): string => `restore-drill:${clusterId}:${periodStart}`;

/** A cluster's recorded drills (read only). */
export function drillsOfCluster(state: MetaState, clusterId: string): ClusterDrills | undefined {
  return state.restoreDrills ? own(state.restoreDrills, clusterId) : undefined;
}

/** Every cluster's recorded drills (read only). */
export function allDrills(state: MetaState): ClusterDrills[] {
  return Object.values(state.restoreDrills ?? {}).sort((a, b) => Number(a.last.clusterId) - Number(b.last.clusterId));
}

export function applyRestoreDrillRecorded(state: MetaState, cmd: RestoreDrillRecorded): ApplyOutcome<null> {
  const o = cmd.outcome;
  if (!Number.isFinite(o.finishedAt)) return refused('INVALID_PARAS', `drill ${o.jobId}: finishedAt must be ms since the epoch`);
  state.restoreDrills ??= dict();
  const drills: Dict<ClusterDrills> = state.restoreDrills;
  const before = own(drills, o.clusterId);
  const outcome = { ...o, mismatches: o.mismatches.map((m) => ({ ...m })) };
  // A passed drill recorded again keeps being the last passed; a failed one leaves the earlier pass.
  const lastPassed = o.passed ? outcome : before?.lastPassed && before.lastPassed.jobId !== o.jobId ? before.lastPassed : null;
  drills[o.clusterId] = { last: outcome, lastPassed };
  return accepted(null);
}

export function applyRestoreDrillRunClaimed(state: MetaState, cmd: RestoreDrillRunClaimed): ApplyOutcome<null> {
  state.backupPolicies ??= emptyBackupPolicyState();
  const policy = own(state.backupPolicies.policies, cmd.clusterId);
  if (!policy?.drill) return refused('NOT_FOUND', `cluster ${cmd.clusterId} has no restore drill schedule`);
  const last = policy.lastDrill;
  if (last && last.periodStart >= cmd.periodStart) return refused('CONFLICT', `the restore drill of cluster ${cmd.clusterId} already ran the period starting ${new Date(last.periodStart).toISOString()}`);
  policy.lastDrill = { periodStart: cmd.periodStart, claimedAt: cmd.at, claimedBy: cmd.claimedBy, jobId: null };
  return accepted(null);
}

export function applyRestoreDrillRunSubmitted(state: MetaState, cmd: RestoreDrillRunSubmitted): ApplyOutcome<null> {
  const run: BackupPolicyRun | null | undefined = state.backupPolicies ? own(state.backupPolicies.policies, cmd.clusterId)?.lastDrill : undefined;
  if (!run || run.periodStart !== cmd.periodStart) return refused('NOT_FOUND', `cluster ${cmd.clusterId} has no claimed restore drill for ${cmd.periodStart}`);
  run.jobId ??= cmd.jobId;
  return accepted(null);
}
