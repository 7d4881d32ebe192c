// delete_shards of a cluster's first shard, then DDL through a compute node (issue 35,
// defect 9): the job answers done, the compute node keeps its shard servers and kcm_ddl,
// and a table created through it lands on the remaining shard, never as a local table.
// 2 shards x 3 nodes, 1 compute node, on real engines.

import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from './cluster-fixture';
import { startSqlCluster, type SqlCluster } from './sql-fixture';

describe('delete_shards of the first shard of a 2-shard cluster', () => {
  let s: SqlCluster;

  beforeAll(async () => {
    s = await startSqlCluster({}, { comps: '1' });
  }, 300_000);

  afterAll(async () => {
    await s?.close();
  }, 120_000);

  it('answers done; CREATE TABLE + INSERT through the compute node then land on the remaining shard, and the compute node never holds a local table', async () => {
    const [first, second] = Object.keys(s.cluster().shards);
    const [comp] = s.comps();
    // A table made and dropped on the first shard through the compute node, as a user
    // trying the cluster out would: its MariaDB database postgres_$$_public stays there.
    const c = await s.pgAs(comp);
    await c.query(`SET kcm.shard = '${first}'`);
    await c.query('create table scratch(id int primary key)');
    await c.query('drop table scratch');
    await c.end();

    // Once the catalog sync has seen that database, it counts public among the schemas the shards have.
    await waitUntil('public marked as the shards\' schema', async () => {
      const a = await s.pgAs(comp);
      try {
        const { rows } = await a.query(`SELECT obj_description(oid, 'pg_namespace') AS mark FROM pg_namespace WHERE nspname = 'public'`);
        return rows[0]?.mark === 'kcm:schema' ? true : undefined;
      } finally {
        await a.end();
      }
    }, 10_000, 100);

    const master = s.cluster().shards[first].nodes[s.cluster().shards[first].masterNodeId];
    // The body the reference system's own include file sends: hostaddr and port besides the ids.
    const reply = await s.f.runJob('delete_shard', { cluster_id: s.cluster().id, shard_id: first, hostaddr: master.hostaddr, port: String(master.port) }, 120_000);
    expect(reply.status, reply.error_info).toBe('done');
    expect(Object.keys(s.cluster().shards)).toEqual([second]);

    // The job's own catalog sync has run: the compute node has the remaining shard's server
    // and both extensions, in schema public (the sync dropped it, CASCADE, before the fix).
    const a = await s.pgAs(comp);
    const { rows: [after] } = await a.query(
      `SELECT (SELECT string_agg(srvname, ',' ORDER BY srvname) FROM pg_foreign_server) AS servers,
              (SELECT string_agg(extname, ',' ORDER BY extname) FROM pg_extension WHERE extname IN ('kcm_ddl', 'mysql_fdw')) AS extensions,
              (SELECT count(*)::int FROM pg_namespace WHERE nspname = 'public') AS public`,
    );
    await a.end();
    expect(after).toEqual({ servers: `shard_${second}`, extensions: 'kcm_ddl,mysql_fdw', public: 1 });

    const u = await s.pgAs(comp);
    try {
      await u.query('create table after_delete(id int primary key, v text)');
      await u.query(`insert into after_delete values (1, 'reached a shard')`);
      const kind = await u.query(`SELECT c.relkind, s.srvname FROM pg_class c LEFT JOIN pg_foreign_table ft ON ft.ftrelid = c.oid LEFT JOIN pg_foreign_server s ON s.oid = ft.ftserver WHERE c.oid = 'public.after_delete'::regclass`);
      expect(kind.rows).toEqual([{ relkind: 'f', srvname: `shard_${second}` }]);
    } finally {
      await u.end();
    }
    expect(await s.shardTables('after_delete')).toEqual([['postgres_$$_public.after_delete']]);
    const m = await s.mysqlAs(s.masters()[0]);
    const [rows] = (await m.query('SELECT id, v FROM `postgres_$$_public`.after_delete')) as unknown as [unknown[]];
    await m.end();
    expect(rows).toEqual([{ id: 1, v: 'reached a shard' }]);
  }, 200_000);

  it('a database where kcm_ddl\'s event trigger is missing or disabled refuses CREATE TABLE through the compute node instead of making a local table', async () => {
    const comp = Object.values(s.cluster().comps)[0];
    // The agent's own superuser session: the instance's unix socket, peer authentication.
    const admin = new pg.Client({ host: path.join(comp.compDatadir, String(comp.port)), port: comp.port, user: 'postgres', database: 'postgres' });
    await admin.connect();
    await admin.query('ALTER EVENT TRIGGER kcm_ddl_command_end DISABLE');
    const u = await s.pgAs({ host: comp.hostaddr, port: comp.port });
    try {
      await expect(u.query('create table never_local(id int primary key)')).rejects.toThrow(/kcm: CREATE TABLE is not carried to a shard in database postgres: kcm_ddl's event trigger kcm_ddl_command_end is missing or disabled here; nothing was changed/);
      await expect(u.query(`DO $$ BEGIN CREATE TABLE never_local(id int primary key); END $$`)).rejects.toThrow(/CREATE TABLE is not carried to a shard/);
      await expect(u.query('create schema never_local_schema')).rejects.toThrow(/CREATE SCHEMA is not carried to a shard/);
      // A temporary table is the session's own, as on any PostgreSQL.
      await u.query('create temp table scratch_rows(id int)');
      expect((await u.query(`SELECT count(*)::int AS n FROM pg_class WHERE relname IN ('never_local', 'never_local_schema') OR relnamespace = to_regnamespace('never_local_schema')`)).rows).toEqual([{ n: 0 }]);
    } finally {
      await admin.query('ALTER EVENT TRIGGER kcm_ddl_command_end ENABLE');
      await admin.end();
      await u.end();
    }
    expect(await s.shardTables('never_local')).toEqual([[]]);
  }, 60_000);
});
