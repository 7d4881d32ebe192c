// upgrade_cluster's refusals and plan, on the recording fake agents: what it would do, in
// which order, and what it refuses before anything is committed. The upgrade itself runs on
// real engines in test/cluster/upgrade-cluster.test.ts.

import { describe, expect, it } from 'vitest';
import { request, startHarness } from './grow-harness';

describe('upgrade_cluster before it runs', () => {
  it('a dry run shows the standbys first, then the switch away from each master, then the compute nodes; nothing is committed or asked', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const jobsBefore = h.jobCount();
    const plan = await h.manager.service.planJob!(request('upgrade_cluster', { cluster_id: cluster.id, storage_version: '10.11.19', computer_version: '15.20', dry_run: '1' }));
    expect(plan.steps).toEqual(['check the cluster', 'upgrade the standbys', 'switch the masters', 'upgrade the old masters', 'upgrade the compute nodes']);
    const order = (plan.plan as { order: { shards: { shard_id: string; standbys_first: string[]; then_switch_from: string }[]; comps: string[] } }).order;
    expect(order.shards).toHaveLength(2);
    for (const s of order.shards) {
      const shard = cluster.shards[s.shard_id];
      const master = shard.nodes[shard.masterNodeId];
      expect(s.then_switch_from).toBe(`${master.hostaddr}_${master.port}`);
      expect(s.standbys_first).toHaveLength(2);
      expect(s.standbys_first).not.toContain(s.then_switch_from);
    }
    expect(order.comps).toHaveLength(2);
    expect(h.jobCount()).toBe(jobsBefore);
    expect(h.calls).toEqual([]);
  });

  it('refuses a cluster that does not exist, and versions of another series, naming the field', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    expect(await h.refusal('upgrade_cluster', { cluster_id: '99', storage_version: '10.11.19' })).toEqual(['NOT_FOUND', expect.stringContaining('paras.cluster_id')]);
    expect(() => request('upgrade_cluster', { cluster_id: cluster.id, storage_version: '11.4.2' })).toThrow(/paras\.storage_version: must be a MariaDB 10\.11 version/);
    expect(() => request('upgrade_cluster', { cluster_id: cluster.id })).toThrow(/paras\.storage_version: names no version/);
    expect(h.calls).toEqual([]);
  });
});
