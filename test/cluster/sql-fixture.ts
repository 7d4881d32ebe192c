// A 2-shard x 3-node, 2-compute-node cluster on real engines for the tests of SQL through
// compute nodes, with helpers to reach every compute node (pg, psql) and shard master
// (storage account) and to ask each what it holds. createSqlCluster makes another cluster
// on the same fixture (a restore's destination).

import { spawnSync } from 'node:child_process';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { ClusterRecord } from '@kcm/manager';
import { startClusterFixture, waitUntil, type ClusterFixture, type ClusterFixtureOptions } from './cluster-fixture';
import { clusterParas, type CreateClusterParas } from './cluster-paras';
import { registerMachines } from './machines';
import { openTestAccounts } from '../helpers/secrets';

export type Endpoint = { host: string; port: number };

export interface SqlCluster {
  f: ClusterFixture;
  cluster: () => ClusterRecord;
  computeUser: string;
  computePassword: string;
  comps: () => Endpoint[];
  masters: () => Endpoint[];
  pgAs: (at: Endpoint, database?: string) => Promise<pg.Client>;
  /** Runs a script through psql as the compute account; stdout and stderr as psql prints them. */
  psql: (at: Endpoint, script: string, database?: string) => { stdout: string; stderr: string };
  mysqlAs: (at: Endpoint) => Promise<mysql.Connection>;
  /** For each shard master: the MariaDB databases.tables named `table` (any `%_$$_%` database). */
  shardTables: (table: string) => Promise<string[][]>;
  /** For each compute node: the relations named `table` in database `database` (schema.name kind). */
  compRelations: (table: string, database?: string) => Promise<string[][]>;
  close: () => Promise<void>;
}

const CREATE_PARAS = clusterParas({ nick_name: 'sql', shards: '2', comps: '2', cpu_limit_node: 'quota', computer_iplists: [] });

/** A fixture with the machines registered and one cluster on it, made with `paras` over the default 2 shards x 3 nodes, 2 compute nodes. */
export async function startSqlCluster(options: ClusterFixtureOptions = {}, paras: Partial<CreateClusterParas> = {}): Promise<SqlCluster> {
  const f = await startClusterFixture(options);
  await registerMachines(f);
  return createSqlCluster(f, paras);
}

/**
 * One more cluster on a running fixture (machines registered), made with the fixture's
 * create_cluster paras over `paras`; its `close` closes the whole fixture.
 */
export async function createSqlCluster(f: ClusterFixture, paras: Partial<CreateClusterParas> = {}): Promise<SqlCluster> {
  const reply = await f.runJob('create_cluster', { ...CREATE_PARAS, ...paras }, 300_000);
  if (reply.status !== 'done') throw new Error(`create_cluster: ${reply.error_info}`);
  const result = reply.attachment as unknown as { cluster_id: string; computer_user: string; computer_pwd: string };
  const cluster = () => f.manager.store.state().clusters[result.cluster_id];
  const comps = () => Object.values(cluster().comps).map((c) => ({ host: c.hostaddr, port: c.port }));
  const masters = () =>
    Object.values(cluster().shards).map((s) => {
      const m = s.nodes[s.masterNodeId];
      return { host: m.hostaddr, port: m.port };
    });
  const pgAs = async (at: Endpoint, database = 'postgres') => {
    const c = new pg.Client({ host: at.host, port: at.port, user: result.computer_user, password: result.computer_pwd, database });
    c.on('error', () => {});
    await c.connect();
    return c;
  };
  const storage = openTestAccounts(cluster().accounts).storage;
  const mysqlAs = (at: Endpoint) => mysql.createConnection({ host: at.host, port: at.port, user: storage.user, password: storage.password, connectTimeout: 5000 });
  const psql = (at: Endpoint, script: string, database = 'postgres') => {
    const run = spawnSync('psql', ['-X', '-h', at.host, '-p', String(at.port), '-U', result.computer_user, '-d', database, '-f', '-'], {
      input: script, encoding: 'utf8', env: { ...process.env, PGPASSWORD: result.computer_pwd }, timeout: 60_000,
    });
    return { stdout: run.stdout, stderr: run.stderr };
  };
  const shardTables = async (table: string) =>
    Promise.all(
      masters().map(async (m) => {
        const c = await mysqlAs(m);
        try {
          const [rows] = (await c.query(`SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) AS t FROM information_schema.TABLES WHERE TABLE_NAME = ? AND TABLE_SCHEMA LIKE '%\\_$$\\_%' ORDER BY 1`, [table])) as unknown as [{ t: string }[]];
          return rows.map((r) => r.t);
        } finally {
          await c.end();
        }
      }),
    );
  const compRelations = async (table: string, database = 'postgres') =>
    Promise.all(
      comps().map(async (at) => {
        const c = await pgAs(at, database);
        try {
          const { rows } = await c.query(`SELECT n.nspname || '.' || c.relname || ' ' || c.relkind::text AS r FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = $1 ORDER BY 1`, [table]);
          return rows.map((r) => r.r as string);
        } finally {
          await c.end();
        }
      }),
    );
  // The catalog sync gives every database of every compute node the shard servers within a round.
  for (const at of comps()) {
    await waitUntil(`shard servers on ${at.host}:${at.port}`, async () => {
      const c = await pgAs(at);
      try {
        const { rows } = await c.query(`SELECT count(*)::int AS n FROM pg_foreign_server WHERE srvname LIKE 'shard\\_%'`);
        return rows[0].n === Object.keys(cluster().shards).length ? true : undefined;
      } finally {
        await c.end();
      }
    }, 15_000);
  }
  return { f, cluster, computeUser: result.computer_user, computePassword: result.computer_pwd, comps, masters, pgAs, psql, mysqlAs, shardTables, compRelations, close: () => f.close() };
}
