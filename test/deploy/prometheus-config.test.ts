import { execFileSync } from 'node:child_process';
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
});
