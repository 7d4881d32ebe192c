// A cluster's backup policy in get_cluster_detail (issue 33): the policy, its last run, and
// the restorable window. The run's status is measured from its job and the backup set it
// made, not stored: a job still in the state says how it stands; once the job record is
// trimmed, the set's presence says whether it succeeded.

import { backupPolicyResult } from '../jobs/backup-policy';
import { defaultBackupStorage } from '../meta/backup';
import { policyOfCluster, type BackupPolicyRun } from '../meta/backup-policies';
import { own } from '../meta/dict';
import type { MetaState } from '../meta/state';
import { restorableWindow } from '../backup/retention';

const iso = (ms: number): string => new Date(ms).toISOString();

function lastRunOf(state: MetaState, run: BackupPolicyRun): Record<string, string> {
  const job = run.jobId === null ? undefined : own(state.jobs, run.jobId);
  const set = run.jobId === null ? undefined : own(state.backupSets, run.jobId);
  const status = run.jobId === null ? 'claimed' : job ? job.status : set ? 'done' : 'unknown (job record trimmed, no backup set kept)';
  return {
    period_start: String(Math.floor(run.periodStart / 1000)),
    period_start_utc: iso(run.periodStart),
    claimed_at: String(Math.floor(run.claimedAt / 1000)),
    job_id: run.jobId ?? '',
    status,
    ...(set ? { backup_id: set.id, backup_time: String(Math.floor(set.finishedAt / 1000)) } : {}),
    ...(job?.result && !job.result.ok ? { error: job.result.errorInfo } : {}),
  };
}

/** The backup_policy fields of get_cluster_detail (empty when the cluster has no policy and no window). */
export function backupPolicyDetail(state: MetaState, clusterId: string): Record<string, unknown> {
  const policy = policyOfCluster(state, clusterId);
  const window = restorableWindow(state, clusterId);
  return {
    ...(policy ? { backup_policy: backupPolicyResult(policy, defaultBackupStorage(state)?.name) } : {}),
    ...(policy?.lastRun ? { backup_policy_last_run: lastRunOf(state, policy.lastRun) } : {}),
    // What a cluster_restore of this cluster accepts now as restore_time (Unix seconds), from what is stored and archived.
    restorable_window: window
      ? { earliest: String(window.earliest), latest: String(window.latest), earliest_utc: iso(window.earliest * 1000), latest_utc: iso(window.latest * 1000) }
      : { earliest: '', latest: '' },
  };
}
