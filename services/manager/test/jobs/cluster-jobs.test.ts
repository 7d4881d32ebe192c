// create_cluster / delete_cluster job logic and the catalog sync against fake agents that
// record every command (the real engines are exercised in test/cluster/).

import { describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { KcmError } from '@kcm/protocol';
import { CatalogSync } from '../../src/leader/catalog-sync';
import { recordingAgents } from '../helpers/recording-agents';
import { AGENT_PORT, createParas as harnessCreateParas, request, startHarness } from './grow-harness';
import { openTestAccounts, testSecretBox } from '../../../../test/helpers/secrets';

const HOSTS = ['10.0.0.1', '10.0.0.2', '10.0.0.3'];

const createParas = (change: Record<string, unknown> = {}) => harnessCreateParas({ cpu_limit_node: 'share', storage_iplists: [], ...change });

async function setUp(failures: { method: string; host: string }[] = []) {
  const h = await startHarness({ failures, hosts: HOSTS, portsPerMachine: 10 });
  return { ...h, service: h.manager.service };
}

describe('cluster jobs against recording agents', () => {
  it('create_cluster builds in order: storage nodes, masters before their standbys, compute nodes, catalog, cpu limits', async () => {
    const { store, calls, run, close } = await setUp();
    const status = await run('create_cluster', createParas());
    await close();
    expect(status.status).toBe('done');
    const cluster = Object.values(store.s.clusters)[0];
    expect(cluster.status).toBe('ready');
    expect(status.attachment).toMatchObject({
      cluster_id: cluster.id, cluster_name: cluster.name, shards: '2', comps: '2',
      computer_user: cluster.accounts.computer.user, computer_pwd: openTestAccounts(cluster.accounts).computer.password,
      storage_user: cluster.accounts.storage.user, storage_pwd: openTestAccounts(cluster.accounts).storage.password,
    });
    const order = [...new Set(calls.map((c) => c.method))];
    // Every host fetches the engine versions before anything is installed; the versions the instances run are measured last.
    expect(order).toEqual(['mariadb.prepareEngine', 'pg.prepareEngine', 'mariadb.install', 'mariadb.replication', 'pg.install', 'pg.sync', 'mariadb.probe', 'pg.probe', 'cgroup.set', 'mariadb.variables']);
    for (const shard of Object.values(cluster.shards)) {
      const repl = calls.filter((c) => c.method === 'mariadb.replication' && Object.keys(shard.nodes).some((id) => c.request.op_id.endsWith(`node-${id}`)));
      expect(repl.map((c) => c.request.role)).toEqual(['master', 'standby', 'standby']);
      const master = shard.nodes[shard.masterNodeId];
      for (const c of repl.slice(1)) expect(c.request).toMatchObject({ master_host: master.hostaddr, master_port: master.port, fullsync_level: 1 });
    }
    const jobId = cluster.createdByJob;
    expect(calls.filter((c) => c.method === 'mariadb.install').map((c) => c.request.op_id).sort()).toEqual(
      ['1', '2', '3', '4', '5', '6'].map((n) => `job:${jobId}:install:node-${n}`).sort(),
    );
    const sync = calls.find((c) => c.method === 'pg.sync')!;
    expect(sync.request.shards).toEqual(Object.values(cluster.shards).map((s) => ({
      shard_id: s.id, host: s.nodes[s.masterNodeId].hostaddr, port: s.nodes[s.masterNodeId].port, ...openTestAccounts(cluster.accounts).storage,
    })));
    expect(calls.filter((c) => c.method === 'cgroup.set').every((c) => c.request.cpuCores === 2 && c.request.mode === 'share' && c.request.pid > 0)).toBe(true);
  });

  it('a failed compute-node install removes every instance the job created and returns its ports', async () => {
    const { store, calls, run, close } = await setUp([{ method: 'pg.install', host: '10.0.0.2' }]);
    const status = await run('create_cluster', createParas());
    await close();
    expect(status).toMatchObject({ status: 'failed', errorCode: 2001 });
    expect(status.errorInfo).toMatch(/^step 5 of 8 \(install compute nodes\) failed: comp_\d+ on 10\.0\.0\.2:6000: pg\.install failed on 10\.0\.0\.2$/);
    expect(calls.filter((c) => c.method === 'mariadb.remove')).toHaveLength(6);
    expect(calls.filter((c) => c.method === 'pg.remove')).toHaveLength(2);
    expect(store.s.clusters).toEqual({});
    expect(store.s.ports).toEqual({});
  });

  it('refuses before committing anything: ha_mode mgr, an iplist host of the wrong type, too few ports', async () => {
    const { store, service, close } = await setUp();
    await close();
    const refusal = (paras: Record<string, unknown>) => service.submitJob(request('create_cluster', paras)).then(() => undefined, (e: KcmError) => [e.errorName, e.message]);
    expect(await refusal(createParas({ ha_mode: 'mgr' }))).toEqual(['UNSUPPORTED', 'paras.ha_mode: "mgr" is not supported (MariaDB has no group replication); use "rbr"']);
    expect(await refusal(createParas({ storage_iplists: ['10.0.0.9'] }))).toEqual(['NOT_FOUND', 'paras.storage_iplists[0]: 10.0.0.9 is not registered as a storage machine']);
    expect((await refusal(createParas({ shards: '11' })))?.[0]).toBe('NO_RESOURCES');
    expect(store.s.jobs).toEqual({});
  });

  it('delete_cluster is refused while the cluster is still being created, and removes every instance afterwards', async () => {
    const { store, service, calls, run, close } = await setUp();
    await run('create_cluster', createParas({ shards: '1', comps: '1' }));
    const cluster = Object.values(store.s.clusters)[0];
    const nodePorts = Object.values(cluster.shards).flatMap((sh) => Object.values(sh.nodes).map((n) => n.port)).sort();
    cluster.status = 'creating';
    store.s.jobs[cluster.createdByJob].result = null; // as if the create were still running
    await expect(service.submitJob(request('delete_cluster', { cluster_id: cluster.id }))).rejects.toThrow(/still being created/);
    store.s.jobs[cluster.createdByJob].result = { ok: true, errorCode: 0, errorInfo: '', attachment: {} };
    const status = await run('delete_cluster', { cluster_id: cluster.id });
    await close();
    expect(status.status).toBe('done');
    expect(status.attachment).toMatchObject({ cluster_id: cluster.id, cluster_name: cluster.name, computer_state: 'done', storage_state: 'done' });
    expect(calls.filter((c) => c.method === 'mariadb.remove').map((c) => c.request.port).sort()).toEqual(nodePorts);
    expect(store.s.clusters).toEqual({});
    expect(store.s.ports).toEqual({});
  });

  it('the catalog sync calls every compute node of ready clusters only, with every shard master and a fresh op_id each round', async () => {
    const { store, run, close } = await setUp();
    await run('create_cluster', createParas({ comps: '2' }));
    await run('create_cluster', createParas({ shards: '1', comps: '1' }));
    await close();
    const [first, second] = Object.values(store.s.clusters);
    second.status = 'deleting';
    const { agents, calls } = recordingAgents({ agentPort: AGENT_PORT, failures: [] });
    const sync = new CatalogSync({ store, agents, secrets: testSecretBox(), logger: silentLogger() });
    await sync.syncAll();
    await sync.syncAll();
    const syncs = calls.filter((c) => c.method === 'pg.sync');
    expect(syncs).toHaveLength(4);
    expect(new Set(syncs.map((c) => c.request.op)).size).toBe(4);
    expect(syncs.map((c) => c.request.port).sort()).toEqual([...Object.values(first.comps), ...Object.values(first.comps)].map((c) => c.port).sort());
    expect(syncs[0].request.shards.map((s: { shard_id: string }) => s.shard_id)).toEqual(Object.keys(first.shards));
  });
});
