// The agent's /metrics: instance states as measured by the supervisor's census, restart
// counts, data-plane transfers, free space of registered directories and the certificate's
// expiry, served over plain HTTP on GET /metrics only.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@kcm/common';
import { activeTls, loadTlsMaterial, useInsecure, useTls } from '@kcm/agent-api';
import * as grpc from '@grpc/grpc-js';
import { createAgentMetrics } from '../../src/metrics/agent-metrics';
import { countedTransfer, receivedTransfer, servingRecorder } from '../../src/metrics/transfers';
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

  it('counts what the agent receives by kind, for the agent whose server serves the call', async () => {
    // A transfer started outside any served call belongs to no agent: not counted.
    receivedTransfer('rebuild').add(999);
    const server = new grpc.Server({ interceptors: [servingRecorder(metrics.received)] });
    const raw = { serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b };
    const path = '/kcm.test.Restore/Read';
    server.addService({ Read: { path, requestStream: false, responseStream: false, requestSerialize: raw.serialize, requestDeserialize: raw.deserialize, responseSerialize: raw.serialize, responseDeserialize: raw.deserialize } }, {
      Read: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
        // The handler reads a stored object back, as a restore does (in pieces, later turns of the loop).
        const pieces = async function* () {
          for (const n of [100, 200, 300]) {
            await new Promise((r) => setImmediate(r));
            yield Buffer.alloc(n);
          }
        };
        void (async () => {
          let got = 0;
          for await (const piece of countedTransfer('restore', pieces())) got += piece.length;
          done(null, Buffer.from(String(got)));
        })();
      },
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    try {
      const reply = await new Promise<Buffer>((resolve, reject) => client.makeUnaryRequest(path, raw.serialize, raw.deserialize, Buffer.alloc(0), (err, r) => (err ? reject(err) : resolve(r!))));
      expect(reply.toString()).toBe('600');
    } finally {
      client.close();
      server.forceShutdown();
    }
    const text = await scrape();
    expect(valueOf(text, 'kcm_agent_transfer_received_bytes_total{kind="restore"}')).toBe(600);
    expect(valueOf(text, 'kcm_agent_transfers_received_total{kind="restore",result="ok"}')).toBe(1);
    expect(valueOf(text, 'kcm_agent_transfer_received_bytes_total{kind="rebuild"}')).toBeUndefined();
  });

  it('serves only GET /metrics', async () => {
    expect((await fetch(`http://${listener.address}/`)).status).toBe(404);
    expect((await fetch(`http://${listener.address}/metrics`, { method: 'POST' })).status).toBe(404);
  });
});
