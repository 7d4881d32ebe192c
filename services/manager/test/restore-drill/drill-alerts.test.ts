// The restore drill metrics, read from a state built by applying commands (a fake clock), and
// the alerts of deploy/prometheus/kcm-alerts.yml evaluated by promtool over the scraped values.

import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerRestoreDrillMetrics } from '../../src/backup/restore-drill-metrics';
import { applyCommand } from '../../src/meta/fsm';
import { CommandKind, type Command } from '../../src/meta/commands';
import type { RestoreDrillOutcome } from '../../src/meta/restore-drills';
import { emptyMetaState, type MetaState } from '../../src/meta/state';
import { alertFiresForCluster } from '../helpers/alert-rules';

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 0, 20, 12);

const drill = (jobId: string, passed: boolean, finishedAt: number, rtoMs: number | null = 42_000): RestoreDrillOutcome => ({
  clusterId: '1', jobId, passed, backupId: '5', restoredBackupId: '5', mode: 'set', pointAt: finishedAt - 3_600_000, rtoMs, rpoS: 3600,
  tablesChecked: 1, mismatches: passed ? [] : [{ table: 'd.t', what: 'missing from the restored copy' }], scratchClusterId: '9', scratchDeleted: true, finishedAt,
});

/** Cluster 1 with a weekly drill schedule set 30 days ago, and these drills recorded in order. */
function stateWith(drills: RestoreDrillOutcome[]): MetaState {
  const state = emptyMetaState();
  const apply = (cmd: Command) => {
    const outcome = applyCommand(state, cmd);
    if (!outcome.ok) throw new Error(outcome.message);
  };
  state.clusters['1'] = { id: '1' } as (typeof state.clusters)[string];
  apply({
    kind: CommandKind.BackupPolicySet, at: NOW - 30 * DAY,
    policy: { clusterId: '1', fullEveryHours: 24, window: '00:00:00-23:59:59', startSecond: 0, endSecond: 86399, keepDays: 7, keepSets: null, storageName: null, setByJob: '1', drill: { everyDays: 7, storageIplists: ['10.0.0.5'], computerIplists: ['10.0.0.6'] } },
  });
  for (const o of drills) apply({ kind: CommandKind.RestoreDrillRecorded, at: o.finishedAt, outcome: o });
  return state;
}

async function scrape(state: MetaState): Promise<Map<string, number>> {
  const registry = new Registry();
  registerRestoreDrillMetrics(registry, { state: () => state, now: () => NOW });
  const values = new Map<string, number>();
  for (const m of (await registry.metrics()).matchAll(/^(kcm_restore_drill_\w+)\{cluster_id="1"\} (\S+)$/gm)) values.set(m[1], Number(m[2]));
  return values;
}

/** Which alerts of the drill pair fire on the scraped values (promtool over deploy/prometheus/kcm-alerts.yml). */
const firing = (values: Map<string, number>): string[] => ['KcmRestoreDrillFailed', 'KcmRestoreDrillMissing'].filter((alert) => alertFiresForCluster(alert, values, '1'));

describe('restore drill metrics and alerts', () => {
  it('a passing drill two days ago: its time, RTO and RPO are exported and nothing fires', async () => {
    const values = await scrape(stateWith([drill('20', true, NOW - 2 * DAY)]));
    expect(Object.fromEntries(values)).toEqual({
      kcm_restore_drill_last_success_timestamp_seconds: (NOW - 2 * DAY) / 1000,
      kcm_restore_drill_last_failed: 0,
      kcm_restore_drill_last_rto_seconds: 42,
      kcm_restore_drill_last_rpo_seconds: 3600,
      kcm_restore_drill_age_seconds: 2 * 86_400,
      kcm_restore_drill_allowed_age_seconds: 8 * 86_400,
    });
    expect(firing(values)).toEqual([]);
  });

  it('a failed drill after it fires KcmRestoreDrillFailed; RTO and RPO stay the last measured ones', async () => {
    const values = await scrape(stateWith([drill('20', true, NOW - 2 * DAY), drill('21', false, NOW - DAY, null)]));
    expect(values.get('kcm_restore_drill_last_failed')).toBe(1);
    expect(values.get('kcm_restore_drill_last_rto_seconds')).toBe(42);
    expect(firing(values)).toEqual(['KcmRestoreDrillFailed']);
  });

  it('no passing drill within the weekly period plus a day fires KcmRestoreDrillMissing; none at all counts from the policy', async () => {
    expect(firing(await scrape(stateWith([drill('20', true, NOW - 9 * DAY)])))).toEqual(['KcmRestoreDrillMissing']);
    const never = await scrape(stateWith([]));
    expect(never.get('kcm_restore_drill_age_seconds')).toBe(30 * 86_400);
    expect(firing(never)).toEqual(['KcmRestoreDrillMissing']);
  });
});
