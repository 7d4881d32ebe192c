// Metrics of restore drills (docs/restore-drills.md), read from the replicated state at scrape
// time, so every member exports the same values (alert rules take max by cluster_id). Only
// clusters that still exist are shown: a deleted cluster's last drill alerts no one.
// deploy/prometheus/kcm-alerts.yml: KcmRestoreDrillFailed on kcm_restore_drill_last_failed,
// KcmRestoreDrillMissing on a drill schedule with no passing drill within its period (plus a day).

import { Gauge, type Registry } from 'prom-client';
import { allDrills, drillsOfCluster } from '../meta/restore-drills';
import type { MetaState } from '../meta/state';
import type { BackupPolicyRecord } from '../meta/backup-policy-records';
import { perPolicyGauge } from './policy-metrics';

/** One period, plus a day for the window to come round and the drill to run: older than this, a passing drill is missing. */
export const allowedDrillAgeSeconds = (everyDays: number): number => everyDays * 86_400 + 86_400;

export function registerRestoreDrillMetrics(registry: Registry, sources: { state: () => MetaState; now: () => number }): void {
  /** A gauge per cluster with recorded drills, its value read from the cluster's drills (none: no sample). */
  const perDrilledCluster = (name: string, help: string, read: (d: ReturnType<typeof allDrills>[number]) => number | null) =>
    new Gauge({
      name,
      help,
      labelNames: ['cluster_id'],
      registers: [registry],
      collect() {
        this.reset();
        const state = sources.state();
        for (const drills of allDrills(state)) {
          const value = state.clusters[drills.last.clusterId] ? read(drills) : null;
          if (value !== null) this.set({ cluster_id: drills.last.clusterId }, value);
        }
      },
    });
  perDrilledCluster('kcm_restore_drill_last_success_timestamp_seconds', 'Unix time the cluster\'s last passing restore drill ended', (d) => (d.lastPassed ? d.lastPassed.finishedAt / 1000 : null));
  perDrilledCluster('kcm_restore_drill_last_failed', '1 when the cluster\'s last restore drill failed (its tables differed, or its restore did not finish), 0 when it passed', (d) => (d.last.passed ? 0 : 1));
  // RTO and RPO of the last drill that measured them (a drill that failed before its check did not).
  const measured = (d: ReturnType<typeof allDrills>[number]) => (d.last.rtoMs !== null ? d.last : d.lastPassed);
  perDrilledCluster('kcm_restore_drill_last_rto_seconds', 'Restore start to tables verified in the cluster\'s last measured restore drill (RTO)', (d) => (measured(d)?.rtoMs ?? null) === null ? null : measured(d)!.rtoMs! / 1000);
  perDrilledCluster('kcm_restore_drill_last_rpo_seconds', 'Age of the restored point when the cluster\'s last measured restore drill started (data-age RPO)', (d) => measured(d)?.rpoS ?? null);
  // Clusters whose backup policy schedules drills, while they exist.
  const scheduled = (policy: BackupPolicyRecord, state: MetaState) => Boolean(policy.drill) && state.clusters[policy.clusterId] !== undefined;
  perPolicyGauge(
    registry,
    sources.state,
    'kcm_restore_drill_age_seconds',
    'Time since the last passing restore drill of each cluster whose backup policy schedules drills (since the policy was set, when none passed yet)',
    (policy, state) => (scheduled(policy, state) ? Math.max(0, (sources.now() - (drillsOfCluster(state, policy.clusterId)?.lastPassed?.finishedAt ?? policy.setAt)) / 1000) : null),
  );
  perPolicyGauge(
    registry,
    sources.state,
    'kcm_restore_drill_allowed_age_seconds',
    'The age the last passing restore drill may reach before one is missing: drill_every_days plus a day',
    (policy, state) => (scheduled(policy, state) ? allowedDrillAgeSeconds(policy.drill!.everyDays) : null),
  );
}
