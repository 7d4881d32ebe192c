// Metrics of the backup policies (docs/backup-policies.md), read from the replicated state at
// scrape time, so every member exports the same values (alert rules take max by cluster_id).
// deploy/prometheus/kcm-alerts.yml alerts on a policy whose newest backup is older than its
// allowed age (a period missed) and on expired objects its storage keeps refusing to delete.

import { Gauge, type Registry } from 'prom-client';
import { backupSetsOf } from '../meta/backup';
import { allPolicies, pendingDeletions } from '../meta/backup-policies';
import type { MetaState } from '../meta/state';
import type { BackupPolicyRecord } from '../meta/backup-policy-records';

/** One period, plus a day for the daily window to come round again: older than this, a run was missed. */
export const allowedBackupAgeSeconds = (fullEveryHours: number): number => fullEveryHours * 3600 + 86_400;

/**
 * A gauge with a sample per backup policy, read from the state at scrape time: `value` gives
 * the policy's value, or null for no sample (the restore drills' gauges use it too).
 */
export function perPolicyGauge(
  registry: Registry,
  state: () => MetaState,
  name: string,
  help: string,
  value: (policy: BackupPolicyRecord, state: MetaState) => number | null,
): Gauge<'cluster_id'> {
  return new Gauge({
    name,
    help,
    labelNames: ['cluster_id'],
    registers: [registry],
    collect() {
      this.reset();
      const now = state();
      for (const policy of allPolicies(now)) {
        const v = value(policy, now);
        if (v !== null) this.set({ cluster_id: policy.clusterId }, v);
      }
    },
  });
}

export function registerBackupPolicyMetrics(registry: Registry, sources: { state: () => MetaState; now: () => number }): void {
  perPolicyGauge(
    registry,
    sources.state,
    'kcm_backup_policy_backup_age_seconds',
    'Age of the newest stored full backup of each cluster with a backup policy (since the policy was set, when it has none yet)',
    (policy, state) => Math.max(0, (sources.now() - (backupSetsOf(state, policy.clusterId).at(-1)?.finishedAt ?? policy.setAt)) / 1000),
  );
  perPolicyGauge(
    registry,
    sources.state,
    'kcm_backup_policy_allowed_age_seconds',
    'The age its newest full backup may reach before a backup policy has missed a period: full_every_hours plus a day',
    (policy) => allowedBackupAgeSeconds(policy.fullEveryHours),
  );
  // Every cluster with a stored full backup, with a policy or not: the dashboard's "last backup".
  new Gauge({
    name: 'kcm_backup_last_success_timestamp_seconds',
    help: 'When the newest stored full backup set of each cluster finished (Unix seconds)',
    labelNames: ['cluster_id'],
    registers: [registry],
    collect() {
      this.reset();
      const newest = new Map<string, number>();
      for (const set of Object.values(sources.state().backupSets)) newest.set(set.clusterId, Math.max(newest.get(set.clusterId) ?? 0, set.finishedAt));
      for (const [clusterId, finishedAt] of newest) this.set({ cluster_id: clusterId }, finishedAt / 1000);
    },
  });
  new Gauge({
    name: 'kcm_backup_expired_objects_pending',
    help: 'Objects (backup sets, archived binlogs) that expiry removed from the state and the leader has not deleted from their storage yet',
    registers: [registry],
    collect() {
      this.set(pendingDeletions(sources.state()).length);
    },
  });
}
