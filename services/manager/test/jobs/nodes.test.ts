// add_nodes, delete_nodes and rebuild_node against recording agents (real engines: test/cluster/grow-shrink.test.ts).

import { describe, expect, it } from 'vitest';
import { AGENT_PORT, HOSTS, methods, startHarness } from './grow-harness';
import { openTestAccounts } from '../../../../test/helpers/secrets';

describe('add_nodes', () => {
  it('seeds each new standby from a copy of its shard (every existing member offered as a source, the master flagged) on a machine the shard does not use yet', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const status = await h.run('add_nodes', { cluster_id: cluster.id, nodes: '1', storage_iplists: [] });
    await h.close();
    expect(status.status, status.errorInfo).toBe('done');
    expect(methods(h.calls)).toEqual(['mariadb.seed', 'mariadb.variables', 'mariadb.probe', 'cgroup.set']);
    const seeds = h.calls.filter((c) => c.method === 'mariadb.seed');
    expect(seeds).toHaveLength(2);
    for (const shard of Object.values(cluster.shards)) {
      const added = Object.values(shard.nodes).find((n) => n.placedByJob === status.jobId)!;
      expect(added.hostaddr).toBe(HOSTS[3]);
      const seed = seeds.find((c) => c.request.spec.port === added.port)!;
      const master = shard.nodes[shard.masterNodeId];
      expect(seed.request).toMatchObject({
        op_id: `job:${status.jobId}:seed:node-${added.id}`,
        spec: { port: added.port, server_id: Number(added.id), innodb_size_mb: 64, fullsync_level: 1 },
        admin: openTestAccounts(cluster.accounts).admin,
        replication: openTestAccounts(cluster.accounts).replication,
        master_host: master.hostaddr,
        master_port: master.port,
        allow_pull_from_master: true,
        need_backup: false,
      });
      expect(seed.request.sources).toEqual(
        Object.values(shard.nodes)
          .filter((n) => n.id !== added.id)
          .map((n) => ({ agent_address: `${n.hostaddr}:${AGENT_PORT}`, hostaddr: n.hostaddr, port: n.port, is_master: n.id === master.id })),
      );
    }
    expect(status.attachment).toMatchObject({ cluster_id: cluster.id, shards: '2', comps: '2' });
    const listShard = (status.attachment as { list_shard: { shard_id: string; nodes: string; list_node: unknown[] }[] }).list_shard;
    expect(listShard.map((s) => [s.shard_id, s.nodes, s.list_node.length])).toEqual([['1', '4', 1], ['2', '4', 1]]);
  });

  it('with shard_id adds only to that shard; a failed copy removes the new node and returns its port', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const ports = JSON.stringify(h.store.s.ports);
    h.failOn({ method: 'mariadb.seed', host: HOSTS[3] });
    const status = await h.run('add_nodes', { cluster_id: cluster.id, shard_id: '2', nodes: '1', storage_iplists: [] });
    await h.close();
    expect(status).toMatchObject({ status: 'failed' });
    expect(status.errorInfo).toMatch(/^step 2 of 3 \(seed new standbys from a copy\) failed: shard_2: storage node 7 on 10\.0\.0\.4:\d+: mariadb\.seed failed on 10\.0\.0\.4$/);
    expect(h.calls.filter((c) => c.method === 'mariadb.seed')).toHaveLength(1);
    expect(h.calls.filter((c) => c.method === 'mariadb.remove').map((c) => c.host)).toEqual([HOSTS[3]]);
    expect(Object.values(cluster.shards).map((s) => Object.keys(s.nodes).length)).toEqual([3, 3]);
    expect(JSON.stringify(h.store.s.ports)).toBe(ports);
  });
});

describe('delete_nodes', () => {
  it('refuses the master, a shard at the minimum of 3, an address that is not a node, and a node of another shard, before committing anything', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const shard = cluster.shards['1'];
    const master = shard.nodes[shard.masterNodeId];
    const standby = Object.values(shard.nodes).find((n) => n.id !== master.id)!;
    const jobs = h.jobCount();
    const del = (n: { hostaddr: string; port: number }, extra: Record<string, unknown> = {}) =>
      h.refusal('delete_nodes', { cluster_id: cluster.id, hostaddr: n.hostaddr, port: String(n.port), ...extra });
    expect(await del(master)).toEqual(['CONFLICT', `paras.hostaddr/paras.port: ${master.hostaddr}:${master.port} is the master of shard_1; a master cannot be deleted`]);
    expect(await del(standby)).toEqual([
      'CONFLICT',
      `paras.hostaddr/paras.port: shard_1 has 3 nodes; deleting ${standby.hostaddr}:${standby.port} would leave 2, below the minimum of 3 nodes per shard`,
    ]);
    expect(await del({ hostaddr: '10.0.0.1', port: 3306 })).toEqual(['NOT_FOUND', `paras.hostaddr/paras.port: 10.0.0.1:3306 is not a storage node of cluster ${cluster.id}`]);
    expect(await del(standby, { shard_id: '2' })).toEqual(['NOT_FOUND', `paras.shard_id: ${standby.hostaddr}:${standby.port} is a node of shard_1, not of shard 2`]);
    expect(h.jobCount()).toBe(jobs);
    await h.close();
  });

  it('removes a standby above the minimum: the instance and its cgroup first, then the record and its port', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster({ nodes: '4' });
    const shard = cluster.shards['2'];
    const standby = Object.values(shard.nodes).find((n) => n.id !== shard.masterNodeId)!;
    const status = await h.run('delete_node', { cluster_id: cluster.id, shard_id: '2', hostaddr: standby.hostaddr, port: String(standby.port) });
    await h.close();
    expect(status.status, status.errorInfo).toBe('done');
    expect(h.calls.map((c) => [c.method, c.host, c.request.port])).toEqual([
      ['mariadb.remove', standby.hostaddr, standby.port],
      ['cgroup.remove', standby.hostaddr, standby.port],
    ]);
    expect(shard.nodes[standby.id]).toBeUndefined();
    expect(h.store.s.ports[standby.hostaddr][standby.port]).toBeUndefined();
  });
});

describe('rebuild_node', () => {
  it('rebuilds a standby from the other members with the asked policy, then puts the new process back under its cpu limit', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const shard = cluster.shards['1'];
    const [target, other] = Object.values(shard.nodes).filter((n) => n.id !== shard.masterNodeId);
    const status = await h.run('rebuild_node', {
      cluster_id: cluster.id, allow_pull_from_master: '0', rb_nodes: [{ hostaddr: target.hostaddr, port: String(target.port), need_backup: '1', pv_limit: '20' }],
    });
    await h.close();
    expect(status.status, status.errorInfo).toBe('done');
    expect(methods(h.calls)).toEqual(['mariadb.rebuild', 'mariadb.variables', 'mariadb.probe', 'cgroup.set']);
    const rebuild = h.calls[0].request;
    expect(rebuild).toMatchObject({ allow_pull_from_master: false, allow_replica_delay_s: 60, pv_limit_mb: 20, need_backup: true, spec: { port: target.port } });
    expect(rebuild.sources.map((s: { port: number; is_master: boolean }) => [s.port, s.is_master]).sort()).toEqual(
      [[shard.nodes[shard.masterNodeId].port, true], [other.port, false]].sort(),
    );
    expect(h.calls.find((c) => c.method === 'cgroup.set')!.request).toMatchObject({ port: target.port, kind: 'mysql', cpuCores: 2, mode: 'quota' });
    expect(status.attachment).toEqual({ list_node: [expect.objectContaining({ node_id: target.id, source: `${h.calls[0].request.sources[0].hostaddr}:${h.calls[0].request.sources[0].port}` })] });
  });

  it('refuses the master, an unknown node, and rebuilding every standby without allow_pull_from_master', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const shard = cluster.shards['1'];
    const master = shard.nodes[shard.masterNodeId];
    const standbys = Object.values(shard.nodes).filter((n) => n.id !== master.id);
    const rb = (nodes: { hostaddr: string; port: number }[], extra: Record<string, unknown> = {}) =>
      h.refusal('rebuild_node', { cluster_id: cluster.id, rb_nodes: nodes.map((n) => ({ hostaddr: n.hostaddr, port: String(n.port) })), ...extra });
    expect(await rb([standbys[0], master])).toEqual(['CONFLICT', `paras.rb_nodes[1]: ${master.hostaddr}:${master.port} is the master of shard_1; only a standby can be rebuilt`]);
    expect(await rb([{ hostaddr: '10.0.0.4', port: 5000 }])).toEqual(['NOT_FOUND', `paras.rb_nodes[0]: 10.0.0.4:5000 is not a storage node of cluster ${cluster.id}`]);
    expect((await rb(standbys))?.[1]).toBe('paras.allow_pull_from_master: every standby of shard_1 is being rebuilt, so only its master can be copied; set it to 1');
    expect(await rb(standbys, { allow_pull_from_master: '1' })).toBeUndefined();
    await h.close();
  });
});
