// kcm_backup_last_success_timestamp_seconds: when each cluster's newest stored full backup
// finished, for every cluster with a set (a policy or not), read from the replicated state.

import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerBackupPolicyMetrics } from '../../src/backup/policy-metrics';
import { emptyMetaState } from '../../src/meta/state';

describe('kcm_backup_last_success_timestamp_seconds', () => {
  it('is the newest set\'s finish time per cluster, and absent for a cluster with none', async () => {
    const state = emptyMetaState();
    const set = (id: string, clusterId: string, finishedAt: number) =>
      (state.backupSets[id] = { id, clusterId, storageName: 'bk', startedAt: finishedAt - 1000, finishedAt, shards: [], catalog: [] } as unknown as (typeof state.backupSets)[string]);
    set('1', '3', 1_700_000_000_000);
    set('2', '3', 1_700_000_600_000);
    set('3', '4', 1_700_000_300_000);
    const registry = new Registry();
    registerBackupPolicyMetrics(registry, { state: () => state, now: () => 1_700_001_000_000 });
    const lines = (await registry.getSingleMetricAsString('kcm_backup_last_success_timestamp_seconds')).split('\n').filter((l) => !l.startsWith('#'));
    expect(lines.sort()).toEqual([
      'kcm_backup_last_success_timestamp_seconds{cluster_id="3"} 1700000600',
      'kcm_backup_last_success_timestamp_seconds{cluster_id="4"} 1700000300',
    ]);
  });
});
