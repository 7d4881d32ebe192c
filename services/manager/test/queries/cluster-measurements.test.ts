// get_cluster_summary and get_cluster_detail at fleet scale (issue 20): still measured from
// the agents, but concurrent queries share one probe per instance, a probe younger than the
// reuse bound is shown with its age instead of repeated, and only a few probes are open at
// once. Fake agents count the probes; no engine is involved.

import type { ValidRequest } from '@kcm/protocol';
import { describe, expect, it } from 'vitest';
import type { Agents } from '@kcm/agent-api';
import { clusterDetail, clusterQueries, clusterSummary } from '../../src/queries/clusters';
import { InstanceMeasurements } from '../../src/queries/instance-measurements';
import type { MetaState } from '../../src/meta/state';
import { cluster, stateWith } from '../helpers/cluster-state';

/** Agents whose probes answer online after `delayMs`, counting calls per instance and the most open at once. */
function countingAgents(delayMs = 5) {
  const calls = new Map<string, number>();
  let open = 0;
  let maxOpen = 0;
  const probe = async (host: string, port: number) => {
    const key = `${host}:${port}`;
    calls.set(key, (calls.get(key) ?? 0) + 1);
    maxOpen = Math.max(maxOpen, ++open);
    await new Promise((r) => setTimeout(r, delayMs));
    open--;
  };
  const agents = {
    mariadb: (host: string) => ({
      async probe(port: number) {
        await probe(host, port);
        return { port, state: 'online', pid: 7, reason: '', is_replica: false, read_only: false, master_host: '', master_port: 0, last_error: '', supervisor_restarts: 0 };
      },
    }),
    postgresProbe: (host: string) => ({
      async probe(port: number) {
        await probe(host, port);
        return { installed: true, running: true, accepting: true, pid: 0, version: '', problem: '', supervisor_restarts: 0 };
      },
    }),
  } as unknown as Agents;
  return { agents, calls, maxOpen: () => maxOpen, total: () => [...calls.values()].reduce((a, b) => a + b, 0) };
}

/** `count` clusters of 3 storage nodes and 1 compute node each: 4 instances per cluster. */
function fleet(count: number): MetaState {
  return stateWith(
    ...Array.from({ length: count }, (_, i) => {
      const id = String(i + 1);
      return cluster(id, 'ready', [[`${id}a`, `h${i}`, 57001], [`${id}b`, `h${i}`, 57002], [`${id}c`, `h${i}`, 57003]], [[`${id}d`, `h${i}`, 57010]]);
    }),
  );
}

const handlers = (agents: Agents, measurements?: InstanceMeasurements) => new Map(clusterQueries({ agents, measurements }));
const req = (paras: Record<string, unknown>) => ({ paras }) as unknown as ValidRequest;

describe('cluster queries at fleet scale', () => {
  it('two concurrent summaries make one probe per instance, not two, and both say online', async () => {
    const fake = countingAgents();
    const state = fleet(10);
    const summary = handlers(fake.agents).get('get_cluster_summary')!;
    const [a, b] = (await Promise.all([summary(req({}), state), summary(req({}), state)])) as { list_cluster: { status: string }[] }[];
    expect(fake.total()).toBe(40);
    expect([...fake.calls.values()].every((n) => n === 1)).toBe(true);
    expect([...a.list_cluster, ...b.list_cluster].every((c) => c.status === 'online')).toBe(true);
  });

  it('a detail asked while a summary is measuring shares its probes', async () => {
    const fake = countingAgents();
    const state = fleet(3);
    const h = handlers(fake.agents);
    const [, detail] = await Promise.all([h.get('get_cluster_summary')!(req({}), state), h.get('get_cluster_detail')!(req({ cluster_id: '2' }), state)]);
    expect(fake.total()).toBe(12);
    expect((detail as { status: string }).status).toBe('online');
  });

  it('never has more than maxInFlight probes open, however many instances a summary covers', async () => {
    const fake = countingAgents(2);
    const measurements = new InstanceMeasurements({ maxInFlight: 8 });
    const reply = (await clusterSummary(fleet(25), { agents: fake.agents, measurements })) as { list_cluster: { status: string }[] };
    expect(fake.total()).toBe(100);
    expect(fake.maxOpen()).toBeLessThanOrEqual(8);
    expect(fake.maxOpen()).toBe(8);
    expect(measurements.probesInFlight).toBe(0);
    expect(reply.list_cluster.every((c) => c.status === 'online')).toBe(true);
  });

  it('reuses a measurement younger than the bound and shows its age, then measures again once it is older', async () => {
    const fake = countingAgents(0);
    let clock = 10_000;
    const measurements = new InstanceMeasurements({ reuseForMs: 1_000, now: () => clock });
    const state = fleet(1);
    const detailOf = async () => (await clusterDetail(state, req({ cluster_id: '1' }), { agents: fake.agents, measurements })) as { measured_age_ms: string };
    expect((await detailOf()).measured_age_ms).toBe('0');
    clock += 600;
    expect((await detailOf()).measured_age_ms).toBe('600');
    expect(fake.total()).toBe(4);
    clock += 600;
    expect((await detailOf()).measured_age_ms).toBe('0');
    expect(fake.total()).toBe(8);
  });
});
