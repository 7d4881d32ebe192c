// The agent's /metrics: instance states as measured by the supervisor's census, restart
// counts, data-plane transfers, free space of registered directories and the certificate's
// expiry, served over plain HTTP on GET /metrics only.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@kcm/common';
import { activeTls, loadTlsMaterial, useInsecure, useTls } from '@kcm/agent-api';
import { createAgentMetrics } from '../../src/metrics/agent-metrics';
import { startMetricsListener, type RunningMetricsListener } from '../../src/metrics/metrics-listener';
import type { InstanceCensus } from '../../src/capabilities/supervisor';
import { testCert } from '../../../../test/helpers/pki';

/** The value of one series in a Prometheus text exposition, undefined when absent. */
function valueOf(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('agent /metrics', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kcm-agent-metrics-'));
  let census: InstanceCensus[] = [];
  const metrics = createAgentMetrics({ census: async () => census });
  let listener: RunningMetricsListener;
  const scrape = async () => (await fetch(`http://${listener.address}/metrics`)).text();

  beforeAll(async () => {
    useTls(loadTlsMaterial(testCert('agent', ['127.0.0.1']), 'agent'), { checkMs: 3_600_000 });
    listener = await startMetricsListener({ hostaddr: '127.0.0.1', port: 0, registry: metrics.registry, logger: createLogger({ name: 'test', level: 'silent' }) });
  });

  afterAll(async () => {
    await listener?.close();
    useInsecure();
    rmSync(dir, { recursive: true, force: true });
  });

  it('counts instances by kind and measured state, and each one\'s supervisor restarts', async () => {
    census = [
      { kind: 'mariadb', port: 55101, desired: 'running', running: true, restarts: 0 },
      { kind: 'mariadb', port: 55102, desired: 'running', running: false, restarts: 3 },
      { kind: 'postgres', port: 55201, desired: 'stopped', running: false, restarts: 1 },
    ];
    const text = await scrape();
    expect(valueOf(text, 'kcm_agent_instances{kind="mariadb",state="running"}')).toBe(1);
    expect(valueOf(text, 'kcm_agent_instances{kind="mariadb",state="down"}')).toBe(1);
    expect(valueOf(text, 'kcm_agent_instances{kind="postgres",state="stopped"}')).toBe(1);
    expect(valueOf(text, 'kcm_agent_instances{kind="postgres",state="running"}')).toBe(0);
    expect(valueOf(text, 'kcm_agent_instance_up{kind="mariadb",port="55102"}')).toBe(0);
    expect(valueOf(text, 'kcm_agent_supervisor_restarts_total{kind="mariadb",port="55102"}')).toBe(3);
    // An instance removed from the host leaves the figures at the next scrape.
    census = census.slice(0, 1);
    expect(valueOf(await scrape(), 'kcm_agent_supervisor_restarts_total{kind="mariadb",port="55102"}')).toBeUndefined();
  });

  it('adds up data-plane transfers by op and result, with the bytes sent', async () => {
    metrics.observeTransfer('backup', 'ok', 1000);
    metrics.observeTransfer('backup', 'ok', 500);
    metrics.observeTransfer('get', 'failed', 0);
    const text = await scrape();
    expect(valueOf(text, 'kcm_agent_plane_transfers_total{op="backup",result="ok"}')).toBe(2);
    expect(valueOf(text, 'kcm_agent_plane_transfers_total{op="get",result="failed"}')).toBe(1);
    expect(valueOf(text, 'kcm_agent_plane_sent_bytes_total{op="backup"}')).toBe(1500);
  });

  it('measures free space of each registered data directory, and exports the certificate\'s expiry', async () => {
    metrics.noteDataDirs([dir, 'relative/not/registered']);
    const text = await scrape();
    const free = valueOf(text, `kcm_agent_disk_free_bytes{dir="${dir}"}`);
    const st = await import('node:fs/promises').then((fs) => fs.statfs(dir));
    expect(free).toBeGreaterThan(0);
    expect(Math.abs(free! - st.bavail * st.bsize)).toBeLessThan(64 * 2 ** 20); // the disk moves a little between the two looks
    expect(text).not.toContain('relative/not/registered');
    expect(valueOf(text, 'kcm_tls_cert_expiry_timestamp_seconds{use="grpc"}')).toBe(Math.floor(Date.parse(activeTls()!.cert.validTo) / 1000));
  });

  it('serves only GET /metrics', async () => {
    expect((await fetch(`http://${listener.address}/`)).status).toBe(404);
    expect((await fetch(`http://${listener.address}/metrics`, { method: 'POST' })).status).toBe(404);
  });
});
