// add_comps, delete_comp and update_instance_cgroup against recording agents
// (real engines: test/cluster/grow-shrink.test.ts).

import { describe, expect, it } from 'vitest';
import { methods, startHarness } from './grow-harness';
import { openTestAccounts } from '../../../../test/helpers/secrets';

describe('add_comps and delete_comp', () => {
  it('add_comps installs with the cluster account, gives only the new nodes the catalog of every shard, then their cpu limits', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const status = await h.run('add_comps', { cluster_id: cluster.id, comps: '2', computer_iplists: [] });
    await h.close();
    expect(status.status, status.errorInfo).toBe('done');
    const added = Object.values(cluster.comps).filter((c) => c.placedByJob === status.jobId);
    expect(added).toHaveLength(2);
    expect(status.attachment).toEqual({
      cluster_id: cluster.id, cluster_name: cluster.name, shards: '2', comps: '4',
      list_comp: added.map((c) => ({ comp_id: c.id, comp_name: `comp_${c.id}`, hostaddr: c.hostaddr, port: String(c.port) })),
    });
    // pg.probe also measures the version each new compute node runs, right after its install.
    expect(methods(h.calls)).toEqual(['pg.install', 'pg.probe', 'pg.sync', 'cgroup.set']);
    for (const c of h.calls.filter((c) => c.method === 'pg.install')) expect(c.request).toMatchObject(openTestAccounts(cluster.accounts).computer);
    const syncs = h.calls.filter((c) => c.method === 'pg.sync');
    expect(syncs.map((c) => c.request.port).sort()).toEqual(added.map((c) => c.port).sort());
    for (const s of syncs) expect(s.request.shards.map((e: { shard_id: string }) => e.shard_id)).toEqual(['1', '2']);
  });

  it('a failed catalog sync removes the compute nodes the job installed and returns their ports', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const ports = JSON.stringify(h.store.s.ports);
    h.failOn({ method: 'pg.sync', host: '10.0.0.4' }, { method: 'pg.sync', host: '10.0.0.3' });
    const status = await h.run('add_comps', { cluster_id: cluster.id, comps: '1', computer_iplists: ['10.0.0.3'] });
    await h.close();
    expect(status).toMatchObject({ status: 'failed' });
    expect(status.errorInfo).toMatch(/^step 3 of 4 \(connect compute nodes to shards\) failed: catalog sync failed on comp_3: pg\.sync failed on 10\.0\.0\.3$/);
    expect(h.calls.filter((c) => c.method === 'pg.remove').map((c) => c.host)).toEqual(['10.0.0.3']);
    expect(Object.keys(cluster.comps)).toEqual(['1', '2']);
    expect(JSON.stringify(h.store.s.ports)).toBe(ports);
  });

  it('delete_comp removes one compute node and its cgroup, and refuses the last one and an unknown one', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const comp = cluster.comps['2'];
    const status = await h.run('delete_comp', { cluster_id: cluster.id, comp_id: '2' });
    expect(status.status, status.errorInfo).toBe('done');
    expect(h.calls.map((c) => [c.method, c.host, c.request.port])).toEqual([
      ['pg.remove', comp.hostaddr, comp.port],
      ['cgroup.remove', comp.hostaddr, comp.port],
    ]);
    expect(Object.keys(cluster.comps)).toEqual(['1']);
    expect(h.store.s.ports[comp.hostaddr][comp.port]).toBeUndefined();
    expect(await h.refusal('delete_comp', { cluster_id: cluster.id, comp_id: '1' })).toEqual([
      'CONFLICT',
      `paras.comp_id: comp_1 is the last compute node of cluster ${cluster.id}; a cluster keeps at least one (delete_cluster removes it all)`,
    ]);
    expect(await h.refusal('delete_comp', { cluster_id: cluster.id, comp_id: '2' })).toEqual(['NOT_FOUND', `paras.comp_id: compute node 2 is not part of cluster ${cluster.id}`]);
    await h.close();
  });
});

describe('update_instance_cgroup', () => {
  it('applies the asked limit to the instance named by ip and port, by its measured pid, under its cluster lock', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const node = Object.values(cluster.shards['2'].nodes)[1];
    const status = await h.run('update_instance_cgroup', { ip: node.hostaddr, port: String(node.port), type: 'mysql', cpu_cores: '3', cgroup_mode: 'share' });
    await h.close();
    expect(status.status, status.errorInfo).toBe('done');
    expect(h.store.s.jobs[status.jobId].lockKey).toBe(`cluster:${cluster.id}`);
    expect(h.calls.map((c) => c.method)).toEqual(['mariadb.probe', 'cgroup.set']);
    expect(h.calls[1]).toMatchObject({ host: node.hostaddr, request: { port: node.port, kind: 'mysql', pid: 100, cpuCores: 3, mode: 'share' } });
    expect(status.attachment).toMatchObject({ ip: node.hostaddr, port: String(node.port), type: 'mysql', cpu_cores: '3', cgroup_mode: 'share', pids: '100' });
  });

  it('refuses an address kcm does not manage, the wrong type, and more cores than the machine has, before committing anything', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const comp = cluster.comps['1'];
    const jobs = h.jobCount();
    const cg = (p: Record<string, unknown>) => h.refusal('update_instance_cgroup', { ip: comp.hostaddr, port: String(comp.port), type: 'pg', cpu_cores: '1', cgroup_mode: 'quota', ...p });
    expect(await cg({ port: '3306' })).toEqual(['NOT_FOUND', `paras.ip/paras.port: ${comp.hostaddr}:3306 is not an instance kcm manages`]);
    expect(await cg({ type: 'mysql' })).toEqual(['NOT_FOUND', `paras.type: ${comp.hostaddr}:${comp.port} is a compute node (type pg), not mysql`]);
    expect(await cg({ cpu_cores: '5' })).toEqual(['NO_RESOURCES', `paras.cpu_cores: 5 is more than the 4 cores machine ${comp.hostaddr} was registered with (total_cpu_cores)`]);
    expect(h.jobCount()).toBe(jobs);
    await h.close();
  });
});
