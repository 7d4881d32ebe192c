import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const deployDir = fileURLToPath(new URL('../../deploy/prometheus/', import.meta.url));

// promtool comes with Debian's prometheus package, which scripts/setup.sh installs.
describe('deploy/prometheus', () => {
  it('the scrape config and the alert rules pass promtool check', () => {
    const out = execFileSync('promtool', ['check', 'config', 'prometheus.yml'], { cwd: deployDir, encoding: 'utf8' });
    expect(out).toMatch(/SUCCESS: prometheus\.yml is valid/);
    expect(out).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('each DBA alert fires on its synthetic series and stays quiet where it must (promtool test rules)', () => {
    const out = execFileSync('promtool', ['test', 'rules', 'kcm-alerts.test.yml'], { cwd: deployDir, encoding: 'utf8' });
    expect(out).toMatch(/SUCCESS/);
    // Every alert of the DBA group has a case in the unit file.
    const rules = readFileSync(path.join(deployDir, 'kcm-alerts.yml'), 'utf8');
    const dbaGroup = rules.slice(rules.indexOf('- name: kcm-dba'), rules.indexOf('- name: kcm\n'));
    const alerts = [...dbaGroup.matchAll(/- alert: (\w+)/g)].map((m) => m[1]);
    expect(alerts.length).toBeGreaterThanOrEqual(6);
    const tested = new Set([...readFileSync(path.join(deployDir, 'kcm-alerts.test.yml'), 'utf8').matchAll(/alertname: (\w+)/g)].map((m) => m[1]));
    expect(alerts.filter((a) => !tested.has(a))).toEqual([]);
    expect(tested.has('KcmBackupPolicyMissed')).toBe(true);
  });
});
