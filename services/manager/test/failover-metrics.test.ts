// kcm_failovers_total and the gRPC certificate's expiry on a manager's /metrics: every shard
// has its done and failed series from the first scrape (0), so the first failover is an
// increase Prometheus can see; a finished shard_failover job counts once, by its result.

import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { activeTls, loadTlsMaterial, useInsecure, useTls } from '@kcm/agent-api';
import { createManagerMetrics } from '../src/metrics';
import type { JobRecord } from '../src/meta/state';
import { cluster, stateWith } from './helpers/cluster-state';
import { testCert } from '../../../test/helpers/pki';

const series = async (registry: Registry, name: string) => (await registry.getSingleMetricAsString(name)).split('\n').filter((l) => !l.startsWith('#'));

describe('a manager\'s failover and certificate metrics', () => {
  afterAll(() => useInsecure());

  it('counts each finished shard_failover by cluster, shard and result, from 0', async () => {
    const state = stateWith(cluster('7', 'ready', [['1', '127.0.0.1', 1], ['2', '127.0.0.2', 1]], []));
    const registry = new Registry();
    const metrics = createManagerMetrics(registry, { raft: () => undefined, state: () => state, health: () => undefined });
    expect(await series(registry, 'kcm_failovers_total')).toEqual([
      'kcm_failovers_total{cluster_id="7",shard_id="71",result="done"} 0',
      'kcm_failovers_total{cluster_id="7",shard_id="71",result="failed"} 0',
    ]);
    const job = { id: '9', jobType: 'shard_failover', paras: { cluster_id: '7', shard_id: '71', failed_node_id: '1', reason: 'no process' } } as unknown as JobRecord;
    metrics.observeJobFinished(job, { ok: true } as never);
    metrics.observeJobFinished({ ...job, jobType: 'manual_switch' } as JobRecord, { ok: true } as never);
    expect(await series(registry, 'kcm_failovers_total')).toEqual([
      'kcm_failovers_total{cluster_id="7",shard_id="71",result="done"} 1',
      'kcm_failovers_total{cluster_id="7",shard_id="71",result="failed"} 0',
    ]);
  });

  it('exports when the member\'s gRPC certificate expires', async () => {
    useTls(loadTlsMaterial(testCert('manager', ['127.0.1.9']), 'manager'), { checkMs: 3_600_000 });
    const registry = new Registry();
    createManagerMetrics(registry, { raft: () => undefined, state: () => stateWith(), health: () => undefined, member: '127.0.1.9:58000' });
    const notAfter = Math.floor(Date.parse(activeTls()!.cert.validTo) / 1000);
    expect(await series(registry, 'kcm_tls_cert_expiry_timestamp_seconds')).toEqual([`kcm_tls_cert_expiry_timestamp_seconds{member="127.0.1.9:58000",use="grpc"} ${notAfter}`]);
  });
});
