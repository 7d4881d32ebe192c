// Rollbacks that cannot reach a host (issue 12, defect 2): what a failed job leaves on a host
// whose agent died is recorded in the replicated state, named in the job's error, kept out
// of the port pool, and removed by the leader's RollbackFinisher once the agent answers
// again, also by a new leader. Fake agents here; test/cluster/rollback-agent-kill.test.ts
// does the same on real engines with a real SIGKILL.

import { describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { CommandKind } from '../../src/meta/commands';
import { restoreMeta, snapshotMeta } from '../../src/meta/snapshot/image';
import { finishableNow, RollbackFinisher } from '../../src/leader/rollback-finisher';
import { LocalStore } from '../helpers/local-store';
import { createParas, startHarness } from './grow-harness';

const DEAD = '10.0.0.3';

async function clusterWithDeadHost() {
  const h = await startHarness();
  // The agent of 10.0.0.3 dies while it installs its compute node (a SIGKILL ~1 s into the step).
  h.failOn({ method: 'pg.install', host: DEAD, kill: true });
  const status = await h.run('create_cluster', createParas({ computer_iplists: [DEAD, '10.0.0.4'] }));
  await h.runner.stop(); // the manager stays up: a test may start the runner again
  const finisher = (store = h.store) => new RollbackFinisher({ store, agents: h.agents, withAgent: h.withAgent, logger: silentLogger(), intervalMs: 60_000 });
  const removalsOn = (host: string) => h.calls.filter((c) => c.host === host && /remove/.test(c.method));
  return { ...h, status, finisher, removalsOn };
}

describe('a rollback that cannot reach a host is recorded and finished later', () => {
  it('create_cluster: the error names what is left and where; only its ports stay taken; the cluster stays until it is gone', async () => {
    const { store, status } = await clusterWithDeadHost();
    expect(status).toMatchObject({ status: 'failed', errorCode: 2000 });
    expect(status.errorInfo).toMatch(
      /^step 5 of 8 \(install compute nodes\) failed: comp_\d+ on 10\.0\.0\.3:6000: agent at 10\.0\.0\.3:58100 is unreachable: .*; rollback incomplete: agent 10\.0\.0\.3 unreachable; storage node \d+ at 10\.0\.0\.3:5000, storage node \d+ at 10\.0\.0\.3:5001 and compute node \d+ at 10\.0\.0\.3:6000 will be removed when it answers$/,
    );
    const [cluster] = Object.values(store.s.clusters);
    expect(cluster.status).toBe('creating');
    const left = [...Object.values(cluster.shards).flatMap((s) => Object.values(s.nodes)), ...Object.values(cluster.comps)];
    expect(left.map((i) => `${i.hostaddr}:${i.port}`).sort()).toEqual(['10.0.0.3:5000', '10.0.0.3:5001', '10.0.0.3:6000']);
    // Everything removed from the live hosts gave its port back; the dead host's stay taken.
    expect(Object.keys(store.s.ports)).toEqual([DEAD]);
    expect(Object.keys(store.s.ports[DEAD]).sort()).toEqual(['5000', '5001', '6000']);
    const record = store.s.pendingRollbacks[cluster.createdByJob];
    expect(record).toMatchObject({ jobType: 'create_cluster', clusterId: cluster.id, deleteCluster: true });
    expect(record.instances.map((i) => `${i.kind} ${i.hostaddr}:${i.port}`).sort()).toEqual([
      'compute node 10.0.0.3:6000', 'storage node 10.0.0.3:5000', 'storage node 10.0.0.3:5001',
    ]);
  });

  it('the leader removes what is left once the agent answers again, then returns the ports and forgets the cluster', async () => {
    const { store, down, finisher, removalsOn } = await clusterWithDeadHost();
    const jobId = Object.values(store.s.clusters)[0].createdByJob;
    const f = finisher();
    const before = removalsOn(DEAD).length;
    await f.finishAll();
    // Still dead: only its health is asked, nothing is removed or forgotten.
    expect(removalsOn(DEAD)).toHaveLength(before);
    expect(Object.keys(store.s.pendingRollbacks)).toEqual([jobId]);

    down.delete(DEAD);
    await f.finishAll();
    expect(removalsOn(DEAD).slice(before).map((c) => c.method).sort()).toEqual(['cgroup.remove', 'cgroup.remove', 'cgroup.remove', 'mariadb.remove', 'mariadb.remove', 'pg.remove']);
    // The compute node's comp_datadir goes along: its data dir is found even if the agent never recorded it.
    expect(removalsOn(DEAD).find((c) => c.method === 'pg.remove')!.request.compDatadir).toBe('/c');
    expect(store.s.clusters).toEqual({});
    expect(store.s.ports).toEqual({});
    expect(store.s.pendingRollbacks).toEqual({});
  });

  it('with two hosts down, each host\'s ports come back when that host\'s instances are gone, not before', async () => {
    const h = await startHarness();
    h.failOn({ method: 'pg.install', host: DEAD, kill: true }, { method: 'pg.install', host: '10.0.0.4', kill: true });
    const status = await h.run('create_cluster', createParas({ computer_iplists: [DEAD, '10.0.0.4'] }));
    await h.runner.stop(); // the finisher below proposes through the running manager
    expect(status.errorInfo).toMatch(/rollback incomplete: agent 10\.0\.0\.3 unreachable; .* will be removed when it answers; agent 10\.0\.0\.4 unreachable; compute node \d+ at 10\.0\.0\.4:6000 will be removed when it answers$/);
    const finisher = new RollbackFinisher({ store: h.store, agents: h.agents, withAgent: h.withAgent, logger: silentLogger() });
    h.down.delete(DEAD);
    await finisher.finishAll();
    expect(Object.keys(h.store.s.ports)).toEqual(['10.0.0.4']);
    expect(Object.values(h.store.s.pendingRollbacks)[0].instances.map((i) => `${i.hostaddr}:${i.port}`)).toEqual(['10.0.0.4:6000']);
    expect(Object.keys(h.store.s.clusters)).toHaveLength(1);
    h.down.delete('10.0.0.4');
    await finisher.finishAll();
    expect(h.store.s.ports).toEqual({});
    expect(h.store.s.clusters).toEqual({});
  });

  it('a new leader carries on: the record survives the snapshot, and nothing is forgotten that was not committed', async () => {
    const { store, down, finisher } = await clusterWithDeadHost();
    down.delete(DEAD);
    // The old leader removes the instances but loses leadership before it can commit that.
    store.failProposals = true;
    await finisher().finishAll();
    expect(Object.keys(store.s.ports)).toEqual([DEAD]);

    const next = new LocalStore();
    Object.assign(next.s, restoreMeta(snapshotMeta(store.s)));
    expect(Object.values(next.s.pendingRollbacks)[0].instances).toHaveLength(3);
    await finisher(next).finishAll();
    expect(next.s.clusters).toEqual({});
    expect(next.s.ports).toEqual({});
    expect(next.s.pendingRollbacks).toEqual({});
  });

  it('a new leader\'s finisher acts only once its state has caught up with every committed entry', async () => {
    const { store, down, agents, withAgent, removalsOn } = await clusterWithDeadHost();
    down.delete(DEAD);
    let release = () => {};
    const barrier = new Promise<void>((resolve) => (release = resolve));
    const f = new RollbackFinisher({ store, agents, withAgent, logger: silentLogger(), caughtUp: () => barrier });
    const before = removalsOn(DEAD).length;
    const round = f.finishAll();
    await new Promise((r) => setTimeout(r, 20));
    expect(removalsOn(DEAD)).toHaveLength(before);
    release();
    await round;
    expect(store.s.pendingRollbacks).toEqual({});
  });

  it('the finisher leaves a record alone while its job is unfinished or another job holds the cluster', async () => {
    const { store } = await clusterWithDeadHost();
    const record = Object.values(store.s.pendingRollbacks)[0];
    expect(finishableNow(store.s, record)).toBe(true);
    store.s.runQueues[`cluster:${record.clusterId}`] = ['999'];
    expect(finishableNow(store.s, record)).toBe(false);
    delete store.s.runQueues[`cluster:${record.clusterId}`];
    store.s.jobs[record.jobId].result = null;
    expect(finishableNow(store.s, record)).toBe(false);
  });

  it('delete_cluster of the half-made cluster removes everything, returns every port and drops the record', async () => {
    const { store, down, runner, run, removalsOn } = await clusterWithDeadHost();
    const cluster = Object.values(store.s.clusters)[0];
    down.delete(DEAD);
    runner.start();
    const before = removalsOn(DEAD).length;
    const status = await run('delete_cluster', { cluster_id: cluster.id });
    await runner.stop();
    expect(status.status, status.errorInfo).toBe('done');
    expect(removalsOn(DEAD).slice(before).map((c) => c.method).filter((m) => m !== 'cgroup.remove').sort()).toEqual(['mariadb.remove', 'mariadb.remove', 'pg.remove']);
    expect(store.s.clusters).toEqual({});
    expect(store.s.ports).toEqual({});
    expect(store.s.pendingRollbacks).toEqual({});
  });

  it('add_comps: the same recorded rollback; the cluster keeps serving and the comp goes when its agent answers', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const portsBefore = JSON.stringify(h.store.s.ports);
    h.failOn({ method: 'pg.install', host: '10.0.0.4', kill: true });
    const status = await h.run('add_comps', { cluster_id: cluster.id, comps: '1', computer_iplists: ['10.0.0.4'] });
    expect(status).toMatchObject({ status: 'failed', errorCode: 2000 });
    expect(status.errorInfo).toMatch(/; rollback incomplete: agent 10\.0\.0\.4 unreachable; compute node \d+ at 10\.0\.0\.4:600\d will be removed when it answers$/);
    expect(h.store.s.clusters[cluster.id].status).toBe('ready');
    expect(JSON.stringify(h.store.s.ports)).not.toBe(portsBefore); // the new comp's port stays taken

    h.down.delete('10.0.0.4');
    await new RollbackFinisher({ store: h.store, agents: h.agents, withAgent: h.withAgent, logger: silentLogger() }).finishAll();
    await h.runner.stop(); // the finisher below proposes through the running manager
    expect(Object.keys(h.store.s.clusters[cluster.id].comps)).toEqual(Object.keys(cluster.comps));
    expect(JSON.stringify(h.store.s.ports)).toBe(portsBefore);
    expect(h.store.s.pendingRollbacks).toEqual({});
  });

  it('add_shards: the placed shard is forgotten with its last node', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const shardsBefore = Object.keys(cluster.shards);
    const portsBefore = JSON.stringify(h.store.s.ports);
    h.failOn({ method: 'mariadb.replication', host: '10.0.0.4', kill: true });
    const status = await h.run('add_shards', { cluster_id: cluster.id, shards: '1', nodes: '3', storage_iplists: ['10.0.0.2', '10.0.0.3', '10.0.0.4'] });
    expect(status).toMatchObject({ status: 'failed', errorCode: 2000 });
    expect(status.errorInfo).toMatch(/rollback incomplete: agent 10\.0\.0\.4 unreachable; storage node \d+ at 10\.0\.0\.4:5000 will be removed when it answers$/);
    const placed = Object.values(h.store.s.clusters[cluster.id].shards).filter((s) => !shardsBefore.includes(s.id));
    expect(placed.map((s) => Object.values(s.nodes).map((n) => n.hostaddr))).toEqual([['10.0.0.4']]);

    h.down.delete('10.0.0.4');
    await new RollbackFinisher({ store: h.store, agents: h.agents, withAgent: h.withAgent, logger: silentLogger() }).finishAll();
    await h.runner.stop(); // the finisher below proposes through the running manager
    expect(Object.keys(h.store.s.clusters[cluster.id].shards)).toEqual(shardsBefore);
    expect(JSON.stringify(h.store.s.ports)).toBe(portsBefore);
    expect(h.store.s.pendingRollbacks).toEqual({});
  });

  it('a job that ends well after all (re-run by a new leader) drops its record', async () => {
    const { store } = await clusterWithDeadHost();
    const [jobId] = Object.keys(store.s.pendingRollbacks);
    const job = store.s.jobs[jobId];
    job.result = null;
    await store.propose({ kind: CommandKind.JobFinished, at: 1, jobId, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: {} } });
    expect(store.s.pendingRollbacks).toEqual({});
  });
});
