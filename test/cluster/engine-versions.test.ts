// Engines by version, side by side (issue 31; docs/engine-versions.md), on real engines: one
// manager, three agents on 127.0.2.1-3 sharing the host's engine cache. Two clusters on the
// same hosts, one on the older Debian builds the apt sources carry and one on the newer
// (the default: what the hosts have installed), each process running from its version's
// directory; get_cluster_detail shows the versions; UpgradeEngine moves a standby and a compute
// node to the newer version with their data and replication intact; a version the archive
// lacks fails create_cluster with the clear error and installs nothing.

import { execFileSync } from 'node:child_process';
import { readdir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent } from '@kcm/agent';
import { MariaDbAgentClient, PostgresAgentClient } from '@kcm/agent-api';
import { silentLogger } from '@kcm/common';
import { CommandKind, type ClusterRecord, type StorageNodeRecord } from '@kcm/manager';
import { emit, emitRaw } from '../helpers/emit-client';
import { openTestAccounts } from '../helpers/secrets';
import { enginePidsUnder, HOSTS, MEMBER, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './machines';

const ENGINE_CACHE = '/var/cache/kcm/engines';

/** The upstream versions of a package in the host's apt sources, newest first (what the agent resolves against). */
function archiveVersions(pkg: string): string[] {
  const out = execFileSync('apt-cache', ['madison', pkg], { encoding: 'utf8' });
  const versions = out.split('\n').map((l) => l.split('|')[1]?.trim() ?? '').filter(Boolean).map((v) => v.replace(/^\d+:/, '').replace(/-[^-]*$/, ''));
  return [...new Set(versions)];
}

/** The system-installed version: the agents' default, so the newer cluster's. */
function installedVersion(pkg: string): string {
  return execFileSync('dpkg-query', ['-W', '-f=${Version}', pkg], { encoding: 'utf8' }).replace(/^\d+:/, '').replace(/-[^-]*$/, '');
}

function olderAndNewer(pkg: string): { older: string; newer: string } {
  const newer = installedVersion(pkg);
  const older = archiveVersions(pkg).find((v) => v !== newer);
  if (!older) throw new Error(`the apt sources carry only ${newer} of ${pkg}: this test needs two builds side by side (apt-cache madison ${pkg})`);
  return { older, newer };
}

interface DetailNode { node_id: string; hostaddr: string; port: string; status: string; master: string; engine_version: string }
interface DetailComp { comp_id: string; hostaddr: string; port: string; status: string; engine_version: string }
interface Detail { storage_version: string; computer_version: string; list_shard: { list_node: DetailNode[] }[]; list_comp: DetailComp[] }

describe('engine versions side by side on one host (real MariaDB and PostgreSQL builds)', () => {
  const mariadb = olderAndNewer('mariadb-server-core');
  const postgres = olderAndNewer('postgresql-15');
  let f: ClusterFixture;
  let older: ClusterRecord;
  let newer: ClusterRecord;

  const state = () => f.manager.store.state();
  const detail = async (c: ClusterRecord) => (await emit(MEMBER, 'get_cluster_detail', { cluster_id: c.id })).attachment as unknown as Detail;
  const mariadbdPid = async (node: StorageNodeRecord) => Number((await readFile(path.join(node.datadir, String(node.port), 'run', 'mariadbd.pid'), 'utf8')).trim());
  const postmasterPid = async (comp: { compDatadir: string; port: number }) => Number((await readFile(path.join(comp.compDatadir, String(comp.port), 'postmaster.pid'), 'utf8')).split('\n')[0]);
  const exe = (pid: number) => readlink(`/proc/${pid}/exe`);
  const mariadbdOf = (version: string) => path.join(ENGINE_CACHE, `mariadb-${version}`, 'usr', 'sbin', 'mariadbd');
  const postgresOf = (version: string) => path.join(ENGINE_CACHE, `postgres-${version}`, 'usr', 'lib', 'postgresql', '15', 'bin', 'postgres');
  const nodesOf = (c: ClusterRecord) => Object.values(c.shards).flatMap((s) => Object.values(s.nodes));
  const masterOf = (c: ClusterRecord) => {
    const s = Object.values(c.shards)[0];
    return s.nodes[s.masterNodeId];
  };
  const mysqlAs = (c: ClusterRecord, role: 'storage' | 'replication', node: StorageNodeRecord) => {
    const a = openTestAccounts(c.accounts)[role];
    return mysql.createConnection({ host: node.hostaddr, port: node.port, user: a.user, password: a.password, connectTimeout: 5000 });
  };
  const pgAs = async (c: ClusterRecord, comp: { hostaddr: string; port: number }) => {
    const a = openTestAccounts(c.accounts).computer;
    const client = new pg.Client({ host: comp.hostaddr, port: comp.port, user: a.user, password: a.password, database: 'postgres' });
    client.on('error', () => {});
    await client.connect();
    return client;
  };
  const serverVersion = async (c: ClusterRecord, node: StorageNodeRecord) => {
    const conn = await mysqlAs(c, 'replication', node);
    try {
      const [[row]] = (await conn.query('SELECT VERSION() AS v')) as unknown as [{ v: string }[]];
      return row.v;
    } finally {
      await conn.end();
    }
  };
  const agentAddress = (host: string) => `${host}:${f.agentPort}`;

  beforeAll(async () => {
    f = await startClusterFixture();
    await registerMachines(f);
  }, 120_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  it('a malformed version is refused at submission, naming the field; nothing is committed', async () => {
    const jobs = state().counters.job;
    const reply = await emitRaw(MEMBER, 'create_cluster', clusterParas({ storage_version: '10.11' }));
    expect(reply.job_id).toBe('');
    expect(reply.error_info).toMatch(/paras\.storage_version/);
    expect(state().counters.job).toBe(jobs);
  });

  it('a create_cluster naming a version the archive lacks fails with the versions it has, and installs nothing', async () => {
    const missing = '10.11.2';
    const reply = await f.runJob('create_cluster', clusterParas({ nick_name: 'missing', storage_version: missing }), 120_000);
    expect(reply.status).toBe('failed');
    expect(reply.error_info).toMatch(
      new RegExp(`step 2 of 8 \\(prepare engines\\) failed: paras\\.storage_version: MariaDB 10\\.11\\.2 is not in this host's apt sources \\(available: [^)]*${mariadb.older.replaceAll('.', '\\.')}`),
    );
    expect(state().clusters).toEqual({});
    expect(state().ports).toEqual({});
    expect(await enginePidsUnder(f.tmp)).toEqual([]);
    for (const i of [0, 1, 2]) {
      expect(await readdir(f.dirs(i).datadir), `instance dirs on host ${i + 1}`).toEqual([]);
      expect(await readdir(f.dirs(i).comp_datadir).catch(() => []), `compute dirs on host ${i + 1}`).toEqual([]);
    }
    expect(await readdir(ENGINE_CACHE)).not.toContain(`mariadb-${missing}`);
  }, 150_000);

  it(`two clusters on the same hosts run MariaDB ${mariadb.older} and ${mariadb.newer}, PostgreSQL ${postgres.older} and ${postgres.newer}, each process from its version's directory`, async () => {
    const a = await f.runJob('create_cluster', clusterParas({ nick_name: 'older', storage_version: mariadb.older, computer_version: postgres.older, computer_iplists: [HOSTS[2]] }), 300_000);
    expect(a.status, a.error_info).toBe('done');
    // No versions named: the manager's default, the hosts' installed builds.
    const b = await f.runJob('create_cluster', clusterParas({ nick_name: 'newer', computer_iplists: [HOSTS[1]] }), 300_000);
    expect(b.status, b.error_info).toBe('done');
    older = state().clusters[(a.attachment as { cluster_id: string }).cluster_id];
    newer = state().clusters[(b.attachment as { cluster_id: string }).cluster_id];
    for (const [c, m, p] of [[older, mariadb.older, postgres.older], [newer, mariadb.newer, postgres.newer]] as const) {
      for (const node of nodesOf(c)) {
        expect(await exe(await mariadbdPid(node)), `node ${node.id} of ${c.nickName}`).toBe(mariadbdOf(m));
        expect(await serverVersion(c, node)).toMatch(new RegExp(`^${m.replaceAll('.', '\\.')}-MariaDB`));
      }
      for (const comp of Object.values(c.comps)) {
        expect(await exe(await postmasterPid(comp)), `${comp.name} of ${c.nickName}`).toBe(postgresOf(p));
        const client = await pgAs(c, comp);
        expect((await client.query('SHOW server_version')).rows[0].server_version).toMatch(new RegExp(`^${p.replaceAll('.', '\\.')} `));
        await client.end();
      }
    }
    // Both versions' nodes share a host: the first host runs one mariadbd of each.
    const onFirstHost = await Promise.all([older, newer].map(async (c) => exe(await mariadbdPid(nodesOf(c).find((n) => n.hostaddr === HOSTS[0])!))));
    expect(onFirstHost).toEqual([mariadbdOf(mariadb.older), mariadbdOf(mariadb.newer)]);
  }, 620_000);

  it('get_cluster_detail shows the version each node and compute node was measured running', async () => {
    for (const [c, m, p] of [[older, mariadb.older, postgres.older], [newer, mariadb.newer, postgres.newer]] as const) {
      const d = await detail(c);
      expect({ storage: d.storage_version, computer: d.computer_version }).toEqual({ storage: m, computer: p });
      expect(d.list_shard.flatMap((s) => s.list_node.map((n) => n.engine_version))).toEqual([m, m, m]);
      expect(d.list_comp.map((comp) => comp.engine_version)).toEqual([p]);
    }
  });

  it('after its agent restarts, a storage node killed with SIGKILL is brought back from the same version', async () => {
    const standby = nodesOf(older).find((n) => n.id !== masterOf(older).id && n.hostaddr === HOSTS[2])!;
    // A new agent process reads the instance's version from its record, as after a host restart.
    const i = f.agents.findIndex((a) => a.address.startsWith(`${standby.hostaddr}:`));
    await f.agents[i].stop();
    f.agents[i] = await startAgent({ hostaddr: standby.hostaddr, port: f.agentPort, logger: silentLogger(), stateDir: path.join(f.tmp, `agent-${standby.hostaddr}`) });
    const killed = await mariadbdPid(standby);
    process.kill(killed, 'SIGKILL');
    const back = await waitUntil('the killed standby restarted', async () => {
      const pid = await mariadbdPid(standby).catch(() => 0);
      return pid && pid !== killed && (await exe(pid).catch(() => '')) ? pid : undefined;
    }, 60_000);
    expect(await exe(back)).toBe(mariadbdOf(mariadb.older));
  }, 90_000);

  it(`rebuild_node copies a standby of the ${mariadb.older} cluster with that version's mariabackup; it runs ${mariadb.older} after`, async () => {
    const master = masterOf(older);
    const victim = nodesOf(older).find((n) => n.id !== master.id && n.hostaddr === HOSTS[2])!;
    const source = nodesOf(older).find((n) => n.id !== master.id && n.id !== victim.id)!;
    const before = await mariadbdPid(victim);
    const reply = await f.runJob('rebuild_node', {
      cluster_id: older.id, allow_pull_from_master: '0', allow_replica_delay: '30',
      rb_nodes: [{ hostaddr: victim.hostaddr, port: String(victim.port), need_backup: '0', pv_limit: '0' }],
    }, 180_000);
    expect(reply.status, reply.error_info).toBe('done');
    expect((reply.attachment as { list_node: { source: string }[] }).list_node[0].source).toBe(`${source.hostaddr}:${source.port}`);
    const pid = await mariadbdPid(victim);
    expect(pid).not.toBe(before);
    expect(await exe(pid)).toBe(mariadbdOf(mariadb.older));
    const conn = await mysqlAs(older, 'replication', victim);
    const [[slave]] = (await conn.query('SHOW SLAVE STATUS')) as unknown as [Record<string, string>[]];
    await conn.end();
    expect(slave).toMatchObject({ Master_Host: master.hostaddr, Slave_IO_Running: 'Yes', Slave_SQL_Running: 'Yes' });
    expect((await detail(older)).list_shard[0].list_node.find((n) => n.node_id === victim.id)!.engine_version).toBe(mariadb.older);
  }, 200_000);

  it(`UpgradeEngine moves a standby to ${mariadb.newer}: mariadb-upgrade run, its rows kept, replication running, idempotent by op_id`, async () => {
    const master = masterOf(older);
    const standby = nodesOf(older).find((n) => n.id !== master.id && n.hostaddr === HOSTS[1])!;
    const writer = await mysqlAs(older, 'storage', master);
    await writer.query('CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
    await writer.query('CREATE TABLE `postgres_$$_public`.upgrades (id INT PRIMARY KEY, note VARCHAR(40) NOT NULL) ENGINE=InnoDB');
    await writer.query("INSERT INTO `postgres_$$_public`.upgrades VALUES (1, 'before')");
    const countOn = async (node: StorageNodeRecord) => {
      const conn = await mysqlAs(older, 'storage', node);
      try {
        const [[row]] = (await conn.query('SELECT COUNT(*) AS n FROM `postgres_$$_public`.upgrades')) as unknown as [{ n: number }[]];
        return Number(row.n);
      } catch {
        return -1;
      } finally {
        await conn.end();
      }
    };
    await waitUntil('the row on the standby', async () => ((await countOn(standby)) === 1 ? true : undefined), 30_000);

    const client = new MariaDbAgentClient(agentAddress(standby.hostaddr));
    try {
      const reply = await client.upgradeEngine('engine-test-upgrade-standby', standby.port, mariadb.newer);
      console.log(`standby upgrade: ${reply.version_before} -> ${reply.version_after} (${reply.detail})`);
      expect(reply).toMatchObject({ port: standby.port, version_before: mariadb.older, version_after: mariadb.newer, engine_version: mariadb.newer });
      // The new version's mariadb-upgrade ran and gave its verdict (within one series: nothing to upgrade).
      expect(reply.detail).toMatch(new RegExp(`mariadb-upgrade ${mariadb.newer.replaceAll('.', '\\.')}: (.*no need to run mysql_upgrade again for ${mariadb.newer.replaceAll('.', '\\.')}|\\d+ phases run)`));
      expect(await exe(await mariadbdPid(standby))).toBe(mariadbdOf(mariadb.newer));
      // The same op_id again: the first reply, no second stop.
      const pid = await mariadbdPid(standby);
      expect(await client.upgradeEngine('engine-test-upgrade-standby', standby.port, mariadb.newer)).toEqual(reply);
      expect(await mariadbdPid(standby)).toBe(pid);
    } finally {
      client.close();
    }
    expect(await countOn(standby)).toBe(1);
    const conn = await mysqlAs(older, 'replication', standby);
    const [[slave]] = (await conn.query('SHOW SLAVE STATUS')) as unknown as [Record<string, string>[]];
    await conn.end();
    expect(slave).toMatchObject({ Master_Host: master.hostaddr, Slave_IO_Running: 'Yes', Slave_SQL_Running: 'Yes', Last_SQL_Error: '', Using_Gtid: 'Slave_Pos' });
    // Replication goes on from the older master to the upgraded standby.
    await writer.query("INSERT INTO `postgres_$$_public`.upgrades VALUES (2, 'after')");
    await writer.end();
    await waitUntil('the new row on the upgraded standby', async () => ((await countOn(standby)) === 2 ? true : undefined), 30_000);

    // The upgrade job's record of it (EngineVersionsRecorded), shown by get_cluster_detail.
    const outcome = await f.manager.store.propose({ kind: CommandKind.EngineVersionsRecorded, at: Date.now(), clusterId: older.id, nodes: [{ nodeId: standby.id, version: mariadb.newer }] });
    expect(outcome.ok).toBe(true);
    const shown = (await detail(older)).list_shard[0].list_node.find((n) => n.node_id === standby.id)!;
    expect(shown.engine_version).toBe(mariadb.newer);
  }, 180_000);

  it(`UpgradePostgresEngine moves a compute node to ${postgres.newer}, which still reads and writes the shard's rows`, async () => {
    const comp = Object.values(older.comps)[0];
    await waitUntil('the upgrades table on the compute node', async () => {
      const c = await pgAs(older, comp);
      try {
        const { rows } = await c.query('SELECT count(*)::int AS n FROM public.upgrades');
        return rows[0].n === 2 ? true : undefined;
      } catch {
        return undefined;
      } finally {
        await c.end();
      }
    }, 60_000);
    const client = new PostgresAgentClient(agentAddress(comp.hostaddr));
    try {
      const reply = await client.upgradeEngine('engine-test-upgrade-comp', comp.port, postgres.newer);
      console.log(`compute node upgrade: ${reply.version_before} -> ${reply.version_after} (${reply.detail})`);
      expect(reply).toMatchObject({ port: comp.port, version_before: postgres.older, version_after: postgres.newer, engine_version: postgres.newer });
    } finally {
      client.close();
    }
    expect(await exe(await postmasterPid(comp))).toBe(postgresOf(postgres.newer));
    const c = await pgAs(older, comp);
    try {
      expect((await c.query('SHOW server_version')).rows[0].server_version).toMatch(new RegExp(`^${postgres.newer.replaceAll('.', '\\.')} `));
      await c.query("INSERT INTO public.upgrades VALUES (3, 'through the upgraded compute node')");
      const { rows } = await c.query('SELECT id, note FROM public.upgrades ORDER BY id');
      expect(rows.map((r) => r.id)).toEqual([1, 2, 3]);
      // kcm_ddl, linked into every version's directory, is loaded by the new one too.
      expect((await c.query("SELECT count(*)::int AS n FROM pg_extension WHERE extname = 'kcm_ddl'")).rows[0].n).toBe(1);
    } finally {
      await c.end();
    }
  }, 120_000);
});
