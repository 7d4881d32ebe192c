// Growing, shrinking, rebuilding and isolating a cluster end to end, on real engines: a
// one-member manager on 127.0.1.81, three agents on 127.0.2.1-3 (port 58160, instance
// ports 54xxx, apart from create-delete.test.ts), a cluster of 2 shards x 3 MariaDB nodes
// and 2 PostgreSQL compute nodes. Each job is checked by what the engines show, not by
// the job's own reply: replication threads, rows on the nodes, logins and foreign tables
// on the compute nodes, processes, directories, ports and cgroup files.

import { access, chmod, readdir, readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CgroupAgentClient } from '@kcm/agent-api';
import type { ClusterRecord, OpenAccounts, StorageNodeRecord } from '@kcm/manager';
import { emitRaw } from '../helpers/emit-client';
import { sleep } from '../manager/helpers/processes';
import { enginePidsUnder, HOSTS, startClusterFixture, type ClusterFixture, waitUntil } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './machines';
import { openTestAccounts } from '../helpers/secrets';

const AGENT_PORT = 58160;
const MEMBER = '127.0.1.81:58181';
const storagePorts = (i: number) => ({ low: 54100 + 20 * i, high: 54119 + 20 * i });
const computerPorts = (i: number) => ({ low: 54200 + 10 * i, high: 54209 + 10 * i });

const CREATE_PARAS = clusterParas({ nick_name: 'grow', shards: '2', comps: '2', cpu_limit_node: 'quota', computer_iplists: [] });

type Endpoint = { host: string; port: number };
const DB = '`postgres_$$_public`';

const gone = (p: string) => access(p).then(() => false, () => true);

/** True when nothing listens on host:port (a new instance could take it). */
const bindable = (at: Endpoint) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(at.port, at.host, () => server.close(() => resolve(true)));
  });

describe('grow, shrink, rebuild and isolate a cluster on real engines', () => {
  let f: ClusterFixture;
  let clusterId: string;
  let accounts: OpenAccounts;

  const cluster = () => f.manager.store.state().clusters[clusterId];
  const shardIds = () => Object.keys(cluster().shards);
  const nodes = (shardId: string) => Object.values(cluster().shards[shardId].nodes);
  const masterOf = (shardId: string) => cluster().shards[shardId].nodes[cluster().shards[shardId].masterNodeId];
  const standbysOf = (shardId: string) => nodes(shardId).filter((n) => n.id !== cluster().shards[shardId].masterNodeId);
  const at = (n: { hostaddr: string; port: number }): Endpoint => ({ host: n.hostaddr, port: n.port });
  const jobCount = () => f.manager.store.state().counters.job;

  const sql = async <T>(where: Endpoint, query: string): Promise<T[]> => {
    const c = await mysql.createConnection({ host: where.host, port: where.port, user: accounts.storage.user, password: accounts.storage.password, connectTimeout: 5000 });
    try {
      return ((await c.query(query)) as unknown as [T[]])[0];
    } finally {
      await c.end();
    }
  };
  const replicationOf = async (node: Endpoint) => {
    const c = await mysql.createConnection({ host: node.host, port: node.port, user: accounts.replication.user, password: accounts.replication.password, connectTimeout: 5000 });
    try {
      return ((await c.query('SHOW SLAVE STATUS')) as unknown as [Record<string, unknown>[]])[0][0];
    } finally {
      await c.end();
    }
  };
  const pgQuery = async (comp: Endpoint, query: string, values: unknown[] = []) => {
    const c = new pg.Client({ host: comp.host, port: comp.port, user: accounts.computer.user, password: accounts.computer.password, database: 'postgres' });
    c.on('error', () => {});
    await c.connect();
    try {
      return (await c.query(query, values)).rows;
    } finally {
      await c.end();
    }
  };
  const foreignTables = async (comp: Endpoint) =>
    (await pgQuery(comp, "SELECT foreign_table_name AS t FROM information_schema.foreign_tables WHERE foreign_table_schema = 'public' ORDER BY 1")).map((r) => r.t).join();
  const rowCount = async (node: Endpoint, table: string) => Number((await sql<{ n: number }>(node, `SELECT COUNT(*) AS n FROM ${DB}.${table}`))[0].n);

  /** The node replicates from its shard's master with both threads running and no error. */
  const expectReplicating = async (node: StorageNodeRecord, shardId: string) => {
    const status = await waitUntil(`${node.hostaddr}:${node.port} replicating`, async () => {
      const s = await replicationOf(at(node));
      return s && s.Slave_IO_Running === 'Yes' && s.Slave_SQL_Running === 'Yes' ? s : undefined;
    }, 15_000);
    expect(status).toMatchObject({ Master_Host: masterOf(shardId).hostaddr, Last_IO_Error: '', Last_SQL_Error: '', Using_Gtid: 'Slave_Pos' });
    expect(String(status.Master_Port)).toBe(String(masterOf(shardId).port));
  };
  const waitRows = (node: Endpoint, table: string, n: number) =>
    waitUntil(`${n} rows of ${table} on ${node.host}:${node.port}`, async () => ((await rowCount(node, table)) === n ? n : undefined), 15_000);

  const mainPid = async (n: StorageNodeRecord) => Number((await readFile(path.join(n.datadir, String(n.port), 'run', 'mariadbd.pid'), 'utf8')).trim());
  const cpuRoot = async () => {
    const c = new CgroupAgentClient(`${HOSTS[0]}:${AGENT_PORT}`);
    try {
      return await c.info();
    } finally {
      c.close();
    }
  };
  const cgroupDir = (root: string, kind: 'mysql' | 'pg', n: { hostaddr: string; port: number }) => path.join(root, 'kcm', `${kind}-${n.hostaddr}-${n.port}`);

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER });
    // 8 cores: placement sums quota cores per machine, and after add_shards and add_nodes a
    // host holds 3-4 storage nodes with a quota of 1 core each.
    await registerMachines(f, { storagePorts, computerPorts, totalCpuCores: '8' });
    const created = await f.runJob('create_cluster', CREATE_PARAS, 300_000);
    expect(created.status, created.error_info).toBe('done');
    clusterId = (created.attachment as { cluster_id: string }).cluster_id;
    accounts = openTestAccounts(cluster().accounts);
    // One table per shard, rows written through a compute node.
    const [s1, s2] = shardIds();
    await sql(at(masterOf(s1)), `CREATE DATABASE IF NOT EXISTS ${DB}`);
    await sql(at(masterOf(s1)), `CREATE TABLE ${DB}.orders (id INT PRIMARY KEY, item VARCHAR(40) NOT NULL)`);
    await sql(at(masterOf(s2)), `CREATE DATABASE IF NOT EXISTS ${DB}`);
    await sql(at(masterOf(s2)), `CREATE TABLE ${DB}.items (id INT PRIMARY KEY, item VARCHAR(40) NOT NULL)`);
    const comp = at(Object.values(cluster().comps)[0]);
    await waitUntil('orders and items on the first compute node', async () => ((await foreignTables(comp)) === 'items,orders' ? true : undefined), 20_000);
    for (let id = 1; id <= 20; id++) await pgQuery(comp, 'INSERT INTO public.orders (id, item) VALUES ($1, $2)', [id, `item-${id}`]);
  }, 420_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  it('bad inputs are refused with a clear error naming the field, and nothing is committed', async () => {
    const [s1] = shardIds();
    const master = masterOf(s1);
    const standby = standbysOf(s1)[0];
    const before = { jobs: jobCount(), clusters: JSON.stringify(f.manager.store.state().clusters), ports: JSON.stringify(f.manager.store.state().ports) };
    const cases: [string, Record<string, unknown>, string, RegExp][] = [
      ['delete_nodes', { cluster_id: clusterId, hostaddr: master.hostaddr, port: String(master.port) }, '1006', /paras\.hostaddr\/paras\.port: .* is the master of shard_\d+; a master cannot be deleted/],
      ['delete_nodes', { cluster_id: clusterId, hostaddr: standby.hostaddr, port: String(standby.port) }, '1006', /shard_\d+ has 3 nodes; deleting .* would leave 2, below the minimum of 3 nodes per shard/],
      ['delete_nodes', { cluster_id: clusterId, hostaddr: standby.hostaddr, port: '3306' }, '1005', /paras\.hostaddr\/paras\.port: 127\.0\.2\.\d:3306 is not a storage node of cluster/],
      ['update_instance_cgroup', { ip: master.hostaddr, port: '3306', type: 'mysql', cpu_cores: '1', cgroup_mode: 'quota' }, '1005', /paras\.ip\/paras\.port: .*:3306 is not an instance kcm manages/],
      ['update_instance_cgroup', { ip: master.hostaddr, port: String(master.port), type: 'pg', cpu_cores: '1', cgroup_mode: 'quota' }, '1005', /paras\.type: .* is a storage node \(type mysql\), not pg/],
      ['rebuild_node', { cluster_id: clusterId, rb_nodes: [{ hostaddr: master.hostaddr, port: String(master.port) }] }, '1006', /paras\.rb_nodes\[0\]: .* is the master of shard_\d+; only a standby can be rebuilt/],
      ['delete_comp', { cluster_id: clusterId, comp_id: '999' }, '1005', /paras\.comp_id: compute node 999 is not part of cluster/],
      ['add_nodes', { cluster_id: clusterId, shard_id: '999', nodes: '1', storage_iplists: [] }, '1005', /paras\.shard_id: shard 999 is not part of cluster/],
    ];
    for (const [jobType, paras, code, message] of cases) {
      const reply = await emitRaw(MEMBER, jobType, paras);
      expect({ jobType, code: reply.error_code, info: reply.error_info }).toMatchObject({ jobType, code });
      expect(reply.error_info).toMatch(message);
    }
    expect({ jobs: jobCount(), clusters: JSON.stringify(f.manager.store.state().clusters), ports: JSON.stringify(f.manager.store.state().ports) }).toEqual(before);
    // Only the master can say whether a shard holds tables: the job fails and changes nothing.
    const refused = await f.runJob('delete_shards', { cluster_id: clusterId, shard_id: s1 });
    expect(refused.status).toBe('failed');
    expect(refused.error_info).toMatch(/paras\.shard_id: shard_\d+ still holds 1 table\(s\): postgres_\$\$_public\.orders/);
    expect(JSON.stringify(f.manager.store.state().clusters)).toBe(before.clusters);
  }, 60_000);

  let newShardId: string;
  it('add_shards: the new shard replicates, and its tables appear on every compute node', async () => {
    const started = Date.now();
    const reply = await f.runJob('add_shards', { cluster_id: clusterId, shards: '1', nodes: '3', storage_iplists: [...HOSTS] }, 180_000);
    expect(reply.status, reply.error_info).toBe('done');
    console.log(`add_shards (1 shard x 3 nodes) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const att = reply.attachment as { list_shard: { shard_id: string; shard_name: string }[] };
    expect(att).toMatchObject({ cluster_id: clusterId, shards: '3', comps: '2' });
    expect(att.list_shard).toHaveLength(1);
    newShardId = att.list_shard[0].shard_id;
    expect(att.list_shard[0].shard_name).toBe(`shard_${newShardId}`);
    expect(new Set(nodes(newShardId).map((n) => n.hostaddr)).size).toBe(3);
    for (const n of standbysOf(newShardId)) await expectReplicating(n, newShardId);

    await sql(at(masterOf(newShardId)), `CREATE DATABASE IF NOT EXISTS ${DB}`);
    await sql(at(masterOf(newShardId)), `CREATE TABLE ${DB}.events (id INT PRIMARY KEY, what VARCHAR(40))`);
    for (const comp of Object.values(cluster().comps)) {
      await waitUntil(`events on ${comp.name}`, async () => ((await foreignTables(at(comp))) === 'events,items,orders' ? true : undefined), 15_000);
    }
    await pgQuery(at(Object.values(cluster().comps)[1]), "INSERT INTO public.events VALUES (1, 'on the new shard')");
    for (const n of standbysOf(newShardId)) await waitRows(at(n), 'events', 1);
  }, 240_000);

  it('a failed add_comps (the postgres user cannot reach its host\'s comp_datadir) removes what it placed and returns the ports', async () => {
    const free = HOSTS.findIndex((host) => !Object.values(cluster().comps).some((c) => c.hostaddr === host));
    const closed = f.dirs(free).comp_datadir;
    const before = { comps: Object.keys(cluster().comps), ports: JSON.stringify(f.manager.store.state().ports) };
    await chmod(closed, 0o700);
    try {
      const reply = await f.runJob('add_comps', { cluster_id: clusterId, comps: '1', computer_iplists: [HOSTS[free]] }, 120_000);
      expect(reply.status).toBe('failed');
      expect(reply.error_info).toMatch(new RegExp(`step 2 of 4 \\(install compute nodes\\) failed: comp_\\d+ on ${HOSTS[free].replaceAll('.', '\\.')}:\\d+: .*cannot traverse`));
    } finally {
      await chmod(closed, 0o755);
    }
    expect({ comps: Object.keys(cluster().comps), ports: JSON.stringify(f.manager.store.state().ports) }).toEqual(before);
    expect(await readdir(closed)).toEqual([]);
  }, 150_000);

  let newCompId: string;
  it('add_comps: the new compute node answers with the cluster account and sees every table and row', async () => {
    const reply = await f.runJob('add_comps', { cluster_id: clusterId, comps: '1', computer_iplists: [] }, 120_000);
    expect(reply.status, reply.error_info).toBe('done');
    const att = reply.attachment as { list_comp: { comp_id: string; comp_name: string }[] };
    expect(att).toMatchObject({ cluster_id: clusterId, shards: '3', comps: '3' });
    newCompId = att.list_comp[0].comp_id;
    expect(att.list_comp[0].comp_name).toBe(`comp_${newCompId}`);
    const comp = at(cluster().comps[newCompId]);
    expect((await pgQuery(comp, 'SELECT current_user AS u'))[0].u).toBe(accounts.computer.user);
    expect(await foreignTables(comp)).toBe('events,items,orders');
    expect((await pgQuery(comp, 'SELECT count(*)::int AS n, sum(id)::int AS s FROM public.orders'))[0]).toEqual({ n: 20, s: 210 });
  }, 150_000);

  let addedNode: StorageNodeRecord;
  it('add_nodes: the new standby is seeded with the existing rows (from a copy: the master\'s binlogs are purged) and replicates new ones', async () => {
    const [s1] = shardIds();
    // An empty instance could only get the first rows by replaying the master's binlogs from
    // the start; with those purged, only a copy of a member can hold them.
    const master = masterOf(s1);
    const admin = await mysql.createConnection({
      socketPath: path.join(master.datadir, String(master.port), 'run', 'mariadbd.sock'), user: accounts.admin.user, password: accounts.admin.password,
    });
    try {
      await admin.query('FLUSH BINARY LOGS');
      // MariaDB keeps a binlog that a standby's dump thread still reads; the standbys move to
      // the new file once they have read the rotate event, so purge until only it is left.
      const logs = await waitUntil('all but the newest binlog purged', async () => {
        await admin.query('PURGE BINARY LOGS BEFORE NOW() + INTERVAL 1 SECOND');
        const [rows] = (await admin.query('SHOW BINARY LOGS')) as unknown as [unknown[]];
        return rows.length === 1 ? rows : undefined;
      }, 15_000);
      expect(logs).toHaveLength(1);
    } finally {
      await admin.end();
    }
    const started = Date.now();
    const reply = await f.runJob('add_nodes', { cluster_id: clusterId, shard_id: s1, nodes: '1', storage_iplists: [] }, 180_000);
    expect(reply.status, reply.error_info).toBe('done');
    console.log(`add_nodes (1 standby seeded from a copy) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const att = reply.attachment as { list_shard: { shard_id: string; nodes: string; list_node: { hostaddr: string; node_id: string; port: string }[] }[] };
    expect(att.list_shard).toEqual([{ shard_id: s1, shard_name: `shard_${s1}`, nodes: '4', list_node: [expect.objectContaining({ node_id: expect.any(String) })] }]);
    addedNode = cluster().shards[s1].nodes[att.list_shard[0].list_node[0].node_id];
    expect(att.list_shard[0].list_node[0]).toEqual({ hostaddr: addedNode.hostaddr, node_id: addedNode.id, port: String(addedNode.port) });
    expect(await rowCount(at(addedNode), 'orders')).toBe(20);
    await expectReplicating(addedNode, s1);
    await pgQuery(at(Object.values(cluster().comps)[0]), "INSERT INTO public.orders VALUES (21, 'after add_nodes')");
    await waitRows(at(addedNode), 'orders', 21);
  }, 240_000);

  it('delete_nodes: the standby process and its directories are gone and its port can be allocated again', async () => {
    const [s1] = shardIds();
    const pid = await mainPid(addedNode);
    const reply = await f.runJob('delete_nodes', { cluster_id: clusterId, hostaddr: addedNode.hostaddr, port: String(addedNode.port) }, 120_000);
    expect(reply.status, reply.error_info).toBe('done');
    expect(Object.keys(cluster().shards[s1].nodes)).toHaveLength(3);
    expect(await gone(`/proc/${pid}`)).toBe(true);
    for (const dir of [addedNode.datadir, addedNode.logdir, addedNode.walLogDir]) expect(await gone(path.join(dir, String(addedNode.port))), dir).toBe(true);
    expect(f.manager.store.state().ports[addedNode.hostaddr][addedNode.port]).toBeUndefined();
    expect(await bindable(at(addedNode))).toBe(true);
    expect(await gone(cgroupDir((await cpuRoot()).cpu_root, 'mysql', addedNode))).toBe(true);
  }, 150_000);

  it('delete_comp: the compute node is gone, the others still serve', async () => {
    const comp = cluster().comps[newCompId];
    const reply = await f.runJob('delete_comp', { cluster_id: clusterId, comp_id: newCompId }, 60_000);
    expect(reply.status, reply.error_info).toBe('done');
    expect(cluster().comps[newCompId]).toBeUndefined();
    expect(await gone(path.join(comp.compDatadir, String(comp.port)))).toBe(true);
    expect(await bindable(at(comp))).toBe(true);
    expect(f.manager.store.state().ports[comp.hostaddr][comp.port]).toBeUndefined();
    // Two remain: one more may go, then the last one is refused.
    const second = await f.runJob('delete_comp', { cluster_id: clusterId, comp_id: Object.keys(cluster().comps)[0] });
    expect(second.status, second.error_info).toBe('done');
    const remaining = at(Object.values(cluster().comps)[0]);
    expect((await pgQuery(remaining, 'SELECT count(*)::int AS n FROM public.orders'))[0].n).toBe(21);
    const lastOne = Object.keys(cluster().comps)[0];
    const refused = await emitRaw(MEMBER, 'delete_comp', { cluster_id: clusterId, comp_id: lastOne });
    expect(refused.error_code).toBe('1006');
    expect(refused.error_info).toMatch(/paras\.comp_id: comp_\d+ is the last compute node of cluster/);
  }, 150_000);

  it('delete_shards: an emptied shard is removed, its ports are free and the compute nodes keep the other shards', async () => {
    const shardNodes = nodes(newShardId);
    const pids = await Promise.all(shardNodes.map(mainPid));
    await sql(at(masterOf(newShardId)), `DROP TABLE ${DB}.events`);
    const reply = await f.runJob('delete_shard', { cluster_id: clusterId, shard_id: newShardId }, 120_000);
    expect(reply.status, reply.error_info).toBe('done');
    expect(cluster().shards[newShardId]).toBeUndefined();
    for (const pid of pids) expect(await gone(`/proc/${pid}`)).toBe(true);
    for (const n of shardNodes) expect(await bindable(at(n))).toBe(true);
    const comp = at(Object.values(cluster().comps)[0]);
    expect(await foreignTables(comp)).toBe('items,orders');
  }, 150_000);

  it('rebuild_node: a standby killed with SIGKILL is rebuilt from the other standby, has every row and replicates again', async () => {
    const [s1] = shardIds();
    const [victim, other] = standbysOf(s1);
    process.kill(await mainPid(victim), 'SIGKILL');
    const comp = at(Object.values(cluster().comps)[0]);
    for (let id = 22; id <= 30; id++) await pgQuery(comp, 'INSERT INTO public.orders VALUES ($1, $2)', [id, 'while the standby was down']);
    const reply = await f.runJob('rebuild_node', {
      cluster_id: clusterId, shard_id: s1, allow_pull_from_master: '0', allow_replica_delay: '30',
      rb_nodes: [{ hostaddr: victim.hostaddr, port: String(victim.port), need_backup: '0', pv_limit: '0' }],
    }, 180_000);
    expect(reply.status, reply.error_info).toBe('done');
    const copy = (reply.attachment as { list_node: { source: string; bytes: string; transfer_ms: string }[] }).list_node[0];
    expect(copy.source).toBe(`${other.hostaddr}:${other.port}`);
    console.log(`rebuild_node: ${(Number(copy.bytes) / 2 ** 20).toFixed(1)} MiB copied from ${copy.source} in ${copy.transfer_ms} ms`);
    expect(await rowCount(at(victim), 'orders')).toBe(30);
    await expectReplicating(victim, s1);
    await pgQuery(comp, "INSERT INTO public.orders VALUES (31, 'after the rebuild')");
    await waitRows(at(victim), 'orders', 31);
    // The rebuilt process is back in its cgroup.
    const { cpu_root } = await cpuRoot();
    const procs = await readFile(path.join(cgroupDir(cpu_root, 'mysql', victim), 'cgroup.procs'), 'utf8');
    expect(procs.split('\n')).toContain(String(await mainPid(victim)));
  }, 240_000);

  it('update_instance_cgroup: the cgroup holds the asked quota or share and the instance pid', async () => {
    const [s1] = shardIds();
    const node = standbysOf(s1)[1];
    const reply = await f.runJob('update_instance_cgroup', { ip: node.hostaddr, port: String(node.port), type: 'mysql', cpu_cores: '2', cgroup_mode: 'quota' });
    expect(reply.status, reply.error_info).toBe('done');
    const { version, cpu_root } = await cpuRoot();
    const dir = cgroupDir(cpu_root, 'mysql', node);
    expect((reply.attachment as { cgroup_path: string }).cgroup_path).toBe(dir);
    const quota = version === 'v1' ? await readFile(path.join(dir, 'cpu.cfs_quota_us'), 'utf8') : await readFile(path.join(dir, 'cpu.max'), 'utf8');
    expect(quota.trim()).toBe(version === 'v1' ? '200000' : '200000 100000');
    expect((await readFile(path.join(dir, 'cgroup.procs'), 'utf8')).split('\n')).toContain(String(await mainPid(node)));

    const comp = Object.values(cluster().comps)[0];
    const share = await f.runJob('update_instance_cgroup', { ip: comp.hostaddr, port: String(comp.port), type: 'pg', cpu_cores: '1', cgroup_mode: 'share' });
    expect(share.status, share.error_info).toBe('done');
    const compDir = cgroupDir(cpu_root, 'pg', comp);
    const weight = version === 'v1' ? await readFile(path.join(compDir, 'cpu.shares'), 'utf8') : await readFile(path.join(compDir, 'cpu.weight'), 'utf8');
    expect(weight.trim()).toBe(version === 'v1' ? '1024' : '100');
    const postmaster = (await readFile(path.join(comp.compDatadir, String(comp.port), 'postmaster.pid'), 'utf8')).split('\n')[0];
    expect((await readFile(path.join(compDir, 'cgroup.procs'), 'utf8')).split('\n')).toContain(postmaster);
  }, 60_000);

  it('delete_cluster leaves no process, no port and no cluster behind', async () => {
    const reply = await f.runJob('delete_cluster', { cluster_id: clusterId }, 180_000);
    expect(reply.status, reply.error_info).toBe('done');
    expect(await enginePidsUnder(f.tmp)).toEqual([]);
    expect(f.manager.store.state().clusters).toEqual({});
    expect(f.manager.store.state().ports).toEqual({});
    for (const i of HOSTS.keys()) {
      for (const dir of Object.values(f.dirs(i))) expect(await readdir(dir).catch(() => []), dir).toEqual([]);
    }
    const { cpu_root } = await cpuRoot();
    const kcmGroups = await readdir(path.join(cpu_root, 'kcm')).catch(() => [] as string[]);
    expect(kcmGroups.filter((g) => /-127\.0\.2\.\d-54\d{3}$/.test(g))).toEqual([]);
  }, 200_000);
});
