// create_cluster and delete_cluster end to end, on real engines: a one-member manager,
// three agents on 127.0.2.1-3, a cluster of 2 shards x 3 MariaDB nodes and 2 PostgreSQL
// compute nodes. Checks replication, semi-sync, compute-node logins, catalog sync, rows
// through the compute nodes, live status in get_cluster_detail, get_variable, and that
// delete_cluster leaves no process, no data dir and no allocated port behind.

import { access, chmod, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CgroupAgentClient, HostProbeAgentClient, MariaDbAgentClient, PostgresAgentClient } from '@kcm/agent-api';
import { allocatePorts, restoreMeta, snapshotMeta, type ClusterRecord } from '@kcm/manager';
import { emit, emitRaw } from '../helpers/emit-client';
import { sleep } from '../manager/helpers/processes';
import { AGENT_PORT, enginePidsUnder, HOSTS, MEMBER, startClusterFixture, storagePorts, type ClusterFixture, waitUntil } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './machines';
import { openTestAccounts } from '../helpers/secrets';

const CREATE_PARAS = clusterParas({ nick_name: 'orders', shards: '2', comps: '2', cpu_limit_node: 'quota', computer_iplists: [] });

interface CreateResult {
  cluster_id: string;
  cluster_name: string;
  shards: string;
  comps: string;
  computer_user: string;
  computer_pwd: string;
  storage_user: string;
  storage_pwd: string;
}

type Endpoint = { host: string; port: number };

describe('create_cluster and delete_cluster on real engines (2 shards x 3 nodes, 2 compute nodes)', () => {
  let f: ClusterFixture;
  let result: CreateResult;
  let cluster: ClusterRecord;

  const account = (role: 'storage' | 'replication') => openTestAccounts(cluster.accounts)[role];
  const mysqlAs = (role: 'storage' | 'replication', at: Endpoint) =>
    mysql.createConnection({ host: at.host, port: at.port, user: account(role).user, password: account(role).password, connectTimeout: 5000 });
  const pgAs = async (at: Endpoint) => {
    const c = new pg.Client({ host: at.host, port: at.port, user: result.computer_user, password: result.computer_pwd, database: 'postgres' });
    c.on('error', () => {});
    await c.connect();
    return c;
  };
  const shards = () => Object.values(cluster.shards);
  const masterOf = (i: number): Endpoint => {
    const s = shards()[i];
    const m = s.nodes[s.masterNodeId];
    return { host: m.hostaddr, port: m.port };
  };
  const nodesOf = (i: number): Endpoint[] => Object.values(shards()[i].nodes).map((n) => ({ host: n.hostaddr, port: n.port }));
  const comps = (): Endpoint[] => Object.values(cluster.comps).map((c) => ({ host: c.hostaddr, port: c.port }));
  const jobCount = () => f.manager.store.state().counters.job;

  beforeAll(async () => {
    f = await startClusterFixture();
    await registerMachines(f);
  }, 120_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  it('bad input gets a clear error naming the field, and nothing is committed', async () => {
    const before = { jobs: jobCount(), ports: JSON.stringify(f.manager.store.state().ports) };
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ nodes: '2' }, '1004', /paras\.nodes/],
      [{ storage_iplists: ['127.0.2.1', '127.0.2.9'] }, '1005', /paras\.storage_iplists\[1\].*127\.0\.2\.9 is not registered/],
      // 'share': weights are not summed, so the ports are what runs out.
      [{ shards: '30', cpu_limit_node: 'share' }, '1007', /paras\.storage_iplists: 90 storage nodes are needed.*60 free ports/],
      [{ shards: '30' }, '1007', /paras\.storage_iplists: 90 storage nodes are needed .* have room for 6: 127\.0\.2\.1 takes 2 more \(cores: a quota of 1/],
      [{ innodb_size: '2048', cpu_cores: '8' }, '1007', /127\.0\.2\.1 takes 0 more \(cpu_cores 8 per storage node is more than its 2 cores/],
      [{ innodb_size: '4096' }, '1007', /127\.0\.2\.1 takes 1 more \(memory: 4096 MB innodb_size per storage node, 4096 MB of its 4096 MB total_mem free\)/],
      [{ ha_mode: 'mgr' }, '1008', /paras\.ha_mode.*not supported/],
      [{ install_proxysql: '1', shards: '1' }, '1008', /paras\.install_proxysql.*not supported/],
      [{ fullsync_level: '3' }, '1004', /paras\.fullsync_level/],
      // Placement counts the free space each agent measured on its datadir (issue 35).
      [{ max_storage_size: '100000' }, '1007', /127\.0\.2\.1 takes 0 more \(disk: 100000\.0 GB per storage node \(max_storage_size\), its datadir \S+\/h0\/data had [\d.]+ GB free when measured/],
    ];
    for (const [change, code, message] of cases) {
      const reply = await emitRaw(MEMBER, 'create_cluster', { ...CREATE_PARAS, ...change });
      expect({ change, code: reply.error_code }).toEqual({ change, code });
      expect(reply.error_info).toMatch(message);
      expect(reply.job_id).toBe('');
    }
    expect({ jobs: jobCount(), ports: JSON.stringify(f.manager.store.state().ports) }).toEqual(before);
    expect((await emit(MEMBER, 'get_cluster_summary')).attachment).toEqual({ list_cluster: [] });
  });

  it('a create_cluster whose compute node cannot be installed fails with the reason and removes what it created', async () => {
    // The postgres OS user cannot traverse host 3's comp_datadir: the install step fails after
    // the storage nodes of the shard were installed and replicating.
    const closed = f.dirs(2).comp_datadir;
    await chmod(closed, 0o700);
    try {
      const reply = await f.runJob('create_cluster', { ...CREATE_PARAS, shards: '1', comps: '1', computer_iplists: [HOSTS[2]] }, 180_000);
      expect(reply.status).toBe('failed');
      expect(reply.error_info).toMatch(/step 5 of 8 \(install compute nodes\) failed: comp_\d+ on 127\.0\.2\.3:55220: .*cannot traverse/);
    } finally {
      await chmod(closed, 0o755);
    }
    const state = f.manager.store.state();
    expect(state.clusters).toEqual({});
    expect(state.ports).toEqual({});
    expect(await enginePidsUnder(f.tmp)).toEqual([]);
    for (const i of [0, 1, 2]) {
      const leftovers = await readdir(f.dirs(i).datadir);
      expect(leftovers, `instance dirs left on host ${i + 1}`).toEqual([]);
    }
  }, 200_000);

  it('create_cluster ends done with the cluster, its names and the two generated accounts', async () => {
    const started = Date.now();
    const reply = await f.runJob('create_cluster', CREATE_PARAS, 300_000);
    console.log(`create_cluster (2 shards x 3 nodes, 2 comps) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(reply.status, reply.error_info).toBe('done');
    result = reply.attachment as unknown as CreateResult;
    expect(result).toMatchObject({ shards: '2', comps: '2', cluster_id: expect.stringMatching(/^\d+$/) });
    expect(result.cluster_name).toMatch(/^cluster_\d{10}_\d{6}$/);
    for (const k of ['computer_user', 'computer_pwd', 'storage_user', 'storage_pwd'] as const) expect(result[k]).toMatch(/^[A-Za-z0-9_-]{8,}$/);
    cluster = f.manager.store.state().clusters[result.cluster_id];
    expect(cluster.status).toBe('ready');
    expect(shards().map((s) => s.name)).toEqual(shards().map((s) => `shard_${s.id}`));
    // Three machines for three replicas: every shard is spread over distinct hosts.
    for (const i of [0, 1]) expect(new Set(nodesOf(i).map((n) => n.host)).size).toBe(3);
    expect(new Set(comps().map((c) => c.host)).size).toBe(2);
    // Ports come from each host's own range, lowest first: two storage nodes per host.
    for (const [i, host] of HOSTS.entries()) {
      const ports = [...nodesOf(0), ...nodesOf(1)].filter((n) => n.host === host).map((n) => n.port).sort();
      expect(ports).toEqual([storagePorts(i).low, storagePorts(i).low + 1]);
    }
    // Every instance runs: 6 mariadbd and 2 postmasters (plus their children) under the test's folder.
    const pids = await enginePidsUnder(f.tmp);
    const comms = await Promise.all(pids.map(async (p) => (await readFile(`/proc/${p}/comm`, 'utf8')).trim()));
    expect(comms.filter((c) => c === 'mariadbd')).toHaveLength(6);
    expect(comms.filter((c) => c === 'postgres').length).toBeGreaterThanOrEqual(2);
    // cpu_cores is applied: each master runs in its own kcm cgroup.
    const master = Object.values(cluster.shards)[0].nodes[Object.values(cluster.shards)[0].masterNodeId];
    const masterPid = (await readFile(path.join(master.datadir, String(master.port), 'run', 'mariadbd.pid'), 'utf8')).trim();
    expect(await readFile(`/proc/${masterPid}/cgroup`, 'utf8')).toMatch(new RegExp(`cpu[^\\n]*:/kcm/mysql-${master.hostaddr.replaceAll('.', '\\.')}-${master.port}\\n`));
    // No generated password reached a log line.
    const secrets = Object.values(openTestAccounts(cluster.accounts)).map((a) => a.password);
    for (const line of f.logLines) for (const s of secrets) expect(line.includes(s)).toBe(false);
  }, 320_000);

  it('every shard has one writable semi-sync master and two read-only GTID standbys replicating from it', async () => {
    for (const i of [0, 1]) {
      const master = masterOf(i);
      for (const node of nodesOf(i)) {
        const c = await mysqlAs('replication', node);
        try {
          const [[vars]] = (await c.query('SELECT @@read_only AS ro, @@rpl_semi_sync_master_enabled AS semi_master, @@gtid_strict_mode AS strict')) as unknown as [Record<string, number>[]];
          const [slaves] = (await c.query('SHOW SLAVE STATUS')) as unknown as [Record<string, string>[]];
          if (node.port === master.port && node.host === master.host) {
            expect(vars).toMatchObject({ ro: 0, semi_master: 1 });
            expect(slaves).toHaveLength(0);
            const [[status]] = (await c.query("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_status'")) as unknown as [{ Value: string }[]];
            expect(status.Value).toBe('ON');
          } else {
            expect(vars).toMatchObject({ ro: 1, semi_master: 0 });
            expect(slaves[0]).toMatchObject({
              Master_Host: master.host, Slave_IO_Running: 'Yes', Slave_SQL_Running: 'Yes',
              Last_IO_Error: '', Last_SQL_Error: '', Using_Gtid: 'Slave_Pos',
            });
            expect(String(slaves[0].Master_Port)).toBe(String(master.port));
          }
        } finally {
          await c.end();
        }
      }
    }
  });

  it('every compute node answers a PostgreSQL client with the returned account', async () => {
    for (const comp of comps()) {
      const c = await pgAs(comp);
      const row = (await c.query('SELECT current_user AS u, host(inet_server_addr()) AS addr')).rows[0];
      expect(row).toEqual({ u: result.computer_user, addr: comp.host });
      await c.end();
    }
  });

  it('tables created on shard masters appear on both compute nodes; rows written through one are read through the other and on all three nodes', async () => {
    const created = Date.now();
    for (const [i, table] of [[0, 'orders'], [1, 'items']] as const) {
      const c = await mysqlAs('storage', masterOf(i));
      await c.query('CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
      await c.query(`CREATE TABLE \`postgres_$$_public\`.${table} (id INT PRIMARY KEY, item VARCHAR(40) NOT NULL) ENGINE=InnoDB`);
      await c.end();
    }
    for (const comp of comps()) {
      await waitUntil(`orders and items on ${comp.host}:${comp.port}`, async () => {
        const c = await pgAs(comp);
        try {
          const { rows } = await c.query(`SELECT foreign_table_name AS t FROM information_schema.foreign_tables WHERE foreign_table_schema = 'public' ORDER BY 1`);
          return rows.map((r) => r.t).join() === 'items,orders' ? true : undefined;
        } finally {
          await c.end();
        }
      }, 15_000);
    }
    console.log(`catalog sync: tables visible on both compute nodes ${Date.now() - created} ms after CREATE TABLE`);

    const c1 = await pgAs(comps()[0]);
    for (let id = 1; id <= 20; id++) await c1.query('INSERT INTO public.orders (id, item) VALUES ($1, $2)', [id, `item-${id}`]);
    await c1.query('INSERT INTO public.items (id, item) VALUES (1, $1)', ['on shard 2']);
    await c1.end();
    const c2 = await pgAs(comps()[1]);
    expect((await c2.query('SELECT count(*)::int AS n, sum(id)::int AS s FROM public.orders')).rows[0]).toEqual({ n: 20, s: 210 });
    expect((await c2.query('SELECT item FROM public.items')).rows).toEqual([{ item: 'on shard 2' }]);
    await c2.end();
    for (const node of nodesOf(0)) {
      const n = await waitUntil(`20 rows on ${node.host}:${node.port}`, async () => {
        const c = await mysqlAs('storage', node);
        try {
          const [[row]] = (await c.query('SELECT COUNT(*) AS n FROM `postgres_$$_public`.orders')) as unknown as [{ n: number }[]];
          return Number(row.n) === 20 ? 20 : undefined;
        } finally {
          await c.end();
        }
      }, 10_000);
      expect(n).toBe(20);
    }
  }, 60_000);

  it('get_variable returns the value the instance reports; an address kcm does not manage is refused', async () => {
    const node = Object.values(shards()[0].nodes)[1];
    const reply = await emit(MEMBER, 'get_variable', { hostaddr: node.hostaddr, port: String(node.port), variable: 'server_id' });
    const c = await mysqlAs('storage', { host: node.hostaddr, port: node.port });
    const [[row]] = (await c.query('SELECT @@server_id AS v')) as unknown as [{ v: number }[]];
    await c.end();
    expect(reply.attachment).toEqual({ result: 'true', value: String(row.v) });
    expect(String(row.v)).toBe(node.id);
    const buffer = await emit(MEMBER, 'get_variable', { hostaddr: node.hostaddr, port: String(node.port), variable: 'innodb_buffer_pool_size' });
    expect(buffer.attachment).toEqual({ result: 'true', value: String(64 * 2 ** 20) });
    const stranger = await emitRaw(MEMBER, 'get_variable', { hostaddr: node.hostaddr, port: '3306', variable: 'server_id' });
    expect(stranger.error_code).toBe('1005');
    expect(stranger.error_info).toMatch(/not an instance kcm manages/);
  });

  it('get_cluster_detail and the summary show what is measured: every node online with master flags; a frozen standby offline and the cluster degraded; a killed standby back online', async () => {
    type Detail = { list_shard: { shard_id: string; list_node: { node_id: string; hostaddr: string; port: string; status: string; master: string }[] }[]; list_comp: { status: string }[] };
    const detail = async () => (await emit(MEMBER, 'get_cluster_detail', { cluster_name: result.cluster_name })).attachment as unknown as Detail;
    const first = await detail();
    expect(first.list_comp.map((c) => c.status)).toEqual(['online', 'online']);
    for (const s of first.list_shard) {
      expect(s.list_node.map((n) => n.status)).toEqual(['online', 'online', 'online']);
      expect(s.list_node.filter((n) => n.master === 'true').map((n) => n.node_id)).toEqual([cluster.shards[s.shard_id].masterNodeId]);
    }
    const byId = (await emit(MEMBER, 'get_cluster_detail', { cluster_id: result.cluster_id })).attachment as unknown as Detail;
    expect(byId.list_shard.length).toBe(2);

    const summary = async () => ((await emit(MEMBER, 'get_cluster_summary')).attachment as { list_cluster: Record<string, string>[] }).list_cluster[0];
    expect(await summary()).toMatchObject({ cluster_id: result.cluster_id, status: 'online', nodes_online: '6/6', comps_online: '2/2' });

    const standby = Object.values(shards()[0].nodes).find((n) => n.id !== shards()[0].masterNodeId)!;
    const nodeStatus = async () => (await detail()).list_shard.flatMap((s) => s.list_node).find((n) => n.node_id === standby.id)!.status;
    const pid = Number((await readFile(path.join(standby.datadir, String(standby.port), 'run', 'mariadbd.pid'), 'utf8')).trim());
    // A standby that stops answering (its process alive, so nothing restarts it) is measured offline,
    // and the cluster degraded, not the stored "ready".
    process.kill(pid, 'SIGSTOP');
    try {
      await waitUntil('the frozen standby shown offline', async () => ((await nodeStatus()) === 'offline' ? true : undefined), 15_000);
      expect(await summary()).toMatchObject({ status: 'degraded', nodes_online: '5/6' });
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    // A standby killed with SIGKILL is restarted by its agent and measured online again.
    process.kill(pid, 'SIGKILL');
    const killed = Date.now();
    await waitUntil('the killed standby back online', async () => ((await nodeStatus()) === 'online' ? true : undefined), 10_000);
    console.log(`killed standby online again ${Date.now() - killed} ms after SIGKILL`);
    const after = await detail();
    expect(after.list_shard.flatMap((s) => s.list_node).every((n) => n.status === 'online')).toBe(true);
    expect(await summary()).toMatchObject({ status: 'online', nodes_online: '6/6' });
  }, 60_000);

  it("one ProbeHost per host answers, for every instance, exactly what that instance's own probe answers (issue 20)", async () => {
    // What the manager's summary and detail above were measured with: one call per host.
    const unused = storagePorts(0).high; // no instance there: 'unknown', as Probe says
    for (const host of HOSTS) {
      const mariadbPorts = [...shards().flatMap((s) => Object.values(s.nodes)).filter((n) => n.hostaddr === host).map((n) => n.port), unused];
      const postgresPorts = [...Object.values(cluster.comps).filter((c) => c.hostaddr === host).map((c) => c.port), unused];
      const address = `${host}:${AGENT_PORT}`;
      const [hostProbe, mariadb, postgres] = [new HostProbeAgentClient(address), new MariaDbAgentClient(address), new PostgresAgentClient(address)];
      try {
        const eachInstance = async () => ({
          mariadb: await Promise.all(mariadbPorts.map(async (port) => ({ port, probe: await mariadb.probe(port), error: '' }))),
          postgres: await Promise.all(postgresPorts.map(async (port) => ({ port, probe: await postgres.probe(port), error: '' }))),
        });
        // The standby killed above may still be counted into supervisor_restarts while we look (a CI
        // run saw 0 then 1): compare with what each instance answers just before and just after, once
        // those two agree, so a live counter moving is not taken for a disagreement.
        let perHost, before, after;
        for (let attempt = 0; ; attempt++) {
          before = await eachInstance();
          perHost = await hostProbe.probeHost({ mariadb_ports: mariadbPorts, postgres_ports: postgresPorts });
          after = await eachInstance();
          if (JSON.stringify(before) === JSON.stringify(after) || attempt === 20) break;
          await new Promise((r) => setTimeout(r, 250));
        }
        expect(after).toEqual(before);
        const perInstance = after;
        expect(perHost).toEqual(perInstance);
        expect(perHost.mariadb.map((m) => m.probe?.state)).toEqual([...mariadbPorts.slice(0, -1).map(() => 'online'), 'unknown']);
        expect(perHost.postgres.map((p) => p.probe?.accepting)).toEqual([...postgresPorts.slice(0, -1).map(() => true), false]);
      } finally {
        for (const c of [hostProbe, mariadb, postgres]) c.close();
      }
    }
  });

  it('delete_cluster reports each step, leaves no process or data dir, and the ports can be allocated again', async () => {
    const reply = await f.runJob('delete_cluster', { cluster_id: result.cluster_id }, 180_000);
    expect(reply.status, reply.error_info).toBe('done');
    const att = reply.attachment as Record<string, any>;
    expect(att).toMatchObject({ cluster_id: result.cluster_id, cluster_name: result.cluster_name, storage_state: 'done', computer_state: 'done' });
    expect(att.shard_step).toHaveLength(2);
    for (const step of att.shard_step) {
      expect(step).toMatchObject({ cluster_id: result.cluster_id, error_code: 0, error_info: '', storage_state: 'done' });
      expect(step.storage_hosts).toMatch(/^(127\.0\.2\.\d_55\d{3};){3}$/);
    }
    expect(att.computer_step).toHaveLength(2);
    for (const step of att.computer_step) expect(step).toMatchObject({ error_code: 0, computer_state: 'done', computer_hosts: expect.stringMatching(/^127\.0\.2\.\d_55\d{3};$/) });

    expect(await enginePidsUnder(f.tmp)).toEqual([]);
    const gone = async (dir: string) => access(dir).then(() => false, () => true);
    for (const s of shards()) {
      for (const n of Object.values(s.nodes)) {
        for (const dir of [path.join(n.datadir, String(n.port)), path.join(n.logdir, String(n.port)), path.join(n.walLogDir, String(n.port))]) expect(await gone(dir), dir).toBe(true);
      }
    }
    for (const c of Object.values(cluster.comps)) expect(await gone(path.join(c.compDatadir, String(c.port)))).toBe(true);
    const cgroups = new CgroupAgentClient(`${HOSTS[0]}:${AGENT_PORT}`);
    const { cpu_root } = await cgroups.info();
    cgroups.close();
    for (const n of shards().flatMap((s) => Object.values(s.nodes))) expect(await gone(path.join(cpu_root, 'kcm', `mysql-${n.hostaddr}-${n.port}`))).toBe(true);
    for (const c of Object.values(cluster.comps)) expect(await gone(path.join(cpu_root, 'kcm', `pg-${c.hostaddr}-${c.port}`))).toBe(true);

    const state = f.manager.store.state();
    expect(state.clusters[result.cluster_id]).toBeUndefined();
    expect(state.ports).toEqual({});
    // Every port is free again: an allocation on a copy of the state gets the lowest six.
    const again = allocatePorts(restoreMeta(snapshotMeta(state)), { hostaddr: HOSTS[0], machineType: 'storage', count: 6, owner: 'test' });
    expect(again).toEqual({ ok: true, value: [55100, 55101, 55102, 55103, 55104, 55105] });
    expect((await emit(MEMBER, 'get_cluster_summary')).attachment).toEqual({ list_cluster: [] });
  }, 200_000);
});
