// Placements made by jobs running at the same time: each must see the ones before it, also
// those not committed yet when it plans (issue 35, defect 11: six concurrent create_cluster
// jobs of one compute node each put all six compute nodes on one host of three).

import { describe, expect, it } from 'vitest';
import { createParas, request, startHarness } from './grow-harness';
import { until } from '../helpers/local-store';

const HOSTS = ['10.0.0.1', '10.0.0.2', '10.0.0.3'];

describe('placement by concurrent jobs', () => {
  it('six concurrent 1-compute-node create_cluster jobs spread their compute nodes over three hosts, two each', async () => {
    const h = await startHarness({ hosts: HOSTS, portsPerMachine: 20 });
    const paras = createParas({ shards: '1', comps: '1', cpu_limit_node: 'share', storage_iplists: [] });
    const submitted = await Promise.all(Array.from({ length: 6 }, () => h.manager.service.submitJob(request('create_cluster', paras))));
    await until(() => submitted.every(({ jobId }) => ['done', 'failed'].includes(h.store.s.jobs[jobId].status)), 20_000);
    for (const { jobId } of submitted) expect(h.store.s.jobs[jobId].status).toBe('done');
    const compsPerHost = new Map<string, number>();
    for (const cluster of Object.values(h.store.s.clusters)) {
      for (const comp of Object.values(cluster.comps)) compsPerHost.set(comp.hostaddr, (compsPerHost.get(comp.hostaddr) ?? 0) + 1);
    }
    expect(Object.fromEntries(compsPerHost)).toEqual({ '10.0.0.1': 2, '10.0.0.2': 2, '10.0.0.3': 2 });
    // And the six masters too: one shard each, two per host.
    const mastersPerHost = new Map<string, number>();
    for (const cluster of Object.values(h.store.s.clusters)) {
      for (const shard of Object.values(cluster.shards)) {
        const host = shard.nodes[shard.masterNodeId].hostaddr;
        mastersPerHost.set(host, (mastersPerHost.get(host) ?? 0) + 1);
      }
    }
    expect(Object.fromEntries(mastersPerHost)).toEqual({ '10.0.0.1': 2, '10.0.0.2': 2, '10.0.0.3': 2 });
  });

  it('concurrent add_comps jobs on two clusters do not both pick the same least-loaded host', async () => {
    const h = await startHarness({ hosts: HOSTS, portsPerMachine: 20 });
    const a = await h.readyCluster({ shards: '1', comps: '1', cpu_limit_node: 'share', storage_iplists: [] });
    const b = await h.readyCluster({ shards: '1', comps: '1', cpu_limit_node: 'share', storage_iplists: [] });
    const before = new Set([...Object.values(a.comps), ...Object.values(b.comps)].map((c) => c.id));
    const submitted = await Promise.all([a, b].map((c) => h.manager.service.submitJob(request('add_comps', { cluster_id: c.id, comps: '1', computer_iplists: [] }))));
    await until(() => submitted.every(({ jobId }) => ['done', 'failed'].includes(h.store.s.jobs[jobId].status)), 20_000);
    for (const { jobId } of submitted) expect(h.store.s.jobs[jobId].status).toBe('done');
    const added = Object.values(h.store.s.clusters).flatMap((c) => Object.values(c.comps)).filter((c) => !before.has(c.id));
    expect(added).toHaveLength(2);
    expect(new Set(added.map((c) => c.hostaddr)).size).toBe(2);
  });
});
