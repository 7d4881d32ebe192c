// get_expand_table_list and repartition_tables on real engines (spec 4.5), on one
// 2-shard cluster with 2 compute nodes: the tables are made straight on the shard masters
// (catalog sync shows them on the compute nodes), the jobs go through the manager.

import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emit } from '../helpers/emit-client';
import { waitUntil } from './cluster-fixture';
import { MoveLoad, rowDifferences, type Row } from './move-load';
import { startSqlCluster, type Endpoint, type SqlCluster } from './sql-fixture';

const DB = 'postgres_$$_public';

describe('get_expand_table_list and repartition_tables (2 shards, real engines)', () => {
  let s: SqlCluster;
  let shard1: mysql.Connection;
  let shard2: mysql.Connection;
  let shardIds: string[];

  const sql = async (c: mysql.Connection, statement: string, values?: unknown[]) => (await c.query(statement, values))[0] as unknown as Record<string, unknown>[];
  const definition = async (c: mysql.Connection, table: string) => (await sql(c, `SHOW CREATE TABLE \`${DB}\`.\`${table}\``))[0]['Create Table'];
  const count = async (c: mysql.Connection, table: string) => Number((await sql(c, `SELECT COUNT(*) AS n FROM \`${DB}\`.\`${table}\``))[0].n);
  const checksum = async (c: mysql.Connection, table: string) => String((await sql(c, `CHECKSUM TABLE \`${DB}\`.\`${table}\``))[0].Checksum);
  const tablesNamed = async (c: mysql.Connection, like: string) =>
    (await sql(c, 'SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME LIKE ? ORDER BY 1', [DB, like])).map((r) => String(r.t));
  /** Where the last switch's blocked window went (the manager's "repartition switched names" log line). */
  const switchParts = () => s.f.logLines.flatMap((chunk) => chunk.split('\n')).filter((l) => l.includes('"repartition switched names"')).at(-1) ?? '';
  const repartition = (pairs: string, timeoutMs = 60_000) => {
    const id = s.cluster().id;
    return s.f.runJob('repartition_tables', { src_cluster_id: id, dst_cluster_id: id, repartition_tables: pairs }, timeoutMs);
  };

  beforeAll(async () => {
    s = await startSqlCluster();
    const masters = s.masters();
    shardIds = Object.keys(s.cluster().shards);
    [shard1, shard2] = await Promise.all(masters.map((m: Endpoint) => s.mysqlAs(m)));
    for (const c of [shard1, shard2]) await sql(c, `CREATE DATABASE IF NOT EXISTS \`${DB}\``);
  }, 300_000);

  afterAll(async () => {
    await Promise.all([shard1, shard2].map((c) => c?.end().catch(() => {})));
    await s?.close();
  }, 120_000);

  it('get_expand_table_list: top_size orders the shard master tables by data + index bytes, top_hit by the reads they got', async () => {
    for (const [table, rows] of [['exp_big', 20_000], ['exp_mid', 2_000], ['exp_small', 10]] as const) {
      await sql(shard1, `CREATE TABLE \`${DB}\`.${table} (id INT PRIMARY KEY, pad VARCHAR(200), KEY by_pad (pad))`);
      for (let from = 0; from < rows; from += 1000) {
        const batch = Array.from({ length: Math.min(1000, rows - from) }, (_, i) => [from + i, 'x'.repeat(150) + String(from + i)]);
        await sql(shard1, `INSERT INTO \`${DB}\`.${table} (id, pad) VALUES ?`, [batch]);
      }
      await sql(shard1, `ANALYZE TABLE \`${DB}\`.${table}`);
    }
    // Full scans of the middle table only: 30 x 2,000 rows read, more than exp_big's 20,000 inserted rows.
    for (let i = 0; i < 30; i++) await sql(shard1, `SELECT COUNT(*) FROM \`${DB}\`.exp_mid WHERE pad LIKE ?`, [`%${i}`]);
    const ask = async (policy: string) => {
      const reply = await emit(s.f.member, 'get_expand_table_list', { cluster_id: s.cluster().id, shard_id: shardIds[0], policy });
      const list = String((reply.attachment as { table_list: string }).table_list).split(',');
      return list.filter((t) => /^postgres\.public\.exp_/.test(t));
    };
    expect(await ask('top_size')).toEqual(['postgres.public.exp_big', 'postgres.public.exp_mid', 'postgres.public.exp_small']);
    expect(await ask('top_hit')).toEqual(['postgres.public.exp_mid', 'postgres.public.exp_big', 'postgres.public.exp_small']);
    const bad = await emit(s.f.member, 'get_expand_table_list', { cluster_id: s.cluster().id, shard_id: '999', policy: 'top_size' }).then(() => undefined, (e: Error) => e.message);
    expect(bad).toMatch(/paras\.shard_id/);
  }, 60_000);

  it('a refused repartition names the rule, table and column and changes nothing: a source NULL for a NOT NULL target (rule 4), a narrower type (rule 5)', async () => {
    await sql(shard1, `CREATE TABLE \`${DB}\`.rp_src (id INT PRIMARY KEY, v INT NULL, name VARCHAR(20))`);
    await sql(shard1, `INSERT INTO \`${DB}\`.rp_src VALUES (1, 10, 'a'), (2, NULL, 'b'), (3, 30, 'c')`);
    await sql(shard2, `CREATE TABLE \`${DB}\`.rp_dst_notnull (id BIGINT PRIMARY KEY, v INT NOT NULL, name VARCHAR(20))`);
    await sql(shard2, `CREATE TABLE \`${DB}\`.rp_dst_narrow (id INT PRIMARY KEY, v INT, name VARCHAR(5))`);
    const before = { src: await checksum(shard1, 'rp_src'), notnull: await definition(shard2, 'rp_dst_notnull'), narrow: await definition(shard2, 'rp_dst_narrow') };

    const rule4 = await repartition(`postgres_$$_public.rp_src=>postgres_$$_public.rp_dst_notnull`);
    expect(rule4.status).toBe('failed');
    expect(rule4.error_info).toMatch(/rule 4: column v: 1 rows of postgres_\$\$_public\.rp_src hold NULL, target postgres_\$\$_public\.rp_dst_notnull\.v is NOT NULL/);
    const rule5 = await repartition(`postgres_$$_public.rp_src=>postgres_$$_public.rp_dst_narrow`);
    expect(rule5.error_info).toMatch(/rule 5: column name, postgres_\$\$_public\.rp_src -> postgres_\$\$_public\.rp_dst_narrow: varchar\(5\) is narrower than varchar\(20\)/);

    expect(await checksum(shard1, 'rp_src')).toBe(before.src);
    expect(await definition(shard2, 'rp_dst_notnull')).toBe(before.notnull);
    expect(await definition(shard2, 'rp_dst_narrow')).toBe(before.narrow);
    expect([await count(shard2, 'rp_dst_notnull'), await count(shard2, 'rp_dst_narrow')]).toEqual([0, 0]);
    expect(await tablesNamed(shard1, 'rp\\_src%')).toEqual(['rp_src']);
  }, 60_000);

  // Skipped on this branch: the cut-over hold of the merged move engine (wave3/moves b49163a +
  // 8c198fd's hold) fails here with 'ALTER TABLE cannot run inside a transaction block'; the
  // copy, catch-up and verify steps pass. Un-skip once wave3/moves' later hold fix is merged.
  it('repartition copies into the pre-created target on the other shard, then the names switch: the compute nodes read the new table under the old name', async () => {
    await sql(shard1, `CREATE TABLE \`${DB}\`.rp_orders (id INT PRIMARY KEY, qty INT, note VARCHAR(20))`);
    await sql(shard1, `INSERT INTO \`${DB}\`.rp_orders VALUES ?`, [Array.from({ length: 3000 }, (_, i) => [i + 1, i % 7, `n${i}`])]);
    await sql(shard2, `CREATE TABLE \`${DB}\`.rp_orders_new (id BIGINT PRIMARY KEY, note VARCHAR(40), qty BIGINT, extra INT NOT NULL DEFAULT 7)`);
    const comp = s.comps()[0];
    await waitUntil('the compute node sees rp_orders', async () => ((await s.compRelations('rp_orders'))[0].length > 0 ? true : undefined), 20_000);
    // Rows written through a compute node before the job are copied like the rest.
    const pg = await s.pgAs(comp);
    const acknowledged: number[] = [];
    for (let id = 100_001; id <= 100_050; id++) {
      await pg.query('INSERT INTO public.rp_orders (id, qty, note) VALUES ($1, 1, $2)', [id, 'live']);
      acknowledged.push(id);
    }
    const reply = await repartition(`postgres_$$_public.rp_orders=>postgres_$$_public.rp_orders_new`, 90_000);
    expect(reply.error_info ?? '').toBe('');
    expect(reply.status).toBe('done');
    const result = reply.attachment as unknown as { blocked_ms_max: string; list_table: { table: string; old_table: string; rows_copied: string; blocked_ms: string }[] };
    expect(result.list_table[0]).toMatchObject({ table: 'postgres_$$_public.rp_orders', old_table: expect.stringMatching(/^postgres_\$\$_public\.rp_orders__repart_/) });
    expect(Number(result.blocked_ms_max)).toBeGreaterThanOrEqual(0);

    // The names switched: shard 2 holds rp_orders in the target's shape, rp_orders_new is gone, shard 1 kept the old table aside.
    expect(await tablesNamed(shard2, 'rp\\_orders%')).toEqual(['rp_orders']);
    expect(await definition(shard2, 'rp_orders')).toMatch(/`extra` int\(11\) NOT NULL DEFAULT 7/);
    expect(await tablesNamed(shard1, 'rp\\_orders%')).toEqual([result.list_table[0].old_table.split('.')[1]]);
    // Every acknowledged write is in the new table.
    const ids = new Set((await sql(shard2, `SELECT id FROM \`${DB}\`.rp_orders WHERE id > 100000`)).map((r) => Number(r.id)));
    expect(acknowledged.filter((id) => !ids.has(id))).toEqual([]);
    expect(await count(shard2, 'rp_orders')).toBe(3000 + ids.size);
    // Both compute nodes read the table at its new place under its old name, new column included.
    for (const at of s.comps()) {
      const c = await s.pgAs(at);
      try {
        const row = await waitUntil('the compute node reads the new rp_orders', async () => {
          const r = await c.query('SELECT count(*)::int AS n, min(extra) AS extra FROM public.rp_orders').catch(() => undefined);
          return r && r.rows[0].n === 3000 + ids.size && r.rows[0].extra === 7 ? r.rows[0] : undefined;
        }, 20_000);
        expect(row).toMatchObject({ n: 3000 + ids.size, extra: 7 });
      } finally {
        await c.end();
      }
    }
    // Writes through the compute node go to the new table under the old name.
    await waitUntil('an insert through the compute node is acknowledged', async () => pg.query('INSERT INTO public.rp_orders (id, qty, note) VALUES (200001, 2, $1)', ['after']).then(() => true, () => undefined), 20_000);
    expect(await sql(shard2, `SELECT qty, extra FROM \`${DB}\`.rp_orders WHERE id = 200001`)).toEqual([{ qty: 2, extra: 7 }]);
    await pg.end();
    console.log(`repartition: ${result.list_table[0].rows_copied} rows copied, blocked ${result.blocked_ms_max} ms; ${switchParts()}`);
  }, 120_000);

  it('repartition under a concurrent insert/update/delete writer through the compute node: verify agrees and every acknowledged write is in the new table', async () => {
    const SEEDED = 20_000;
    await sql(shard1, `CREATE TABLE \`${DB}\`.rp_live (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40) CHARACTER SET latin1)`);
    await sql(shard1, `INSERT INTO \`${DB}\`.rp_live SELECT seq, seq, CONCAT('n', seq) FROM \`${DB}\`.seq_1_to_${SEEDED}`);
    // Another column order, wider types and a character set that contains the source's
    // (utf8mb4 holds latin1), as a user's pre-created target may have (rules 5, 6); the
    // writer's notes are not ASCII, so the two sets store them as different bytes.
    await sql(shard2, `CREATE TABLE \`${DB}\`.rp_live_new (id BIGINT PRIMARY KEY, note VARCHAR(60) CHARACTER SET utf8mb4, v BIGINT NOT NULL)`);
    await waitUntil('the compute node sees rp_live', async () => ((await s.compRelations('rp_live'))[0].length > 0 ? true : undefined), 20_000);
    const comp = s.comps()[0];
    const load = new MoveLoad({ host: comp.host, port: comp.port, user: s.computeUser, password: s.computePassword, database: 'postgres' }, 'public.rp_live', SEEDED, 2, (note) => `${note}-grüße`);
    load.start();
    try {
      await waitUntil('the writer is acknowledged', async () => (load.writes >= 20 ? true : undefined), 20_000);
      const reply = await repartition(`postgres_$$_public.rp_live=>postgres_$$_public.rp_live_new`, 90_000);
      expect(reply.error_info ?? '').toBe('');
      expect(reply.status).toBe('done');
      const writesDuringJob = load.writes;
      // The writer goes on against the new table under the old name.
      const at = load.writes;
      await waitUntil('writes are acknowledged after the switch', async () => (load.writes >= at + 20 ? true : undefined), 20_000);
      console.log(`repartition under writes: ${writesDuringJob} writes acknowledged by the end of the job, result ${JSON.stringify(reply.attachment)}; ${switchParts()}`);
    } finally {
      await load.stop();
    }
    // Read as the clients see it, through the compute node: now shard 2's table under the old name.
    const pg = await s.pgAs(comp);
    const seen = await pg.query('SELECT id, v, note FROM public.rp_live').finally(() => pg.end());
    const rows = new Map(seen.rows.map((r: { id: number; v: number; note: string }) => [Number(r.id), { v: Number(r.v), note: r.note } as Row]));
    expect(rowDifferences(load, rows)).toEqual([]);
    expect(await count(shard2, 'rp_live')).toBe(rows.size);
    expect(load.writes).toBeGreaterThan(40);
  }, 120_000);

  it('rule 8: an import the target refuses (a foreign key the rules do not cover) fails the job and leaves the pre-created target as it was', async () => {
    await sql(shard2, `CREATE TABLE \`${DB}\`.rp_parent (id INT PRIMARY KEY)`);
    await sql(shard2, `CREATE TABLE \`${DB}\`.rp_fk_dst (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES \`${DB}\`.rp_parent (id))`);
    await sql(shard1, `CREATE TABLE \`${DB}\`.rp_fk_src (id INT PRIMARY KEY, pid INT)`);
    await sql(shard1, `INSERT INTO \`${DB}\`.rp_fk_src VALUES (1, 1), (2, 1)`);
    const before = { src: await checksum(shard1, 'rp_fk_src'), dst: await definition(shard2, 'rp_fk_dst') };
    const reply = await repartition(`postgres_$$_public.rp_fk_src=>postgres_$$_public.rp_fk_dst`);
    expect(reply.status).toBe('failed');
    expect(reply.error_info).toMatch(/foreign key/i);
    expect(await count(shard2, 'rp_fk_dst')).toBe(0);
    expect(await definition(shard2, 'rp_fk_dst')).toBe(before.dst);
    expect(await checksum(shard1, 'rp_fk_src')).toBe(before.src);
    expect(await tablesNamed(shard1, 'rp\\_fk\\_src%')).toEqual(['rp_fk_src']);
  }, 60_000);
});
