// expand_cluster on the issue-36 workload, real engines (2 shards x 3 nodes, 2 compute
// nodes): `transfer_account` partitioned by range over the two shards, money transfers
// running through both compute nodes.
// - One job moves a range partition, two hash partitions of another parent (`hash_account`)
//   and an ordinary table while transfers run: both compute
//   nodes then read the partition from the destination shard under its parent, every
//   account's balance is what the committed transfers made it (nothing lost or doubled),
//   and the partition's rows on the destination equal what both compute nodes read.
// - A job naming a table that cannot be moved is refused in its first step, before any
//   target is made.
// - A failure of the second of three tables at its cut-over leaves the first moved (its
//   source retired, not left under its live name), names what moved and what did not, and
//   a retry of the other two finishes.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from './cluster-fixture';
import { startSqlCluster, type SqlCluster } from './sql-fixture';
import { pinTable, rowsOnMaster } from './transactions-fixture';
import { contentOf, createTransferAccount, partitionFigures, TransferLoad, wrongBalances } from './transfer-account';
import { emit, waitForJobEnd } from '../helpers/emit-client';
import type { JobRecord } from '@kcm/manager';

const ACCOUNTS = 2_000;
const DB = 'postgres_$$_public';

describe('expand_cluster moves partitions and tables, checked first, never half-done in silence', () => {
  let s: SqlCluster;
  let shard1 = '';
  let shard2 = '';
  const expand = (tables: string[], timeoutMs = 240_000) =>
    s.f.runJob('expand_cluster', { cluster_id: s.cluster().id, src_shard_id: shard1, dst_shard_id: shard2, table_list: tables.map((t) => `postgres.public.${t}`), drop_old_table: '0' }, timeoutMs);
  /** The compute nodes' foreign server for `table`, one per node. */
  const serversOf = async (table: string) =>
    Promise.all(
      s.comps().map(async (at) => {
        const c = await s.pgAs(at);
        try {
          const { rows } = await c.query<{ srv: string }>(`SELECT srv.srvname AS srv FROM pg_foreign_table ft JOIN pg_foreign_server srv ON srv.oid = ft.ftserver WHERE ft.ftrelid = to_regclass($1)`, [table]);
          return rows[0]?.srv ?? '';
        } finally {
          await c.end();
        }
      }),
    );
  const onShard = (shardId: string, sql: string) => rowsOnMaster<Record<string, unknown>>(s, shardId === shard1 ? 0 : 1, sql);
  const tablesOn = async (shardId: string, like: string) =>
    (await onShard(shardId, `SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${DB}' AND TABLE_NAME LIKE '${like}' ORDER BY 1`)).map((r) => r.t as string);
  /** A table through the first compute node, on shard `shardId`, with `rows` rows; waits until every compute node has it. */
  const ordinaryTable = async (name: string, shardId: string, rows: number) => {
    const c = await s.pgAs(s.comps()[0]);
    try {
      await pinTable(c, shardId, `CREATE TABLE ${name} (id int PRIMARY KEY, v int NOT NULL, note varchar(40))`);
      await c.query(`INSERT INTO ${name} SELECT g, g, 'n' || g FROM generate_series(1, ${rows}) g`);
    } finally {
      await c.end();
    }
    await waitUntil(`${name} on every compute node`, async () => ((await serversOf(name)).every((srv) => srv === `shard_${shardId}`) ? true : undefined), 30_000);
  };

  beforeAll(async () => {
    s = await startSqlCluster();
    [shard1, shard2] = Object.keys(s.cluster().shards).sort((a, b) => Number(a) - Number(b));
    await createTransferAccount(s, { by: 'range', partitions: 4, accounts: ACCOUNTS, shards: [shard1, shard2, shard1, shard2] });
    await createTransferAccount(s, { by: 'hash', table: 'hash_account', partitions: 4, accounts: ACCOUNTS, shards: [shard1, shard2, shard1, shard2] });
  }, 600_000);
  afterAll(async () => {
    await s?.close();
  });

  it('moves a range partition, two hash partitions of one parent and a table in one job while transfers run; nothing is lost and the parents follow', async () => {
    await ordinaryTable('student', shard1, 5_000);
    const hashBefore = contentOf(await partitionFigures(s, s.comps()[0], 'hash_account'));
    const load = new TransferLoad(s, { clients: 4, accounts: ACCOUNTS }).start();
    try {
      await load.committedMore(100);
      const reply = await expand(['transfer_account_01', 'hash_account_01', 'hash_account_03', 'student']);
      expect(reply.error_info ?? '').toBe('');
      expect(reply.status).toBe('done');
      const moved = (reply.attachment as { list_table: { table: string; blocked_ms: string; cut_over_ms: string; copy_started_at: string; copy_ended_at: string }[] }).list_table;
      console.log(`expand of partitions under transfers: ${moved.map((t) => `${t.table} blocked ${t.blocked_ms} ms (cut-over ${t.cut_over_ms} ms)`).join('; ')}`);
      // The tables were copied at once: every copy began before any ended.
      const spans = moved.map((t) => ({ from: Number(t.copy_started_at), to: Number(t.copy_ended_at) }));
      expect(Math.max(...spans.map((x) => x.from))).toBeLessThan(Math.min(...spans.map((x) => x.to)));
      await load.committedMore(100); // transfers go on through the moved partition
    } finally {
      await load.stop();
    }
    expect(await serversOf('transfer_account_01')).toEqual([`shard_${shard2}`, `shard_${shard2}`]);
    expect(await serversOf('student')).toEqual([`shard_${shard2}`, `shard_${shard2}`]);
    // The source copies are renamed aside (and the partition's no longer claims the parent).
    expect(await tablesOn(shard1, 'transfer_account_01%')).toEqual([expect.stringMatching(/^transfer_account_01__moved_/)]);
    const aside = (await onShard(shard1, `SELECT TABLE_COMMENT AS c FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${DB}' AND TABLE_NAME LIKE 'transfer\\_account\\_01\\_\\_moved%'`))[0];
    expect(aside.c).toBe('');
    expect(await tablesOn(shard2, 'transfer_account_01%')).toEqual(['transfer_account_01']);

    expect(load.unknown).toBe(0);
    for (const at of s.comps()) expect(await wrongBalances(s, at, load, ACCOUNTS)).toEqual([]);
    // Both compute nodes agree on every partition, and the moved one holds exactly its range.
    const [a, b] = await Promise.all(s.comps().map((at) => partitionFigures(s, at)));
    expect(b).toEqual(a);
    expect(a.get('transfer_account_01')).toMatchObject({ server: `shard_${shard2}`, rows: 500 });
    const onTarget = await onShard(shard2, `SELECT COUNT(*) AS n, MIN(id) AS lo, MAX(id) AS hi, SUM(balance) AS sum FROM \`${DB}\`.transfer_account_01`);
    expect(onTarget[0]).toMatchObject({ n: 500, lo: 1, hi: 500 });
    expect(Number(onTarget[0].sum)).toBe(a.get('transfer_account_01')!.balance);
    expect((await onShard(shard2, `SELECT COUNT(*) AS n FROM \`${DB}\`.student`))[0].n).toBe(5_000);

    // Two hash partitions of one parent moved in the same job: each on the destination, every
    // partition's rows and checksum as before (nothing writes hash_account meanwhile).
    for (const t of ['hash_account_01', 'hash_account_03']) expect(await serversOf(t)).toEqual([`shard_${shard2}`, `shard_${shard2}`]);
    for (const at of s.comps()) expect(contentOf(await partitionFigures(s, at, 'hash_account'))).toEqual(hashBefore);
    expect(await tablesOn(shard1, 'hash\\_account\\_0%')).toEqual([expect.stringMatching(/^hash_account_01__moved_/), expect.stringMatching(/^hash_account_03__moved_/)]);

    // INSERT through the parent routes into the moved partition on its new shard.
    const c = await s.pgAs(s.comps()[1]);
    try {
      await c.query(`DELETE FROM transfer_account WHERE id = 7`);
      await c.query(`INSERT INTO transfer_account VALUES (7, 1000, 'again')`);
      await c.query(`INSERT INTO hash_account SELECT g, 0, 'new' FROM generate_series(${ACCOUNTS + 1}, ${ACCOUNTS + 100}) g`);
      const { rows } = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM hash_account WHERE note = 'new'`);
      expect(rows[0].n).toBe(100);
    } finally {
      await c.end();
    }
    expect((await onShard(shard2, `SELECT note FROM \`${DB}\`.transfer_account_01 WHERE id = 7`))[0].note).toBe('again');
    const newRows = await onShard(shard2, `SELECT (SELECT COUNT(*) FROM \`${DB}\`.hash_account_01 WHERE note = 'new') + (SELECT COUNT(*) FROM \`${DB}\`.hash_account_03 WHERE note = 'new') AS n`);
    expect(Number(newRows[0].n)).toBeGreaterThan(0); // some of the 100 hash into the moved partitions
  }, 600_000);

  it('refuses a job naming a table that cannot be moved before any table moves', async () => {
    await ordinaryTable('ss', shard1, 1_000);
    await ordinaryTable('test1', shard1, 1_000);
    await onShard(shard1, `CREATE TABLE \`${DB}\`.nokey (id INT NOT NULL, v INT) ENGINE=InnoDB`);
    const reply = await expand(['ss', 'nokey', 'test1', 'nosuch']);
    expect(reply.status).toBe('failed');
    expect(reply.error_info).toMatch(/2 of 4 table\(s\) cannot be moved, so none was/);
    expect(reply.error_info).toMatch(/postgres\.public\.nokey: it has no primary key/);
    expect(reply.error_info).toMatch(/postgres\.public\.nosuch: it does not exist on shard/);
    expect(reply.error_info).not.toMatch(/public\.ss:|public\.test1:/);
    expect(await tablesOn(shard2, 'ss')).toEqual([]);
    expect(await tablesOn(shard2, 'test1')).toEqual([]);
    expect(await serversOf('ss')).toEqual([`shard_${shard1}`, `shard_${shard1}`]);
  }, 300_000);

  it('a failure of the second of three tables leaves the first moved and named, and a retry of the rest finishes', async () => {
    for (const t of ['m1', 'm2', 'm3']) await ordinaryTable(t, shard1, 50_000);
    const ack = await emit(s.f.member, 'expand_cluster', { cluster_id: s.cluster().id, src_shard_id: shard1, dst_shard_id: shard2, table_list: ['m1', 'm2', 'm3'].map((t) => `postgres.public.${t}`), drop_old_table: '0' });
    const job = () => s.f.manager.store.state().jobs[ack.job_id] as JobRecord | undefined;
    // Once the pre-check passed: a view on m2 on the second compute node makes m2's re-point
    // there fail (PostgreSQL will not drop a foreign table a view depends on).
    await waitUntil('the pre-check passed', async () => (job()?.stepOutputs['0'] !== undefined ? true : undefined), 60_000);
    const c = await s.pgAs(s.comps()[1]);
    try {
      await c.query('CREATE VIEW m2_view AS SELECT id FROM m2');
    } finally {
      await c.end();
    }
    const reply = await waitForJobEnd([s.f.member], ack.job_id, 300_000);
    expect(reply.status).toBe('failed');
    expect(reply.error_info).toMatch(/table postgres\.public\.m2 \(done for postgres\.public\.m1\)/);
    expect(reply.error_info).toMatch(/moved to shard \d+: postgres\.public\.m1 \(source renamed to postgres_\$\$_public\.m1__moved_/);
    expect(reply.error_info).toMatch(/not moved, still on shard \d+: postgres\.public\.m2, postgres\.public\.m3/);
    expect(await serversOf('m1')).toEqual([`shard_${shard2}`, `shard_${shard2}`]);
    expect(await serversOf('m2')).toEqual([`shard_${shard1}`, `shard_${shard1}`]);
    // No live-named leftovers: m1's source is aside, m2's and m3's targets are gone.
    expect(await tablesOn(shard1, 'm1%')).toEqual([expect.stringMatching(/^m1__moved_/)]);
    expect(await tablesOn(shard2, 'm2')).toEqual([]);
    expect(await tablesOn(shard2, 'm3')).toEqual([]);

    const drop = await s.pgAs(s.comps()[1]);
    try {
      await drop.query('DROP VIEW m2_view');
    } finally {
      await drop.end();
    }
    const retry = await expand(['m2', 'm3']);
    expect(retry.error_info ?? '').toBe('');
    expect(retry.status).toBe('done');
    for (const t of ['m1', 'm2', 'm3']) {
      expect(await serversOf(t)).toEqual([`shard_${shard2}`, `shard_${shard2}`]);
      expect((await onShard(shard2, `SELECT COUNT(*) AS n, SUM(v) AS sum FROM \`${DB}\`.${t}`))[0]).toMatchObject({ n: 50_000 });
    }
  }, 600_000);

  it('a long reader of the parent makes a partition\'s hold give up its lock wait and try again, instead of blocking the table', async () => {
    const reader = await s.pgAs(s.comps()[0]);
    await reader.query('BEGIN');
    await reader.query('SELECT count(*) FROM transfer_account');
    let job: Promise<Awaited<ReturnType<typeof expand>>> | null = null;
    try {
      const logged = s.f.logLines.length;
      job = expand(['transfer_account_03']);
      await waitUntil('a cut-over attempt gave up its lock wait', async () => (s.f.logLines.slice(logged).some((l) => l.includes('cut-over attempt failed') && l.includes('lock timeout')) ? true : undefined), 120_000);
      // Meanwhile the other compute node's writers are not held for the reader's whole transaction.
      const other = await s.pgAs(s.comps()[1]);
      try {
        await other.query(`UPDATE transfer_account SET note = 'during' WHERE id = 1001`);
      } finally {
        await other.end();
      }
    } finally {
      await reader.query('COMMIT');
      await reader.end();
    }
    const reply = await job!;
    expect(reply.error_info ?? '').toBe('');
    expect(reply.status).toBe('done');
    expect(await serversOf('transfer_account_03')).toEqual([`shard_${shard2}`, `shard_${shard2}`]);
  }, 300_000);
});
