// The dashboard and the alert rules against a running group: every metric their PromQL names
// is one the managers really export, and Debian's Prometheus, given deploy/prometheus's scrape
// config aimed at a local group, sees exactly one member reporting itself leader. The members
// serve HTTPS as a real deployment's do, so the shipped config's scheme and CA are what is scraped with.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalGroup } from '../manager/helpers/group';
import { testCa } from '../helpers/pki';
import { httpsText } from '../helpers/tls-probes';
import { waitFor } from '../manager/helpers/processes';
import { promqlExpressionsOf, metricNamesIn } from './promql-names';

const MEMBERS = ['127.0.1.141:18520', '127.0.1.142:18520', '127.0.1.143:18520'];
const AGENT_HOST = '127.0.2.141';
const AGENT_PORT = 18595;
const PROMETHEUS = '127.0.1.144:18529';
const deployDir = fileURLToPath(new URL('../../deploy/', import.meta.url));

/** Metric names a member's /metrics declares (# TYPE lines), with a histogram's series names. */
/** The one member whose /metrics says it leads, over HTTPS. */
async function leaderOverHttps(): Promise<string | undefined> {
  const leads = await Promise.all(MEMBERS.map(async (m) => (await httpsText(m, '/metrics', { ca: readFileSync(testCa().cert), timeoutMs: 2_000 }).catch(() => ({ text: '' }))).text.includes('\nkcm_raft_is_leader 1\n')));
  const leaders = MEMBERS.filter((_, i) => leads[i]);
  return leaders.length === 1 ? leaders[0] : undefined;
}

async function exportedNames(member: string, scheme: 'https' | 'http' = 'https'): Promise<Set<string>> {
  const text = scheme === 'https'
    ? (await httpsText(member, '/metrics', { ca: readFileSync(testCa().cert), timeoutMs: 5_000 })).text
    : await (await fetch(`http://${member}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(m[1]);
    if (m[2] === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(m[1] + suffix);
    if (m[2] === 'summary') for (const suffix of ['_sum', '_count']) names.add(m[1] + suffix);
  }
  return names;
}

describe('deploy/grafana and deploy/prometheus against a running group', () => {
  let group: LocalGroup;
  let prometheus: ChildProcess | undefined;
  let promDir: string;

  beforeAll(async () => {
    group = new LocalGroup({ name: 'live-metrics', members: MEMBERS, agentHosts: [AGENT_HOST], agentPort: AGENT_PORT, managerConfig: { plainHttp: false } });
    promDir = mkdtempSync(path.join(os.tmpdir(), 'kcm-prometheus-'));
    await group.start();
    await waitFor('a leader', leaderOverHttps, 20_000, 200);
  });

  afterAll(async () => {
    prometheus?.kill('SIGKILL');
    await group?.stop();
    rmSync(promDir, { recursive: true, force: true });
  });

  it('every PromQL expression of the dashboard and the alert rules names only exported metrics', async () => {
    const exported = new Set<string>(['up']); // Prometheus's own per-target series
    for (const member of MEMBERS) for (const name of await exportedNames(member)) exported.add(name);
    // The agent's own /metrics (plain HTTP, its port + 2): the dashboard's Hosts row reads it.
    for (const name of await exportedNames(`${AGENT_HOST}:${AGENT_PORT + 2}`, 'http')) exported.add(name);
    const expressions = [
      ...promqlExpressionsOf('grafana', readFileSync(path.join(deployDir, 'grafana/kcm-dashboard.json'), 'utf8')),
      ...promqlExpressionsOf('alerts', readFileSync(path.join(deployDir, 'prometheus/kcm-alerts.yml'), 'utf8')),
    ];
    expect(expressions.length).toBeGreaterThan(20);
    const unknown = expressions.flatMap((e) => metricNamesIn(e.expr).filter((n) => !exported.has(n)).map((n) => `${n} (in ${e.where})`));
    expect(unknown).toEqual([]);
  });

  it('Prometheus with deploy/prometheus scraping the group sees exactly one leader', async () => {
    // The shipped config, aimed at this group and scraping every second.
    const shipped = readFileSync(path.join(deployDir, 'prometheus/prometheus.yml'), 'utf8');
    const config = shipped
      .replace(/scrape_interval: \S+/, 'scrape_interval: 1s')
      .replace(/evaluation_interval: \S+/, 'evaluation_interval: 1s')
      .replace(/- kcm-alerts\.yml/, `- ${path.join(deployDir, 'prometheus/kcm-alerts.yml')}`)
      .replace(/targets: \[[^\]]*\]/, `targets: [${MEMBERS.map((m) => `'${m}'`).join(', ')}]`)
      .replace('ca_file: /etc/kcm/tls/ca.pem', `ca_file: ${testCa().cert}`);
    expect(config).toContain(MEMBERS[0]);
    expect(config).toContain(`ca_file: ${testCa().cert}`);
    writeFileSync(path.join(promDir, 'prometheus.yml'), config);
    prometheus = spawn('prometheus', [`--config.file=${path.join(promDir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(promDir, 'data')}`, `--web.listen-address=${PROMETHEUS}`], { stdio: 'ignore' });
    const query = async (q: string) => {
      const res = await fetch(`http://${PROMETHEUS}/api/v1/query?query=${encodeURIComponent(q)}`, { signal: AbortSignal.timeout(2_000) });
      const body = (await res.json()) as { status: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
      return body.data.result;
    };
    // Wait until every member has been scraped, then ask who leads.
    await waitFor('Prometheus to scrape all three members', async () => (await query('up{job="kcm-manager"} == 1').catch(() => [])).length === 3, 30_000, 500);
    const leaders = await query('kcm_raft_is_leader{group="kcm"} == 1');
    expect(leaders.map((r) => r.metric.instance)).toEqual([await waitFor('a leader', leaderOverHttps, 20_000, 200)]);
    // With a leader scraped, KcmNoLeader is not firing, and an evaluation made before every
    // member was scraped (pending, max over one follower) clears at the next evaluation.
    expect(await query('ALERTS{alertname="KcmNoLeader", alertstate="firing"}')).toEqual([]);
    await waitFor('KcmNoLeader to be neither pending nor firing', async () => (await query('ALERTS{alertname="KcmNoLeader"}')).length === 0, 15_000, 500);
  });
});
