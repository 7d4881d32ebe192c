// set_noswitch against the replicated state (no engine is touched: the job only commits the
// window), and get_cluster_detail showing it. The real-engine run is in
// test/cluster/manual-switch.test.ts.

import { describe, expect, it } from 'vitest';
import { setNoswitch } from '../../../src/jobs/shard-ha/set-noswitch';
import { noSwitchUntil } from '../../../src/meta/noswitch';
import { clusterDetail } from '../../../src/queries/clusters';
import { request, startHarness } from '../grow-harness';

const harness = () => startHarness();

describe('set_noswitch', () => {
  it('opens a window of timeout seconds on one shard, from the submission time, and the detector reads it with noSwitchUntil', async () => {
    const h = await harness();
    const cluster = await h.readyCluster();
    const status = await h.run('set_noswitch', { type: '1', timeout: '600', cluster_id: cluster.id, shard_id: '1' });
    await h.runner.stop();
    expect(status.status, status.errorInfo).toBe('done');
    const submittedAt = h.store.s.jobs[status.jobId].submittedAt;
    expect(noSwitchUntil(h.store.s, cluster.id, '1', submittedAt)).toBe(submittedAt + 600_000);
    expect(noSwitchUntil(h.store.s, cluster.id, '1', submittedAt + 600_000)).toBeNull(); // the window has passed
    expect(noSwitchUntil(h.store.s, cluster.id, '2', submittedAt)).toBeNull(); // the other shard is not covered
    expect(status.attachment).toEqual({ cluster_id: cluster.id, list_shard: [{ shard_id: '1', noswitch_until: String(Math.floor((submittedAt + 600_000) / 1000)) }] });
    expect(h.calls).toEqual([]); // nothing asked of any agent
  });

  it('without shard_id covers every shard of the cluster; type 0 closes the window early', async () => {
    const h = await harness();
    const cluster = await h.readyCluster();
    const opened = await h.run('set_noswitch', { type: '1', timeout: '60', cluster_id: cluster.id });
    expect(opened.status, opened.errorInfo).toBe('done');
    const now = Date.now();
    expect(['1', '2'].map((s) => noSwitchUntil(h.store.s, cluster.id, s, now) !== null)).toEqual([true, true]);
    const closed = await h.run('set_noswitch', { type: '0', cluster_id: cluster.id, shard_id: '2' });
    await h.runner.stop();
    expect(closed.attachment).toEqual({ cluster_id: cluster.id, list_shard: [{ shard_id: '2', noswitch_until: '' }] });
    expect(['1', '2'].map((s) => noSwitchUntil(h.store.s, cluster.id, s, now) !== null)).toEqual([true, false]);
    expect(h.store.s.jobs[closed.jobId].lockKey).toBe(`noswitch:${cluster.id}`);
  });

  it('refuses an unknown cluster and a shard of another cluster before committing anything', async () => {
    const h = await harness();
    const cluster = await h.readyCluster();
    const jobs = h.jobCount();
    expect(await h.refusal('set_noswitch', { type: '1', timeout: '60', cluster_id: '99' })).toEqual(['NOT_FOUND', 'paras.cluster_id: cluster 99 does not exist']);
    expect(await h.refusal('set_noswitch', { type: '1', timeout: '60', cluster_id: cluster.id, shard_id: '7' })).toEqual([
      'NOT_FOUND',
      `paras.shard_id: shard 7 is not part of cluster ${cluster.id}`,
    ]);
    await h.runner.stop();
    expect(h.jobCount()).toBe(jobs);
  });

  it('get_cluster_detail shows each shard\'s open window as a Unix second, and nothing once it has passed', async () => {
    const h = await harness();
    const cluster = await h.readyCluster();
    const status = await h.run('set_noswitch', { type: '1', timeout: '120', cluster_id: cluster.id, shard_id: '2' });
    await h.runner.stop();
    const until = h.store.s.clusters[cluster.id].shards['2'].noSwitchUntil!;
    const detailAt = async (nowMs: number) => {
      const reply = await clusterDetail(h.store.s, request('get_cluster_detail', { cluster_id: cluster.id }), { agents: h.agents, now: () => nowMs });
      return (reply.list_shard as { shard_id: string; noswitch_until: string }[]).map((s) => [s.shard_id, s.noswitch_until]);
    };
    expect(status.status).toBe('done');
    expect(await detailAt(until - 1000)).toEqual([['1', ''], ['2', String(Math.floor(until / 1000))]]);
    expect(await detailAt(until)).toEqual([['1', ''], ['2', '']]);
  });
});
