// add_shards and delete_shards against recording agents (real engines: test/cluster/grow-shrink.test.ts).

import { describe, expect, it } from 'vitest';
import { CommandKind } from '../../src/meta/commands';
import { HOSTS, methods, startHarness } from './grow-harness';

describe('add_shards', () => {
  it('builds the new shard like create_cluster (install, master before standbys, cpu limits) and points every compute node at all shards', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const status = await h.run('add_shards', { cluster_id: cluster.id, shards: '1', nodes: '3', storage_iplists: [] });
    await h.close();
    expect(status.status, status.errorInfo).toBe('done');
    const added = Object.values(cluster.shards).find((s) => s.placedByJob === status.jobId)!;
    expect(status.attachment).toEqual({ cluster_id: cluster.id, cluster_name: cluster.name, shards: '3', comps: '2', list_shard: [{ shard_id: added.id, shard_name: `shard_${added.id}` }] });
    expect(methods(h.calls)).toEqual(['mariadb.install', 'mariadb.variables', 'mariadb.replication', 'mariadb.probe', 'cgroup.set', 'pg.sync']);
    expect(h.calls.filter((c) => c.method === 'mariadb.install').map((c) => c.request.spec.port).sort()).toEqual(Object.values(added.nodes).map((n) => n.port).sort());
    expect(h.calls.filter((c) => c.method === 'mariadb.replication').map((c) => c.request.role)).toEqual(['master', 'standby', 'standby']);
    // The least loaded machine (10.0.0.4 holds nothing yet) gets one of the new replicas.
    expect(Object.values(added.nodes).map((n) => n.hostaddr)).toContain(HOSTS[3]);
    const syncs = h.calls.filter((c) => c.method === 'pg.sync');
    expect(syncs.map((c) => c.request.port).sort()).toEqual(Object.values(cluster.comps).map((c) => c.port).sort());
    for (const s of syncs) expect(s.request.shards.map((e: { shard_id: string }) => e.shard_id)).toEqual(Object.keys(cluster.shards));
  });

  it('a failed replication set-up removes the new shard, returns its ports and re-points the compute nodes; the old shards are untouched', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const before = { shards: JSON.stringify(cluster.shards), ports: JSON.stringify(h.store.s.ports) };
    h.failOn({ method: 'mariadb.replication', host: HOSTS[3] });
    const status = await h.run('add_shards', { cluster_id: cluster.id, shards: '1', nodes: '3', storage_iplists: [] });
    await h.close();
    expect(status).toMatchObject({ status: 'failed', errorCode: 2001 });
    expect(status.errorInfo).toMatch(/^step 3 of 5 \(set up replication\) failed: shard_3: mariadb\.replication failed on 10\.0\.0\.4$/);
    expect(h.calls.filter((c) => c.method === 'mariadb.remove')).toHaveLength(3);
    expect({ shards: JSON.stringify(cluster.shards), ports: JSON.stringify(h.store.s.ports) }).toEqual(before);
    const resync = h.calls.filter((c) => c.method === 'pg.sync');
    expect(resync).toHaveLength(2);
    for (const s of resync) expect(s.request.shards.map((e: { shard_id: string }) => e.shard_id)).toEqual(['1', '2']);
  });

  it('refuses before committing anything: unknown cluster, too few free ports, an unregistered host', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const jobs = h.jobCount();
    expect(await h.refusal('add_shards', { cluster_id: '99', shards: '1', nodes: '3', storage_iplists: [] })).toEqual(['NOT_FOUND', 'paras.cluster_id: cluster 99 does not exist']);
    expect((await h.refusal('add_shards', { cluster_id: cluster.id, shards: '30', nodes: '3', storage_iplists: [] }))?.[0]).toBe('NO_RESOURCES');
    expect(await h.refusal('add_shards', { cluster_id: cluster.id, shards: '1', nodes: '3', storage_iplists: ['10.0.0.9'] })).toEqual([
      'NOT_FOUND',
      'paras.storage_iplists[0]: 10.0.0.9 is not registered as a storage machine',
    ]);
    expect(h.jobCount()).toBe(jobs);
  });

  it('a re-proposed placement of the same job returns the first one and takes no more ports', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const placement = { newShards: [{ hosts: [HOSTS[3], HOSTS[2], HOSTS[1]] }], newNodes: [], newComps: [] };
    const first = await h.store.propose({ kind: CommandKind.InstancesPlaced, at: 0, clusterId: cluster.id, jobId: '42', placement });
    const ports = JSON.stringify(h.store.s.ports);
    const again = await h.store.propose({ kind: CommandKind.InstancesPlaced, at: 0, clusterId: cluster.id, jobId: '42', placement });
    expect(again).toEqual(first);
    expect(JSON.stringify(h.store.s.ports)).toBe(ports);
    await h.close();
  });
});

describe('delete_shards', () => {
  it('removes an empty shard: its nodes, then its record and ports, then the compute nodes are re-pointed', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const shard = cluster.shards['2'];
    const ports = Object.values(shard.nodes).map((n) => n.port);
    const master = { ...shard.nodes[shard.masterNodeId] };
    const status = await h.run('delete_shard', { cluster_id: cluster.id, shard_id: '2' });
    await h.close();
    expect(status.status, status.errorInfo).toBe('done');
    expect(status.attachment).toEqual({});
    // Whether the shard holds tables is asked of its master's agent, never over SQL from the manager.
    expect(h.calls[0]).toEqual({ host: master.hostaddr, method: 'mariadb.listTables', request: { port: master.port } });
    expect(h.calls.filter((c) => c.method === 'mariadb.remove').map((c) => c.request.port).sort()).toEqual(ports.sort());
    expect(Object.keys(cluster.shards)).toEqual(['1']);
    for (const n of Object.values(shard.nodes)) expect(h.store.s.ports[n.hostaddr][n.port]).toBeUndefined();
    const syncs = h.calls.filter((c) => c.method === 'pg.sync');
    expect(syncs).toHaveLength(2);
    for (const s of syncs) expect(s.request.shards.map((e: { shard_id: string }) => e.shard_id)).toEqual(['1']);
  });

  it('fails with CONFLICT naming the tables a shard still holds, and removes nothing', async () => {
    const h = await startHarness({ tables: { '2': ['postgres_$$_public.orders', 'shop_$$_s1.items'] } });
    const cluster = await h.readyCluster();
    const status = await h.run('delete_shards', { cluster_id: cluster.id, shard_id: '2' });
    await h.close();
    expect(status).toMatchObject({ status: 'failed', errorCode: 1006 });
    expect(status.errorInfo).toContain(
      'paras.shard_id: shard_2 still holds 2 table(s): postgres_$$_public.orders, shop_$$_s1.items; ' +
        'delete_shards never drops tables: move them to another shard of the cluster first with expand_cluster (src_shard_id 2), or drop the ones you no longer need',
    );
    expect(methods(h.calls)).toEqual(['mariadb.listTables']);
    expect(Object.keys(cluster.shards)).toEqual(['1', '2']);
  });

  it('refuses the last shard and an unknown one before committing anything', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster({ shards: '1' });
    const jobs = h.jobCount();
    expect(await h.refusal('delete_shards', { cluster_id: cluster.id, shard_id: '1' })).toEqual([
      'CONFLICT',
      `paras.shard_id: shard_1 is the last shard of cluster ${cluster.id}; a cluster keeps at least one (delete_cluster removes it all)`,
    ]);
    expect(await h.refusal('delete_shards', { cluster_id: cluster.id, shard_id: '7' })).toEqual(['NOT_FOUND', `paras.shard_id: shard 7 is not part of cluster ${cluster.id}`]);
    expect(h.jobCount()).toBe(jobs);
    await h.close();
  });
});
