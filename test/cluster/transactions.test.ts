// Transactions through compute nodes, on real engines (README "Transactions through compute
// nodes", DESIGN.md section 12): a 2-shard x 3-node, 2-compute-node cluster; every statement
// goes through a compute node with the compute account, and what the shards hold is read on
// the shard masters themselves.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from './cluster-fixture';
import { startSqlCluster, type SqlCluster } from './sql-fixture';
import { balances, compSessionWithFault, createAccounts, holdCommitGate, moneyOnShards, pinTable, rowLockIsFree, rowsOnMaster, transfer } from './transactions-fixture';

const ACCOUNTS = 4;
const START = 1000;

describe('transactions through compute nodes (2 shards, 2 compute nodes)', () => {
  let s: SqlCluster;
  let shardIds: string[];

  beforeAll(async () => {
    s = await startSqlCluster();
    shardIds = Object.keys(s.cluster().shards);
    const c = await s.pgAs(s.comps()[0]);
    try {
      await pinTable(c, shardIds[0], 'create table counter(id int primary key, v int not null)');
      await c.query('insert into counter values (1, 0)');
      // One account table per shard: every transfer between them is a cross-shard transaction.
      await createAccounts(c, shardIds, ACCOUNTS, START);
      // A table on shard 1 that the move test moves to shard 2.
      await pinTable(c, shardIds[0], 'create table mv(id int primary key, v int not null)');
      await c.query('insert into mv select g, g from generate_series(1, 100) g');
      // A range-partitioned table whose low partition is on shard 1 and high one on shard 2;
      // the low one was made first, so kcm's routing rule fills it first.
      await c.query('create table rp(id int not null, v int not null) partition by range (id)');
      await pinTable(c, shardIds[0], 'create table rp_lo partition of rp for values from (minvalue) to (500)');
      await pinTable(c, shardIds[1], 'create table rp_hi partition of rp for values from (500) to (maxvalue)');
    } finally {
      await c.end();
    }
    for (const at of s.comps()) {
      await waitUntil(`the test tables on ${at.host}:${at.port}`, async () => {
        const c = await s.pgAs(at);
        try {
          const { rows } = await c.query(`SELECT count(*)::int AS n FROM pg_class WHERE relname IN ('counter', 'acct_a', 'acct_b', 'rp_lo', 'rp_hi', 'mv')`);
          return rows[0].n === 6 ? true : undefined;
        } finally {
          await c.end();
        }
      }, 15_000);
    }
  }, 300_000);

  afterAll(async () => {
    await s?.close();
  }, 120_000);

  const sessions = async (n: number) => Promise.all(Array.from({ length: n }, (_, i) => s.pgAs(s.comps()[i % 2])));
  const counterOnShard = async () => Number((await rowsOnMaster<{ v: number }>(s, 0, 'SELECT v FROM `postgres_$$_public`.counter WHERE id = 1'))[0].v);

  it('4 sessions over 2 compute nodes each running `v = v + 1` 500 times lose no update, in autocommit and in explicit transactions', async () => {
    const clients = await sessions(4);
    try {
      await Promise.all(clients.map(async (c) => {
        for (let i = 0; i < 500; i++) await c.query('update counter set v = v + 1 where id = 1');
      }));
      expect(await counterOnShard()).toBe(2000);
      await Promise.all(clients.map(async (c) => {
        for (let i = 0; i < 500; i++) {
          await c.query('BEGIN');
          await c.query('update counter set v = v + 1 where id = 1');
          await c.query('COMMIT');
        }
      }));
      expect(await counterOnShard()).toBe(4000);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  }, 240_000);

  it('4 sessions over 2 compute nodes each making 500 cross-shard transfers keep the total exact and every balance as the committed transfers say', async () => {
    const before = await balances(s);
    const clients = await sessions(4);
    const expected = new Map(before);
    let committed = 0;
    try {
      await Promise.all(clients.map(async (c, k) => {
        for (let i = 0; i < 500; i++) {
          const from = 1 + ((i + k) % ACCOUNTS);
          const to = 1 + ((i * 3 + k) % ACCOUNTS);
          // Every transfer locks acct_a's row before acct_b's: no deadlock, so none should fail.
          await transfer(c, from, to, 50);
          expected.set(`a${from}`, expected.get(`a${from}`)! - 50);
          expected.set(`b${to}`, expected.get(`b${to}`)! + 50);
          committed++;
        }
      }));
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
    expect(committed).toBe(2000);
    const after = await balances(s);
    expect(after).toEqual(expected);
    expect([...after.values()].reduce((a, b) => a + b, 0)).toBe([...before.values()].reduce((a, b) => a + b, 0));
    expect(await moneyOnShards(s)).toBe(2 * ACCOUNTS * START);
  }, 240_000);

  it('ROLLBACK undoes writes on one shard and on two; an error then ROLLBACK leaves nothing; a transaction reads its own writes', async () => {
    const c = await s.pgAs(s.comps()[0]);
    const before = await balances(s);
    try {
      await c.query('BEGIN');
      await c.query('update acct_a set money = money - 7 where id = 1');
      expect((await c.query('select money from acct_a where id = 1')).rows[0].money).toBe(String(before.get('a1')! - 7));
      await c.query('ROLLBACK');
      expect(await balances(s)).toEqual(before);

      await c.query('BEGIN');
      await c.query('update acct_a set money = money - 7 where id = 1');
      await c.query('update acct_b set money = money + 7 where id = 1');
      await c.query('ROLLBACK');
      expect(await balances(s)).toEqual(before);

      await c.query('BEGIN');
      await c.query('update acct_b set money = money + 7 where id = 2');
      await c.query('insert into acct_a values (900, 1)');
      await expect(c.query('insert into acct_a values (900, 1)')).rejects.toThrow(/Duplicate entry '900'/);
      await c.query('ROLLBACK');
      expect(await balances(s)).toEqual(before);
    } finally {
      await c.end();
    }
  }, 60_000);

  it('a client that disconnects mid-transaction, idle or inside a statement, leaves nothing and holds no lock', async () => {
    const before = await balances(s);
    for (const inside of [false, true]) {
      const c = await s.pgAs(s.comps()[1]);
      await c.query('BEGIN');
      await c.query('update acct_a set money = money - 9 where id = 3');
      await c.query('update acct_b set money = money + 9 where id = 3');
      if (inside) void c.query('select pg_sleep(60)').catch(() => {});
      (c as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
      // The compute node notices within client_connection_check_interval (1 s) and rolls back.
      await waitUntil(`the rows of a transaction whose client went away (${inside ? 'inside a statement' : 'idle'}) unlocked`, async () => ((await rowLockIsFree(s, 0, 'acct_a', 3)) && (await rowLockIsFree(s, 1, 'acct_b', 3)) ? true : undefined), 15_000);
      expect(await balances(s)).toEqual(before);
    }
  }, 60_000);

  it('ROLLBACK TO SAVEPOINT undoes only what followed it, on both shards, as does a PL/pgSQL exception block', async () => {
    const c = await s.pgAs(s.comps()[0]);
    const before = await balances(s);
    try {
      await c.query('BEGIN');
      await c.query('update acct_a set money = money - 1 where id = 4');
      await c.query('SAVEPOINT one');
      await c.query('update acct_b set money = money + 100 where id = 4');
      await c.query('update acct_a set money = money - 100 where id = 4');
      await c.query('ROLLBACK TO SAVEPOINT one');
      await c.query('update acct_b set money = money + 1 where id = 4');
      await c.query('RELEASE SAVEPOINT one');
      await c.query('COMMIT');
      const after = await balances(s);
      expect(after.get('a4')).toBe(before.get('a4')! - 1);
      expect(after.get('b4')).toBe(before.get('b4')! + 1);

      await c.query(`DO $$ BEGIN
        UPDATE acct_a SET money = money - 5 WHERE id = 4;
        BEGIN
          UPDATE acct_b SET money = money + 500 WHERE id = 4;
          INSERT INTO acct_a VALUES (4, 0);
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
        UPDATE acct_b SET money = money + 5 WHERE id = 4;
      END $$`);
      const last = await balances(s);
      expect(last.get('a4')).toBe(after.get('a4')! - 5);
      expect(last.get('b4')).toBe(after.get('b4')! + 5);
    } finally {
      await c.end();
    }
  }, 60_000);

  it('an INSERT ... SELECT into a partitioned parent that fails half-way, after writing on both shards, leaves nothing, in autocommit and in a transaction', async () => {
    const c = await s.pgAs(s.comps()[0]);
    const insertedOn = async (i: number) => Number((await rowsOnMaster<{ Value: string }>(s, i, "SHOW GLOBAL STATUS LIKE 'Handler_write'"))[0].Value);
    try {
      await c.query('insert into rp values (999, -1)');
      for (const inTransaction of [false, true]) {
        const low = await insertedOn(0);
        const high = await insertedOn(1);
        if (inTransaction) await c.query('BEGIN');
        // 1..499 reach rp_lo on shard 1, then 500..998 reach rp_hi on shard 2, then 999 is a duplicate.
        await expect(c.query('insert into rp select g, 0 from generate_series(1, 1000) g')).rejects.toThrow(/Duplicate entry '999'/);
        if (inTransaction) await c.query('ROLLBACK');
        // The fault landed half-way: both shards took rows before the duplicate failed the statement.
        expect(await insertedOn(0)).toBeGreaterThanOrEqual(low + 499);
        expect(await insertedOn(1)).toBeGreaterThanOrEqual(high + 499);
        expect((await c.query('select count(*)::int as n, min(id) as lo from rp')).rows[0]).toEqual({ n: 1, lo: 999 });
      }
    } finally {
      await c.query('delete from rp');
      await c.end();
    }
  }, 60_000);

  it('an open transaction that wrote a table being moved holds the cut-over until it commits: its writes move with the table, on both its shards', async () => {
    const [c1] = s.comps();
    const writer = await s.pgAs(c1);
    const watcher = await s.pgAs(c1);
    const before = await balances(s);
    try {
      await writer.query('BEGIN');
      await writer.query('update mv set v = v + 1000 where id = 1');
      await writer.query('update acct_b set money = money + 1 where id = 1');
      const moving = s.f.runJob('expand_cluster', { cluster_id: s.cluster().id, src_shard_id: shardIds[0], dst_shard_id: shardIds[1], table_list: ['postgres.public.mv'], drop_old_table: '0' }, 120_000);
      // The cut-over's hold on this compute node queues behind the open transaction's lock on mv.
      await waitUntil('the cut-over waiting for the open transaction', async () => {
        const { rows } = await watcher.query(`SELECT count(*)::int AS n FROM pg_locks WHERE relation = 'mv'::regclass AND NOT granted`);
        return rows[0].n > 0 ? true : undefined;
      }, 60_000, 50);
      await writer.query('update mv set v = v + 1000 where id = 2');
      await writer.query('COMMIT');
      const reply = await moving;
      expect(reply.error_info ?? '').toBe('');
      expect(reply.status).toBe('done');
    } finally {
      await writer.end();
      await watcher.end();
    }
    expect(await s.shardTables('mv')).toEqual([[], ['postgres_$$_public.mv']]);
    const moved = await rowsOnMaster<{ id: number; v: number }>(s, 1, 'SELECT id, v FROM `postgres_$$_public`.mv WHERE id IN (1, 2, 3) ORDER BY id');
    expect(moved.map((r) => [r.id, r.v])).toEqual([[1, 1001], [2, 1002], [3, 3]]);
    expect((await balances(s)).get('b1')).toBe(before.get('b1')! + 1);
  }, 180_000);

  it('isolation is per shard: a reader between a cross-shard commit\'s decision and its second shard sees the first shard\'s part only', async () => {
    const comp = s.cluster().comps[Object.keys(s.cluster().comps)[0]];
    const writer = await compSessionWithFault(comp, s.computeUser, 'pause_after_decision');
    const reader = await s.pgAs({ host: comp.hostaddr, port: comp.port });
    const before = await balances(s);
    try {
      const gate = await holdCommitGate(reader);
      const committing = transfer(writer, 1, 1, 10);
      // Shard 1 (the coordinator) commits with the decision; shard 2's branch waits prepared at the gate.
      const seen = await waitUntil('acct_a committed while acct_b is not yet', async () => {
        const { rows } = await reader.query('select (select money from acct_a where id = 1) as a, (select money from acct_b where id = 1) as b');
        return Number(rows[0].a) === before.get('a1')! - 10 ? rows[0] : undefined;
      }, 15_000, 50);
      expect(Number(seen.b)).toBe(before.get('b1'));
      await gate.open();
      await committing;
      const after = await balances(s);
      expect(after.get('a1')).toBe(before.get('a1')! - 10);
      expect(after.get('b1')).toBe(before.get('b1')! + 10);
    } finally {
      await writer.end();
      await reader.end();
    }
  }, 60_000);
});
