// Evaluates an alert of deploy/prometheus/kcm-alerts.yml over given per-cluster samples with
// promtool test rules (Debian's prometheus package; scripts/setup.sh installs it): for unit
// tests that scrape a registry and for real-engine tests that scrape a manager's /metrics.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const KCM_ALERT_RULES = fileURLToPath(new URL('../../../../deploy/prometheus/kcm-alerts.yml', import.meta.url));

/**
 * Whether `alert` fires for cluster `clusterId` when each metric of `samples` holds its value
 * (one series per metric, labelled with the cluster): promtool is given both expectations,
 * the alert with its rendered summary and no alert, and says which holds.
 */
export function alertFiresForCluster(alert: string, samples: ReadonlyMap<string, number>, clusterId: string, rules = KCM_ALERT_RULES): boolean {
  const rule = new RegExp(`alert: ${alert}\\n[\\s\\S]*?severity: (\\w+)[\\s\\S]*?summary: '((?:[^']|'')*)'`).exec(readFileSync(rules, 'utf8'));
  if (!rule) throw new Error(`${rules} has no alert ${alert} with a quoted summary`);
  const summary = rule[2].replaceAll("''", "'").replaceAll('{{ $labels.cluster_id }}', clusterId);
  const series = [...samples].map(([name, v]) => `      - series: '${name}{cluster_id="${clusterId}", instance="m1"}'\n        values: '${v}x3'`).join('\n');
  const dir = mkdtempSync(join(tmpdir(), 'kcm-alert-rules-'));
  try {
    for (const expected of [true, false]) {
      const alerts = expected ? `\n          - exp_labels: { severity: ${rule[1]}, cluster_id: "${clusterId}" }\n            exp_annotations: { summary: ${JSON.stringify(summary)} }` : ' []';
      writeFileSync(join(dir, 'test.yml'), `rule_files: [${JSON.stringify(rules)}]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n${series}\n    alert_rule_test:\n      - eval_time: 1m\n        alertname: ${alert}\n        exp_alerts:${alerts}\n`);
      try {
        execFileSync('promtool', ['test', 'rules', join(dir, 'test.yml')], { stdio: 'pipe' });
        return expected;
      } catch {
        // this expectation failed: the other one is tried
      }
    }
    throw new Error(`promtool accepted neither expectation for ${alert}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
