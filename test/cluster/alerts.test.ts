// The DBA's alerts fired against a real local group (issue 34 must-show): Debian's Prometheus
// scrapes the manager's and the three agents' /metrics every 500 ms and evaluates
// deploy/prometheus/kcm-alerts.yml, and each alert is made to fire by the fault it is about:
//   - a short-lived certificate: host 3's agent (its own process) gets a 10-day certificate
//     written over its files; it reloads it without a restart -> KcmCertificateExpiringSoon;
//     then the manager's own (shared with the in-process agents) gets a 20-day one: its Raft
//     listener serves it within seconds -> KcmCertificateExpiringSoon{member}, and the
//     failover below runs on it;
//   - master down, then killed: with set_noswitch on, the shard master's mariadbd SIGSTOPped
//     (it stays down, neither failed over nor restarted) -> KcmShardMasterDown; the window
//     closed and the mariadbd SIGKILLed -> the leader's failover -> KcmFailoverDone;
//   - archive lag forced: iptables rejects every connection to the backup storage's agent ->
//     the RPO grows past the threshold -> KcmBinlogArchiveLagHigh;
//   - backup policy missed: a policy whose daily window never opens sees its period pass without
//     a run; a period is at least an hour and the allowance a day more, so the manager's clock
//     is moved 26 hours on (its own clock only: the engines and Prometheus keep the real time).
// The shipped rules are used with two changes a test needs, both asserted to have been made:
// every `for:` is 0s (the faults do not last minutes), and the RPO threshold is 10 s, not 300.
// One cluster, 1 shard x 3 nodes (the smallest shard kcm makes), one compute node.

import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import * as tls from 'node:tls';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activeTls, issueCert, loadTlsMaterial } from '@kcm/agent-api';
import { HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { createHaCluster, haJobs, mariadbdPid, registerMachines, TABLE, type HaCluster } from './ha-fixture';
import { testCa, testCert } from '../helpers/pki';

const run = promisify(execFile);
const AGENT_PORT = 58230;
const METRICS_PORT = AGENT_PORT + 2; // kcm-agent's default: the gRPC port + 2
const MEMBER = '127.0.1.89:58230';
const PROMETHEUS = '127.0.1.89:58239';
const STORAGE_HOST = HOSTS[2];
const LAG_THRESHOLD_S = 10;
const deployDir = fileURLToPath(new URL('../../deploy/prometheus/', import.meta.url));

interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

async function promQuery(q: string): Promise<PromSample[]> {
  const res = await fetch(`http://${PROMETHEUS}/api/v1/query?query=${encodeURIComponent(q)}`, { signal: AbortSignal.timeout(3_000) });
  const body = (await res.json()) as { status: string; data: { result: PromSample[] } };
  if (body.status !== 'success') throw new Error(`query ${q}: ${JSON.stringify(body)}`);
  return body.data.result;
}

/** The alert's series that fired at some evaluation in the last 30 minutes (a short firing is not missed between two polls). */
const firedSeries = (alertname: string) => promQuery(`max_over_time(ALERTS{alertname="${alertname}",alertstate="firing"}[30m])`).catch(() => []);
/** Waits until the scraped archive lag is under half the test's RPO threshold: the archive keeps up. */
const archiveLagScrapedUnder = (what: string) =>
  waitUntil(what, async () => {
    const lag = await promQuery('max(kcm_binlog_archive_lag_seconds)');
    return lag.length === 1 && Number(lag[0].value[1]) < LAG_THRESHOLD_S / 2 ? true : undefined;
  }, 120_000, 500);

/** One value of a /metrics text, by its full series name. */
async function scrapeValue(address: string, series: string): Promise<number | undefined> {
  const text = await (await fetch(`http://${address}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** The serial of the certificate a new TLS connection to host:port is served with. */
function servedSerial(host: string, port: number): Promise<string> {
  const m = activeTls()!;
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host, port, ca: m.caPem, cert: m.certPem, key: m.keyPem, ALPNProtocols: ['h2'] }, () => {
      resolve(socket.getPeerX509Certificate()!.serialNumber);
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

/** The shipped rules with the test's two changes, each checked to have matched. */
function testRules(): string {
  const shipped = readFileSync(path.join(deployDir, 'kcm-alerts.yml'), 'utf8');
  const lag = '(kcm_binlog_archive_lag_seconds) > 300';
  expect(shipped).toContain(lag);
  expect(shipped).toMatch(/for: [1-9]/);
  return shipped.replace(lag, `(kcm_binlog_archive_lag_seconds) > ${LAG_THRESHOLD_S}`).replace(/for: \S+/g, 'for: 0s');
}

describe('the DBA alerts fire against a real local group, each from its own fault', () => {
  let f: ClusterFixture;
  let ha: HaCluster;
  let prometheus: ChildProcess | undefined;
  let clockSkewMs = 0;
  let writer: { stop: boolean; done?: Promise<void> } = { stop: true };
  const rejectRules: string[][] = [];

  beforeAll(async () => {
    f = await startClusterFixture({
      agentPort: AGENT_PORT,
      member: MEMBER,
      processAgentHosts: [STORAGE_HOST],
      agentMetrics: true,
      managerClock: () => Date.now() + clockSkewMs,
      managerConfig: { binlogArchiveIntervalMs: 1000 },
    });
    await registerMachines(f, [1]);
    const storage = await f.runJob('create_backup_storage', { name: 'alerts', stype: 'fs', hostaddr: STORAGE_HOST, port: String(AGENT_PORT), path: path.join(f.tmp, 'backups') }, 30_000);
    expect(storage.status, storage.error_info).toBe('done');
    ha = await createHaCluster(f, HOSTS[1]);
    // A slow steady writer on whatever node is master: a shard with writes has its binlog
    // closed and archived every round, so the archive's lag is seconds, not the idle flush's minute.
    writer = { stop: false };
    writer.done = (async () => {
      for (let id = 1; !writer.stop; id++) {
        await ha.storageQuery(ha.master(), `INSERT INTO ${TABLE} (id, at) VALUES (${id}, ${Date.now()})`).catch(() => {});
        await new Promise((r) => setTimeout(r, 500));
      }
    })();

    const promDir = path.join(f.tmp, 'prometheus');
    mkdirSync(promDir);
    writeFileSync(path.join(promDir, 'kcm-alerts.yml'), testRules());
    const shipped = readFileSync(path.join(deployDir, 'prometheus.yml'), 'utf8');
    const targets = [`targets: ['${MEMBER}']`, `targets: [${HOSTS.map((h) => `'${h}:${METRICS_PORT}'`).join(', ')}]`];
    let n = 0;
    const config = shipped
      // 500 ms: the faults below last until the test sees their alert; a short interval only makes each wait shorter.
      .replace(/scrape_interval: \S+/, 'scrape_interval: 500ms')
      .replace(/evaluation_interval: \S+/, 'evaluation_interval: 500ms')
      .replace(/targets: \[[^\]]*\]/g, () => targets[n++])
      // The fixture's in-process manager has no certificate, so it serves plain HTTP (docs/https.md): scrape it so.
      .replace(/\n\s+scheme: https\n\s+tls_config:\n\s+ca_file: \S+/, '');
    expect(n).toBe(2);
    expect(config).not.toContain('scheme: https');
    writeFileSync(path.join(promDir, 'prometheus.yml'), config);
    prometheus = spawn('prometheus', [`--config.file=${path.join(promDir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(promDir, 'data')}`, `--web.listen-address=${PROMETHEUS}`], { stdio: 'ignore' });
    await waitUntil('Prometheus scraping the manager and the three agents', async () => {
      const up = await promQuery('up').catch((err: Error) => err.message);
      if (typeof up !== 'string' && up.filter((s) => s.value[1] === '1').length === 4) return true;
      throw new Error(`up: ${typeof up === 'string' ? up : JSON.stringify(up.map((s) => [s.metric.instance, s.value[1]]))}`);
    }, 60_000, 500);
  }, 600_000);

  afterAll(async () => {
    writer.stop = true;
    await writer.done;
    for (const rule of rejectRules) await run('iptables', ['-D', 'OUTPUT', ...rule]).catch(() => {});
    prometheus?.kill('SIGKILL');
    ha?.close();
    await f?.close();
  }, 180_000);

  it('a group in good health fires none of them', async () => {
    // The archive has caught up with the writer, and every series the rules read is scraped.
    await archiveLagScrapedUnder('the archive lag scraped under the threshold');
    expect((await promQuery('kcm_shard_master_up == 1')).length).toBe(1);
    // The agents' view of the same group, measured by each agent: three mariadbd and one postgres running, none down.
    const instances = async (q: string) => Object.fromEntries((await promQuery(q)).map((r) => [r.metric.kind, Number(r.value[1])]));
    expect(await instances('sum by (kind) (kcm_agent_instances{state="running"})')).toEqual({ mariadb: 3, postgres: 1 });
    expect(await instances('sum by (kind) (kcm_agent_instances{state="down"})')).toEqual({ mariadb: 0, postgres: 0 });
    expect((await promQuery('kcm_agent_disk_free_bytes > 0')).length).toBeGreaterThanOrEqual(3);
    expect((await promQuery('kcm_failovers_total')).length).toBe(2); // done and failed, both 0
    expect((await promQuery('kcm_tls_cert_expiry_timestamp_seconds')).length).toBe(4); // the manager's and each agent's
    expect((await promQuery('ALERTS{alertname=~"KcmShardMasterDown|KcmFailoverDone|KcmFailoverFailed|KcmBinlogArchiveLagHigh|KcmCertificateExpiringSoon|KcmBackupPolicyMissed"}'))).toEqual([]);
  }, 180_000);

  it('a short-lived certificate written over an agent\'s files is loaded without a restart and fires KcmCertificateExpiringSoon', async () => {
    const files = testCert('agent', [STORAGE_HOST]);
    const agentPid = f.processAgents.get(STORAGE_HOST)!.pid;
    const short = issueCert(testCa(), path.join(f.tmp, 'short-cert'), { name: 'agent-short', role: 'agent', hosts: [STORAGE_HOST], days: 10 });
    const shortCert = loadTlsMaterial(short, 'agent').cert;
    copyFileSync(short.key, files.key);
    copyFileSync(short.cert, files.cert);
    // The fault landed: new connections to the agent are served the 10-day certificate, by the same process.
    await waitUntil('the agent serving the short-lived certificate', async () => ((await servedSerial(STORAGE_HOST, AGENT_PORT).catch(() => '')) === shortCert.serialNumber ? true : undefined), 30_000, 500);
    expect(f.processAgents.get(STORAGE_HOST)!.pid).toBe(agentPid);
    const expiry = await scrapeValue(`${STORAGE_HOST}:${METRICS_PORT}`, 'kcm_tls_cert_expiry_timestamp_seconds{use="grpc"}');
    expect(expiry).toBe(Math.floor(Date.parse(shortCert.validTo) / 1000));
    const fired = await waitUntil('KcmCertificateExpiringSoon firing', async () => {
      const s = await firedSeries('KcmCertificateExpiringSoon');
      return s.length > 0 ? s : undefined;
    }, 60_000, 500);
    expect(fired.map((s) => [s.metric.instance, s.metric.use])).toEqual([[`${STORAGE_HOST}:${METRICS_PORT}`, 'grpc']]);
  }, 180_000);

  it('the manager\'s certificate renewed on disk is served by its Raft listener without a restart, and fires KcmCertificateExpiringSoon for the member', async () => {
    // The in-process manager (and the in-process agents of hosts 1 and 2) share one certificate (useTestTls).
    const memberHost = MEMBER.slice(0, MEMBER.lastIndexOf(':'));
    const files = testCert('manager', [...HOSTS, memberHost]);
    const short = issueCert(testCa(), path.join(f.tmp, 'short-cert'), { name: 'manager-short', role: 'manager', hosts: [...HOSTS, memberHost], days: 20 });
    const shortCert = loadTlsMaterial(short, 'manager').cert;
    copyFileSync(short.key, files.key);
    copyFileSync(short.cert, files.cert);
    const raftPort = Number(MEMBER.slice(MEMBER.lastIndexOf(':') + 1)) + 1;
    await waitUntil('the manager\'s Raft listener serving the renewed certificate', async () => ((await servedSerial(memberHost, raftPort).catch(() => '')) === shortCert.serialNumber ? true : undefined), 30_000, 500);
    expect(await servedSerial(HOSTS[0], AGENT_PORT)).toBe(shortCert.serialNumber);
    const fired = await waitUntil('KcmCertificateExpiringSoon firing for the member', async () => {
      const s = (await firedSeries('KcmCertificateExpiringSoon')).filter((x) => x.metric.member === MEMBER);
      return s.length > 0 ? s : undefined;
    }, 60_000, 500);
    expect(fired.map((s) => [s.metric.instance, s.metric.use])).toEqual([[MEMBER, 'grpc']]);
    // The failover below runs on the renewed certificate: its connections to the agents are new ones.
  }, 180_000);

  it('a shard master that stops answering fires KcmShardMasterDown while it stays down; SIGKILLed, its failover fires KcmFailoverDone', async () => {
    const oldMaster = ha.master();
    const shardId = Object.keys(ha.cluster().shards)[0];
    const pid = await mariadbdPid(oldMaster);
    // A master that stays down is what the alert is for (one failed over within a second is
    // KcmFailoverDone's): set_noswitch keeps the leader from replacing it, and SIGSTOP keeps its
    // process there, so the agent's supervisor does not restart it either. The 0 lasts until
    // this test ends it, so no scrape can miss it.
    const noswitch = await f.runJob('set_noswitch', { type: '1', timeout: '600', cluster_id: ha.clusterId, shard_id: shardId });
    expect(noswitch.status, noswitch.error_info).toBe('done');
    process.kill(pid, 'SIGSTOP');
    const stopped = await waitUntil('the master stopped', async () => ((await readFile(`/proc/${pid}/stat`, 'utf8')).split(' ')[2] === 'T' ? true : undefined), 10_000, 100);
    expect(stopped).toBe(true);
    const down = await waitUntil('KcmShardMasterDown firing', async () => {
      const s = await promQuery('ALERTS{alertname="KcmShardMasterDown",alertstate="firing"}');
      return s.length > 0 ? s : undefined;
    }, 60_000, 500);
    expect(down.map((s) => [s.metric.cluster_id, s.metric.shard_id])).toEqual([[ha.clusterId, shardId]]);
    expect(haJobs(f, 'shard_failover')).toEqual([]);

    // Now the kill: the window closed, the stopped mariadbd SIGKILLed, and the leader fails it over.
    const closed = await f.runJob('set_noswitch', { type: '0', cluster_id: ha.clusterId, shard_id: shardId });
    expect(closed.status, closed.error_info).toBe('done');
    process.kill(pid, 'SIGKILL');
    const killedAt = Date.now();
    // The fault landed: that mariadbd is gone (or a zombie waiting to be reaped).
    await waitUntil('the killed mariadbd gone', async () => {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
      return stat === '' || stat.split(' ')[2] === 'Z' ? true : undefined;
    }, 10_000, 100);
    const job = await waitUntil('shard_failover ended', async () => haJobs(f, 'shard_failover').find((j) => j.status === 'done' || j.status === 'failed'), 120_000);
    console.log(`failover: submitted ${job.submittedAt - killedAt} ms after the kill, ${(job.finishedAt ?? 0) - job.submittedAt} ms long`);
    expect(job.status).toBe('done');
    expect(ha.master().id).not.toBe(oldMaster.id);
    const done = await waitUntil('KcmFailoverDone firing', async () => {
      const s = await promQuery('ALERTS{alertname="KcmFailoverDone",alertstate="firing"}');
      return s.length > 0 ? s : undefined;
    }, 60_000, 500);
    expect(done.map((s) => [s.metric.cluster_id, s.metric.shard_id, s.metric.severity])).toEqual([[ha.clusterId, shardId, 'info']]);
    // The new master measured up: the down alert ends with the failover.
    await waitUntil('KcmShardMasterDown resolved', async () => ((await promQuery('ALERTS{alertname="KcmShardMasterDown",alertstate="firing"}')).length === 0 ? true : undefined), 60_000, 500);
    expect(await firedSeries('KcmFailoverFailed')).toEqual([]);
  }, 300_000);

  it('the backup storage cut off from the archiver fires KcmBinlogArchiveLagHigh', async () => {
    await archiveLagScrapedUnder('the archive caught up after the failover');
    expect(await promQuery('ALERTS{alertname="KcmBinlogArchiveLagHigh"}')).toEqual([]);
    // Every new connection to the storage agent's gRPC and data-plane ports is refused (its /metrics stays reachable).
    for (const port of [AGENT_PORT, AGENT_PORT + 1]) {
      const rule = ['-d', STORAGE_HOST, '-p', 'tcp', '--dport', String(port), '-j', 'REJECT', '--reject-with', 'tcp-reset'];
      await run('iptables', ['-I', 'OUTPUT', ...rule]);
      rejectRules.push(rule);
    }
    const fired = await waitUntil('KcmBinlogArchiveLagHigh firing', async () => {
      const s = await promQuery('ALERTS{alertname="KcmBinlogArchiveLagHigh",alertstate="firing"}');
      return s.length > 0 ? s : undefined;
    }, 120_000, 500);
    expect(fired.map((s) => s.metric.cluster_id)).toEqual([ha.clusterId]);
    // The fault landed: the rules refused packets, and the lag the manager reports is past the threshold.
    const { stdout } = await run('iptables', ['-L', 'OUTPUT', '-v', '-n', '-x']);
    const refused = stdout.split('\n').filter((l) => l.includes('REJECT') && l.includes(STORAGE_HOST)).map((l) => Number(l.trim().split(/\s+/)[0]));
    expect(refused.length).toBe(2);
    expect(refused.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    const lag = Number((await promQuery('max(kcm_binlog_archive_lag_seconds)'))[0].value[1]);
    console.log(`archive lag with the storage cut off: ${lag.toFixed(1)} s (threshold ${LAG_THRESHOLD_S} s); packets refused: ${refused.join(', ')}`);
    expect(lag).toBeGreaterThan(LAG_THRESHOLD_S);
    for (const rule of rejectRules.splice(0)) await run('iptables', ['-D', 'OUTPUT', ...rule]);
  }, 300_000);

  it('a backup policy whose period passed without a run fires KcmBackupPolicyMissed', async () => {
    // A daily window 8 hours from now (local time), an hour long: it is closed now and 26 hours on.
    const hhmmss = (ms: number) => new Date(ms).toTimeString().slice(0, 8);
    const windowStart = Date.now() + 8 * 3_600_000;
    const set = await f.runJob('set_backup_policy', { cluster_id: ha.clusterId, full_every_hours: '1', window: `${hhmmss(windowStart)}-${hhmmss(windowStart + 3_600_000)}`, keep_days: '7', storage_name: 'alerts' }, 60_000);
    expect(set.status, set.error_info).toBe('done');
    expect(await promQuery('ALERTS{alertname="KcmBackupPolicyMissed"}')).toEqual([]);
    clockSkewMs = 26 * 3_600_000;
    const fired = await waitUntil('KcmBackupPolicyMissed firing', async () => {
      const s = await promQuery('ALERTS{alertname="KcmBackupPolicyMissed",alertstate="firing"}');
      return s.length > 0 ? s : undefined;
    }, 60_000, 500);
    expect(fired.map((s) => s.metric.cluster_id)).toEqual([ha.clusterId]);
    // The fault landed: no backup set of the cluster exists and the policy never ran, 26 hours on by the manager's clock.
    const state = f.manager.store.state();
    expect(Object.values(state.backupSets).filter((s) => s.clusterId === ha.clusterId)).toEqual([]);
    const age = Number((await promQuery(`max(kcm_backup_policy_backup_age_seconds{cluster_id="${ha.clusterId}"})`))[0].value[1]);
    const allowed = Number((await promQuery(`max(kcm_backup_policy_allowed_age_seconds{cluster_id="${ha.clusterId}"})`))[0].value[1]);
    console.log(`backup age ${age.toFixed(0)} s > allowed ${allowed} s (full_every_hours 1 plus a day)`);
    expect(age).toBeGreaterThan(allowed);
  }, 180_000);
});
