// DDL through compute nodes, on real engines (README "SQL through compute nodes"): a
// 2-shard x 3-node, 2-compute-node cluster; every statement goes through a compute node
// with the compute account create_cluster returned, and each shard master and compute
// node is then asked what it holds.

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from './cluster-fixture';
import { startSqlCluster, type SqlCluster } from './sql-fixture';

// The reference system's own check, run on every cluster it makes.
const REFERENCE_CHECK = [
  "SET client_min_messages TO 'warning';",
  'drop table if exists t1111;',
  'RESET client_min_messages;',
  'create table t1111(id int primary key, info text, wt int);',
  "insert into t1111(id,info,wt) values(1, 'record1', 1);",
  'select * from t1111;',
  "update t1111 set info='record' where id = 1;",
  'select * from t1111;',
  'delete from t1111 where id = 1;',
  'select * from t1111;',
  'drop table t1111;',
].join('\n');

// What psql prints for it against a plain PostgreSQL.
const REFERENCE_OUTPUT = `SET
DROP TABLE
RESET
CREATE TABLE
INSERT 0 1
 id |  info   | wt 
----+---------+----
  1 | record1 |  1
(1 row)

UPDATE 1
 id |  info  | wt 
----+--------+----
  1 | record |  1
(1 row)

DELETE 1
 id | info | wt 
----+------+----
(0 rows)

DROP TABLE
`;

describe('DDL through compute nodes (2 shards, 2 compute nodes)', () => {
  let s: SqlCluster;

  beforeAll(async () => {
    // No failover while a test holds a master stopped: the point is what DDL does then.
    s = await startSqlCluster({ managerConfig: { failureGraceMs: 600_000 } });
  }, 300_000);

  afterAll(async () => {
    await s?.close();
  }, 120_000);

  it('the reference check prints what PostgreSQL prints, through each compute node with the compute account', async () => {
    for (const at of s.comps()) {
      const { stdout, stderr } = s.psql(at, REFERENCE_CHECK);
      expect(stderr).toBe('');
      expect(stdout).toBe(REFERENCE_OUTPUT);
      expect(await s.shardTables('t1111')).toEqual([[], []]);
      expect(await s.compRelations('t1111')).toEqual([[], []]);
    }
  }, 60_000);

  it('CREATE TABLE puts the table on exactly one shard, owned by the compute account, seen by the other compute node within seconds; DROP TABLE removes it everywhere', async () => {
    const [c1, c2] = s.comps();
    const one = await s.pgAs(c1);
    const started = Date.now();
    await one.query('create table t2222(id int primary key, info varchar(20) not null, wt int)');
    const returned = Date.now();
    await one.query(`insert into t2222(id, info, wt) values (1, 'record1', 1), (2, 'record2', 2)`);
    const owner = await one.query(`SELECT c.relkind, pg_get_userbyid(c.relowner) AS owner FROM pg_class c WHERE c.oid = 'public.t2222'::regclass`);
    expect(owner.rows).toEqual([{ relkind: 'f', owner: s.computeUser }]);
    await one.end();

    const onShards = await s.shardTables('t2222');
    expect(onShards.flat()).toEqual(['postgres_$$_public.t2222']);
    const holder = s.masters()[onShards.findIndex((t) => t.length === 1)];
    const m = await s.mysqlAs(holder);
    const [rows] = (await m.query('SELECT id, info, wt FROM `postgres_$$_public`.t2222 ORDER BY id')) as unknown as [unknown[]];
    expect(rows).toEqual([{ id: 1, info: 'record1', wt: 1 }, { id: 2, info: 'record2', wt: 2 }]);
    await m.end();

    const seen = await waitUntil('t2222 through compute node 2', async () => {
      const two = await s.pgAs(c2);
      try {
        const r = await two.query('SELECT count(*)::int AS n, sum(wt)::int AS w FROM t2222');
        return r.rows[0];
      } finally {
        await two.end();
      }
    }, 5_000, 50);
    const visibleAfter = Date.now() - returned;
    console.log(`CREATE TABLE through a compute node took ${returned - started} ms; the other compute node read it ${visibleAfter} ms after it returned`);
    expect(seen).toEqual({ n: 2, w: 3 });
    // Issue 17: on every other compute node within 2 s. Measured 0.5 s on a quiet machine;
    // 1.5-2.7 s with seven helpers' suites sharing the 2 cores (load ~15).
    expect(visibleAfter).toBeLessThan(2_000);

    const two = await s.pgAs(c2);
    await two.query('drop table t2222');
    await two.end();
    expect(await s.shardTables('t2222')).toEqual([[], []]);
    await waitUntil('t2222 gone from both compute nodes', async () => ((await s.compRelations('t2222')).flat().length === 0 ? true : undefined), 5_000, 50);
  }, 60_000);

  it('the shard is chosen by the fewest-tables policy unless kcm.shard names one', async () => {
    const c = await s.pgAs(s.comps()[0]);
    const ids = Object.keys(s.cluster().shards);
    await c.query(`SET kcm.shard = '${ids[1]}'`);
    await c.query('create table pinned(id int primary key)');
    await c.query('RESET kcm.shard');
    expect(await s.shardTables('pinned')).toEqual([[], ['postgres_$$_public.pinned']]);
    // Shard 2 now holds one table more than shard 1: the next table goes to shard 1.
    await c.query('create table placed(id int primary key)');
    expect(await s.shardTables('placed')).toEqual([['postgres_$$_public.placed'], []]);
    await c.query(`SET kcm.shard = 'nope'`);
    await expect(c.query('create table lost(id int primary key)')).rejects.toThrow(/kcm\.shard = nope names no shard of this cluster/);
    await c.query('RESET kcm.shard');
    await c.query('drop table pinned, placed');
    await c.end();
    expect(await s.shardTables('pinned')).toEqual([[], []]);
    expect(await s.shardTables('placed')).toEqual([[], []]);
  }, 60_000);

  it('the compute account cannot set kcm.sync, the catalog sync\'s exemption, so its DDL still reaches a shard', async () => {
    const c = await s.pgAs(s.comps()[0]);
    try {
      await expect(c.query(`SET kcm.sync = 'on'`)).rejects.toThrow(/permission denied to set parameter "kcm\.sync"/);
      await expect(c.query(`SELECT set_config('kcm.sync', 'on', false)`)).rejects.toThrow(/permission denied to set parameter "kcm\.sync"/);
      await expect(c.query(`ALTER ROLE CURRENT_USER SET kcm.sync = 'on'`)).rejects.toThrow(/permission denied to set parameter "kcm\.sync"/);
      await c.query('create table unsynced(id int primary key)');
      expect((await s.shardTables('unsynced')).flat()).toEqual(['postgres_$$_public.unsynced']);
      await c.query('drop table unsynced');
    } finally {
      await c.end();
    }
    expect(await s.shardTables('unsynced')).toEqual([[], []]);
  }, 60_000);

  /** No shard has the table, and (within a catalog round or two) no compute node. */
  const nothingAnywhere = async (table: string) => {
    expect(await s.shardTables(table)).toEqual([[], []]);
    await waitUntil(`${table} on no compute node`, async () => ((await s.compRelations(table)).flat().length === 0 ? true : undefined), 5_000, 100);
  };

  it('a CREATE TABLE that fails leaves nothing on any shard or compute node: unmappable type, existing name, shard master stopped', async () => {
    const c = await s.pgAs(s.comps()[0]);
    await expect(c.query('create table bad_type(id int primary key, flag boolean)')).rejects.toThrow(/column public\.bad_type\.flag has type boolean, which has no MariaDB form/);
    await expect(c.query('create table bad_default(id int primary key, at timestamp default now())')).rejects.toThrow(/default now\(\); kcm carries constant defaults only/);
    await expect(c.query('create table bad_fk(id int primary key, up int check (up > 0))')).rejects.toThrow(/CHECK constraint/);
    for (const t of ['bad_type', 'bad_default', 'bad_fk']) await nothingAnywhere(t);

    // A name a shard already has (made there directly): refused, the shard's table and rows untouched.
    const m2 = await s.mysqlAs(s.masters()[1]);
    // The storage account has DDL and DML on the cluster's `%_$$_%` databases only.
    await expect(m2.query('CREATE DATABASE plain_db')).rejects.toThrow(/Access denied/);
    await m2.query('CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
    await m2.query('CREATE TABLE `postgres_$$_public`.clash (id INT PRIMARY KEY, v INT) ENGINE=InnoDB');
    await m2.query('INSERT INTO `postgres_$$_public`.clash VALUES (1, 7)');
    await expect(c.query('create table clash(id int primary key, other text)')).rejects.toThrow(/already exists/);
    expect(await s.shardTables('clash')).toEqual([[], ['postgres_$$_public.clash']]);
    const [rows] = (await m2.query('SELECT id, v FROM `postgres_$$_public`.clash')) as unknown as [unknown[]];
    expect(rows).toEqual([{ id: 1, v: 7 }]);
    await m2.end();
    // The catalog sync shows it on both compute nodes, once.
    await waitUntil('clash on both compute nodes', async () => ((await s.compRelations('clash')).every((r) => r.join() === 'public.clash f') ? true : undefined), 5_000, 100);

    // Shard 2's master stopped (SIGSTOP: the process is there, it answers nothing).
    const shard = Object.values(s.cluster().shards)[1];
    const master = shard.nodes[shard.masterNodeId];
    const pid = Number((await readFile(path.join(master.datadir, String(master.port), 'run', 'mariadbd.pid'), 'utf8')).trim());
    process.kill(pid, 'SIGSTOP');
    try {
      await expect(c.query('create table while_down(id int primary key)')).rejects.toThrow(/CREATE TABLE: shard \d+ \(.*\) cannot be reached.*nothing was changed/);
      await expect(c.query('drop table clash')).rejects.toThrow(/DROP: shard \d+ \(.*\) cannot be reached/);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await nothingAnywhere('while_down');
    expect(await s.shardTables('clash')).toEqual([[], ['postgres_$$_public.clash']]);
    expect(await s.compRelations('clash')).toEqual([['public.clash f'], ['public.clash f']]);

    // Inside a transaction block the shard could not roll back: refused before anything runs.
    await c.query('BEGIN');
    await expect(c.query('create table in_tx(id int primary key)')).rejects.toThrow(/CREATE TABLE cannot run inside a transaction block/);
    await c.query('ROLLBACK');
    await nothingAnywhere('in_tx');
    await c.query('drop table clash');
    await c.end();
    await nothingAnywhere('clash');
  }, 60_000);

  it('a table whose first column is not its key on its own is refused at CREATE TABLE (mysql_fdw writes rows through the first column only); one with a UNIQUE NOT NULL first column is written, updated and deleted', async () => {
    const c = await s.pgAs(s.comps()[0]);
    try {
      // Issue 35, defect 6: accepted before, then every INSERT failed ("first column of remote table must be unique").
      await expect(c.query('create table no_key(id int, v text)')).rejects.toThrow(/kcm: public\.no_key has no primary key on its first column \(id\); rows of a shard table are written through its first column, which must be its primary key \(or UNIQUE NOT NULL\) on its own; nothing was created/);
      // A key elsewhere, a key that only starts with the first column (one DELETE would remove
      // every row sharing its value), a nullable UNIQUE one (rows with NULL there could not be
      // updated or deleted): refused too.
      await expect(c.query('create table key_second(v text, id int primary key)')).rejects.toThrow(/key_second has no primary key on its first column \(v\)/);
      await expect(c.query('create table key_pair(a int, b int, primary key (a, b))')).rejects.toThrow(/key_pair has no primary key on its first column \(a\)/);
      await expect(c.query('create table key_nullable(id int unique, v int)')).rejects.toThrow(/key_nullable has no primary key on its first column/);
      const refused = await c.query('create table no_key(id int, v text)').catch((err: { code?: string; hint?: string }) => err);
      expect(refused).toMatchObject({ code: '42P16', hint: 'Make the first column the primary key: CREATE TABLE no_key (id bigint PRIMARY KEY, ...)' });
      await c.query('create table key_unique(id int not null unique, v int)');
      await c.query('insert into key_unique values (1, 10), (2, 20)');
      await c.query('update key_unique set v = 11 where id = 1');
      await c.query('delete from key_unique where id = 2');
      expect((await c.query('SELECT id, v FROM key_unique ORDER BY id')).rows).toEqual([{ id: 1, v: 11 }]);
      await c.query('drop table key_unique');
    } finally {
      await c.end();
    }
    for (const t of ['no_key', 'key_second', 'key_pair', 'key_nullable', 'key_unique']) await nothingAnywhere(t);
  }, 60_000);

  it('ALTER TABLE ADD, RENAME and DROP COLUMN and RENAME TO reach the shard and the other compute node', async () => {
    const [c1, c2] = s.comps();
    const one = await s.pgAs(c1);
    await one.query('create table altered(id int primary key, v text)');
    await one.query(`insert into altered values (1, 'one')`);
    await one.query('alter table altered add column w int');
    await one.query('alter table altered rename column v to label');
    await one.query('alter table altered drop column w');
    await one.query(`alter table altered add column note varchar(10) not null default 'n/a'`);
    await one.query('alter table altered rename to renamed');
    await expect(one.query('alter table renamed add column flag boolean')).rejects.toThrow(/has type boolean/);
    // ALTER COLUMN TYPE reaches the shard with the mapped type; an unmappable type, or data
    // the shard cannot convert, fails the statement and changes nothing.
    await one.query('alter table renamed alter column label type varchar(40)');
    await expect(one.query('alter table renamed alter column label type boolean')).rejects.toThrow(/column public\.renamed\.label has type boolean, which has no MariaDB form/);
    await expect(one.query('alter table renamed alter column label type bigint')).rejects.toThrow(/shard \d+ refused ALTER TABLE public\.renamed \(MODIFY COLUMN `label` BIGINT NULL\).*nothing was changed/);
    const labelType = await one.query(`SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute WHERE attrelid = 'renamed'::regclass AND attname = 'label'`);
    expect(labelType.rows).toEqual([{ t: 'character varying(40)' }]);
    await one.query(`insert into renamed (id, label) values (2, 'two')`);
    await one.end();
    expect(await s.shardTables('altered')).toEqual([[], []]);
    const holder = s.masters()[(await s.shardTables('renamed')).findIndex((t) => t.length === 1)];
    const m = await s.mysqlAs(holder);
    const [rows] = (await m.query('SELECT * FROM `postgres_$$_public`.renamed ORDER BY id')) as unknown as [unknown[]];
    expect(rows).toEqual([{ id: 1, label: 'one', note: 'n/a' }, { id: 2, label: 'two', note: 'n/a' }]);
    const [types] = (await m.query(`SELECT COLUMN_NAME AS c, COLUMN_TYPE AS t FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'postgres_$$_public' AND TABLE_NAME = 'renamed' ORDER BY ORDINAL_POSITION`)) as unknown as [unknown[]];
    expect(types).toEqual([{ c: 'id', t: 'int(11)' }, { c: 'label', t: 'varchar(40)' }, { c: 'note', t: 'varchar(10)' }]);
    await m.end();
    const seen = await waitUntil('renamed with its new columns on compute node 2', async () => {
      const two = await s.pgAs(c2);
      try {
        return (await two.query('SELECT id, label, note FROM renamed ORDER BY id')).rows;
      } finally {
        await two.end();
      }
    }, 5_000, 100);
    expect(seen).toEqual([{ id: 1, label: 'one', note: 'n/a' }, { id: 2, label: 'two', note: 'n/a' }]);
    const onTwo = await s.pgAs(c2);
    const retyped = await onTwo.query(`SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute WHERE attrelid = 'renamed'::regclass AND attname = 'label'`);
    await onTwo.end();
    expect(retyped.rows).toEqual([{ t: 'character varying(40)' }]);
    await waitUntil('altered gone from compute node 2', async () => ((await s.compRelations('altered')).flat().length === 0 ? true : undefined), 5_000, 100);
    const two = await s.pgAs(c2);
    await two.query('drop table renamed');
    await two.end();
    await nothingAnywhere('renamed');
  }, 60_000);

  it('a hash-partitioned table, 4 partitions over 2 shards: 10,000 rows through compute node 1 land 2 partitions per shard; count and sum through compute node 2 match; a partition-key query touches one shard; UPDATE, DELETE and ALTER TABLE through the parent reach the partitions', async () => {
    const [c1, c2] = s.comps();
    const one = await s.pgAs(c1);
    await one.query('create table hp(id int not null, v int not null) partition by hash (id)');
    for (let r = 0; r < 4; r++) await one.query(`create table hp_${r} partition of hp for values with (modulus 4, remainder ${r})`);
    const placement = await Promise.all([0, 1, 2, 3].map((r) => s.shardTables(`hp_${r}`)));
    // Each partition on exactly one shard, two on each (fewest tables first).
    expect(placement.map((onShards) => onShards.flat().length)).toEqual([1, 1, 1, 1]);
    expect([0, 1].map((i) => placement.filter((onShards) => onShards[i].length === 1).length)).toEqual([2, 2]);

    // mysql_fdw writes row by row, each an autocommit waiting for the shard's semi-sync
    // standby: eight sessions of compute node 1 share the 10,000 rows.
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 8 }, async (_, k) => {
        const c = await s.pgAs(c1);
        try {
          const inserted = await c.query('insert into hp select g, g % 100 from generate_series($1::int, $2::int) g', [k * 1250 + 1, (k + 1) * 1250]);
          // The command tag counts every row, as PostgreSQL's does (INSERT 0 1250).
          expect(inserted.rowCount).toBe(1250);
        } finally {
          await c.end();
        }
      }),
    );
    console.log(`10,000 rows through a partitioned table on compute node 1 (8 sessions): ${Date.now() - started} ms`);
    const expected = { n: 10_000, total: 495_000 };
    expect((await one.query('SELECT count(*)::int AS n, sum(v)::int AS total FROM hp')).rows[0]).toEqual(expected);

    // On the shards: each partition's rows on its own shard, 2 partitions each.
    const perShard = await Promise.all(
      s.masters().map(async (m, i) => {
        const c = await s.mysqlAs(m);
        try {
          let n = 0;
          for (const r of [0, 1, 2, 3].filter((r) => placement[r][i].length === 1)) {
            const [[row]] = (await c.query(`SELECT COUNT(*) AS n FROM \`postgres_$$_public\`.hp_${r}`)) as unknown as [{ n: number }[]];
            n += Number(row.n);
          }
          return n;
        } finally {
          await c.end();
        }
      }),
    );
    expect(perShard[0] + perShard[1]).toBe(10_000);
    expect(perShard.every((n) => n > 4_000)).toBe(true);

    const seen = await waitUntil('hp with its 4 partitions on compute node 2', async () => {
      const two = await s.pgAs(c2);
      try {
        const parts = await two.query(`SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = 'public.hp'::regclass`);
        if (parts.rows[0].n !== 4) return undefined;
        return (await two.query('SELECT count(*)::int AS n, sum(v)::int AS total FROM hp')).rows[0];
      } finally {
        await two.end();
      }
    }, 10_000, 200);
    expect(seen).toEqual(expected);

    // Partition pruning: a query with the key touches one partition, so one shard.
    const plan = (await one.query('EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM hp WHERE id = 42')).rows.map((r) => r['QUERY PLAN'] as string);
    console.log(`EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM hp WHERE id = 42:\n${plan.join('\n')}`);
    expect(plan.filter((l) => l.includes('Foreign Scan on public.hp_')).length).toBe(1);
    expect(plan.join('\n')).toMatch(/Remote query: SELECT .* WHERE \(\(`id` = 42\)\)/);
    const all = (await one.query('EXPLAIN (COSTS OFF) SELECT count(*) FROM hp')).rows.map((r) => r['QUERY PLAN'] as string);
    expect(all.filter((l) => l.includes('Foreign Scan')).length).toBe(4);
    // Aggregates over the parent are computed on the compute node from every partition's
    // rows, even with partitionwise aggregation (mysql_fdw pushes no partial aggregates).
    await one.query('SET enable_partitionwise_aggregate = on');
    const pushed = (await one.query('EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*), sum(v) FROM hp')).rows.map((r) => r['QUERY PLAN'] as string);
    console.log(`with enable_partitionwise_aggregate = on:\n${pushed.join('\n')}`);
    expect(pushed.filter((l) => /Remote query: SELECT `v` FROM `postgres_\$\$_public`\.`hp_\d`$/.test(l.trim())).length).toBe(4);
    expect((await one.query('SELECT count(*)::int AS n, sum(v)::int AS total FROM hp')).rows[0]).toEqual(expected);
    await one.query('RESET enable_partitionwise_aggregate');
    // A row routed through compute node 2 reaches the right partition there too.
    const two = await s.pgAs(c2);
    expect((await two.query('insert into hp values (10001, 1)')).rowCount).toBe(1);
    expect((await one.query('SELECT v FROM hp WHERE id = 10001')).rows).toEqual([{ v: 1 }]);
    // UPDATE and DELETE through the parent reach the partitions' shards, with PostgreSQL's counts.
    expect((await two.query('update hp set v = 500 where id = 10001')).rowCount).toBe(1);
    expect((await one.query('SELECT v FROM hp WHERE id = 10001')).rows).toEqual([{ v: 500 }]);
    expect((await one.query('update hp set v = v + 1 where id <= 100')).rowCount).toBe(100);
    expect((await two.query('SELECT sum(v)::int AS total FROM hp WHERE id <= 100')).rows[0]).toEqual({ total: 5_050 });
    expect((await one.query('delete from hp where id > 9900')).rowCount).toBe(101);
    expect((await two.query('SELECT count(*)::int AS n FROM hp')).rows[0]).toEqual({ n: 9_900 });
    // Moving a row to another partition is refused before anything is written.
    await expect(one.query('update hp set id = 20000 where id = 5')).rejects.toThrow(/partition key|row identifier column update is not supported/);
    expect((await one.query('SELECT count(*)::int AS n FROM hp WHERE id = 5')).rows[0]).toEqual({ n: 1 });
    // ALTER TABLE through the parent reaches every partition's shard table, and the other compute node's parent.
    await one.query('alter table hp add column note varchar(10)');
    const noted = await Promise.all([0, 1, 2, 3].map(async (r) => {
      const m = await s.mysqlAs(s.masters()[placement[r].findIndex((t) => t.length === 1)]);
      try {
        const [cols] = (await m.query(`SELECT COLUMN_TYPE AS t FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'postgres_$$_public' AND TABLE_NAME = ? AND COLUMN_NAME = 'note'`, [`hp_${r}`])) as unknown as [{ t: string }[]];
        return cols.map((c) => c.t);
      } finally {
        await m.end();
      }
    }));
    expect(noted).toEqual([['varchar(10)'], ['varchar(10)'], ['varchar(10)'], ['varchar(10)']]);
    await waitUntil('hp.note and its 4 partitions on compute node 2', async () => {
      const c = await s.pgAs(c2);
      try {
        const r = await c.query(`SELECT (SELECT count(*)::int FROM pg_inherits WHERE inhparent = 'public.hp'::regclass) AS parts, (SELECT count(*)::int FROM pg_attribute WHERE attrelid = 'public.hp'::regclass AND attname = 'note') AS note`);
        return r.rows[0].parts === 4 && r.rows[0].note === 1 ? true : undefined;
      } finally {
        await c.end();
      }
    }, 10_000, 200);
    expect((await two.query(`insert into hp (id, v, note) values (30001, 1, 'via two')`)).rowCount).toBe(1);
    expect((await one.query('SELECT note FROM hp WHERE id = 30001')).rows).toEqual([{ note: 'via two' }]);
    await one.end();

    await two.query('drop table hp');
    await two.end();
    for (const r of [0, 1, 2, 3]) expect(await s.shardTables(`hp_${r}`)).toEqual([[], []]);
    await waitUntil('hp gone from both compute nodes', async () => ((await s.compRelations('hp')).flat().length === 0 ? true : undefined), 10_000, 100).catch(async (err: Error) => {
      // What each node still has, and what the catalog sync said lately, to tell why.
      const said = s.f.logLines.filter((l) => l.includes('catalog')).slice(-15).join('');
      throw new Error(`${err.message}; relations named hp: ${JSON.stringify(await s.compRelations('hp'))}; catalog sync log: ${said}`);
    });
  }, 90_000);

  it('CREATE INDEX through one compute node is made on the shard table; DROP INDEX through the other removes it', async () => {
    const [c1, c2] = s.comps();
    const indexes = async () =>
      (
        await Promise.all(
          s.masters().map(async (m) => {
            const c = await s.mysqlAs(m);
            try {
              const [rows] = (await c.query(`SELECT DISTINCT INDEX_NAME AS i FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'postgres_$$_public' AND TABLE_NAME = 'indexed' ORDER BY 1`)) as unknown as [{ i: string }[]];
              return rows.map((r) => r.i);
            } finally {
              await c.end();
            }
          }),
        )
      ).flat();
    const one = await s.pgAs(c1);
    await one.query('create table indexed(id int primary key, v int, tag varchar(20))');
    await one.query('create index indexed_v on indexed (v)');
    await one.query('create unique index on indexed (tag)');
    await expect(one.query('create index indexed_v on indexed (tag)')).rejects.toThrow(/an index named indexed_v already exists/);
    expect(await indexes()).toEqual(['indexed_tag_idx', 'indexed_v', 'PRIMARY']);
    await one.end();
    await waitUntil('indexed on compute node 2', async () => ((await s.compRelations('indexed'))[1].length === 1 ? true : undefined), 5_000, 100);
    const two = await s.pgAs(c2);
    await two.query('drop index indexed_v');
    await expect(two.query('drop index indexed_v')).rejects.toThrow(/index "indexed_v" does not exist/);
    await two.query('drop index if exists indexed_v');
    expect(await indexes()).toEqual(['indexed_tag_idx', 'PRIMARY']);
    await two.query('drop table indexed');
    await two.end();
  }, 60_000);

  it('CREATE SCHEMA and CREATE DATABASE through one compute node reach the other, empty; DROP SCHEMA and DROP DATABASE remove them everywhere', async () => {
    const [c1, c2] = s.comps();
    const schemaOn = async (at: typeof c1, schema: string) => {
      const c = await s.pgAs(at);
      try {
        return (await c.query(`SELECT pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname = $1`, [schema])).rows;
      } finally {
        await c.end();
      }
    };
    const databasesOnShards = async (name: string) =>
      Promise.all(
        s.masters().map(async (m) => {
          const c = await s.mysqlAs(m);
          try {
            const [rows] = (await c.query('SELECT SCHEMA_NAME AS d FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?', [name])) as unknown as [{ d: string }[]];
            return rows.map((r) => r.d);
          } finally {
            await c.end();
          }
        }),
      );
    const one = await s.pgAs(c1);
    const started = Date.now();
    await one.query('create schema sales');
    const returned = Date.now();
    expect(await databasesOnShards('postgres_$$_sales')).toEqual([['postgres_$$_sales'], ['postgres_$$_sales']]);
    await waitUntil('schema sales on compute node 2', async () => ((await schemaOn(c2, 'sales')).length === 1 ? true : undefined), 10_000, 50);
    console.log(`CREATE SCHEMA took ${returned - started} ms; compute node 2 had it ${Date.now() - returned} ms after it returned`);
    expect(await schemaOn(c2, 'sales')).toEqual([{ owner: s.computeUser }]);
    // The name is the cluster's now: the other compute node cannot make it a second time.
    const two = await s.pgAs(c2);
    await expect(two.query('create schema sales')).rejects.toThrow(/schema "sales" already exists/);
    await two.query('create table sales.orders(id int primary key, total int)');
    await two.query('insert into sales.orders values (1, 10)');
    await waitUntil('sales.orders on compute node 1', async () => ((await s.compRelations('orders')).every((r) => r.join() === 'sales.orders f') ? true : undefined), 5_000, 50);
    await expect(one.query('drop schema sales')).rejects.toThrow(/cannot drop schema sales because other objects depend on it/);
    await one.query('drop schema sales cascade');
    expect(await databasesOnShards('postgres_$$_sales')).toEqual([[], []]);
    expect(await s.shardTables('orders')).toEqual([[], []]);
    await waitUntil('schema sales gone from compute node 2', async () => ((await schemaOn(c2, 'sales')).length === 0 ? true : undefined), 10_000, 50);
    // A refused CREATE SCHEMA (inside a transaction block) leaves nothing on any shard.
    await one.query('BEGIN');
    await expect(one.query('create schema in_tx')).rejects.toThrow(/CREATE SCHEMA cannot run inside a transaction block/);
    await one.query('ROLLBACK');
    expect(await databasesOnShards('postgres_$$_in_tx')).toEqual([[], []]);

    // CREATE DATABASE / DROP DATABASE: database D is D_$$_public on every shard, so the other compute node follows.
    const databaseOn = async (at: typeof c1) => {
      const c = await s.pgAs(at);
      try {
        return (await c.query(`SELECT count(*)::int AS n FROM pg_database WHERE datname = 'shop'`)).rows[0].n as number;
      } finally {
        await c.end();
      }
    };
    await one.query('create database shop');
    expect(await databasesOnShards('shop_$$_public')).toEqual([['shop_$$_public'], ['shop_$$_public']]);
    await waitUntil('database shop on compute node 2', async () => ((await databaseOn(c2)) === 1 ? true : undefined), 10_000, 100);
    await expect(two.query('create database shop')).rejects.toThrow(/database "shop" already exists/);
    await one.query('drop database shop');
    expect(await databasesOnShards('shop_$$_public')).toEqual([[], []]);
    await waitUntil('database shop gone from compute node 2', async () => ((await databaseOn(c2)) === 0 ? true : undefined), 10_000, 100);
    expect(await databaseOn(c1)).toBe(0);
    await one.end();
    await two.end();
  }, 60_000);
});
