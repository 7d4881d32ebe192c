// The backup policy's alert against its own metrics: the gauges are scraped from a state
// with a fake clock, and promtool evaluates deploy/prometheus/kcm-alerts.yml over the scraped
// values (promtool comes with Debian's prometheus package, scripts/setup.sh installs it).

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerBackupPolicyMetrics } from '../../src/backup/policy-metrics';
import { applyCommand } from '../../src/meta/fsm';
import { CommandKind, type Command } from '../../src/meta/commands';
import { emptyMetaState } from '../../src/meta/state';

const rules = fileURLToPath(new URL('../../../../deploy/prometheus/kcm-alerts.yml', import.meta.url));
const HOUR = 3_600_000;

function stateWithPolicy(newestBackupAgoMs: number, now: number) {
  const state = emptyMetaState();
  const apply = (cmd: Command) => {
    const outcome = applyCommand(state, cmd);
    if (!outcome.ok) throw new Error(outcome.message);
  };
  state.clusters['1'] = { id: '1' } as (typeof state.clusters)[string];
  apply({ kind: CommandKind.BackupStorageCreated, at: 0, name: 'bk', stype: 'fs', hostaddr: '10.0.0.4', port: 1, path: '/b' });
  apply({ kind: CommandKind.BackupPolicySet, at: now - 30 * 24 * HOUR, policy: { clusterId: '1', fullEveryHours: 24, window: '01:00:00-05:00:00', startSecond: 3600, endSecond: 18000, keepDays: 7, keepSets: null, storageName: null, setByJob: '1' } });
  apply({ kind: CommandKind.BackupSetRecorded, at: now, set: { id: '5', clusterId: '1', storageName: 'bk', startedAt: now - newestBackupAgoMs - 1000, finishedAt: now - newestBackupAgoMs, shards: [], catalog: [] } });
  return state;
}

/** The value of a gauge sample for cluster 1 in the exposition text. */
const sample = (text: string, name: string) => Number(new RegExp(`^${name}\\{cluster_id="1"\\} (\\S+)$`, 'm').exec(text)![1]);

async function alertsFiring(newestBackupAgoMs: number): Promise<boolean> {
  const now = Date.UTC(2026, 0, 20, 12);
  const registry = new Registry();
  registerBackupPolicyMetrics(registry, { state: () => stateWithPolicy(newestBackupAgoMs, now), now: () => now });
  const text = await registry.metrics();
  const age = sample(text, 'kcm_backup_policy_backup_age_seconds');
  const allowed = sample(text, 'kcm_backup_policy_allowed_age_seconds');
  const dir = mkdtempSync(join(tmpdir(), 'kcm-policy-alert-'));
  try {
    // The summary as the rule renders it for cluster 1 (promtool compares annotations too).
    const rule = /alert: KcmBackupPolicyMissed\n[\s\S]*?summary: '((?:[^']|'')*)'/.exec(readFileSync(rules, 'utf8'))!;
    const summary = rule[1].replaceAll("''", "'").replaceAll('{{ $labels.cluster_id }}', '1');
    const expAlerts = (fires: boolean) =>
      fires ? `\n          - exp_labels: { severity: critical, cluster_id: "1" }\n            exp_annotations: { summary: ${JSON.stringify(summary)} }` : ' []';
    const test = (fires: boolean) => `rule_files: [${JSON.stringify(rules)}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'kcm_backup_policy_backup_age_seconds{cluster_id="1", instance="m1"}'
        values: '${age}x5'
      - series: 'kcm_backup_policy_allowed_age_seconds{cluster_id="1", instance="m1"}'
        values: '${allowed}x5'
    alert_rule_test:
      - eval_time: 2m
        alertname: KcmBackupPolicyMissed
        exp_alerts:${expAlerts(fires)}
`;
    // promtool says which of the two expectations holds: it fails the other one.
    for (const fires of [true, false]) {
      writeFileSync(join(dir, 'test.yml'), test(fires));
      try {
        execFileSync('promtool', ['test', 'rules', join(dir, 'test.yml')], { encoding: 'utf8', stdio: 'pipe' });
        return fires;
      } catch {
        // this expectation failed: try the other
      }
    }
    throw new Error('promtool accepted neither expectation');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('backup policy alert', () => {
  it('KcmBackupPolicyMissed fires when the newest backup of a daily policy is older than a period plus a day, not before', async () => {
    expect(await alertsFiring(20 * HOUR)).toBe(false);
    expect(await alertsFiring(47 * HOUR)).toBe(false);
    expect(await alertsFiring(49 * HOUR)).toBe(true);
  });
});
