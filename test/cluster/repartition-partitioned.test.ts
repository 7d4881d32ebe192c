// repartition_tables of a partitioned table on the issue-36 workload, real engines (2 shards
// x 3 nodes, 2 compute nodes): `transfer_account` partitioned by hash over the two shards,
// money transfers running through both compute nodes while each job runs.
// - Into a pre-created partitioned target whose partitions sit on the other shards: every
//   source partition's rows land in the target partition its bound says, the target takes
//   the name on both compute nodes and in its partitions' shard records, the source is
//   renamed aside (parent and records), and no committed transfer is lost or doubled.
// - Then that table into a pre-created plain table: the same, the whole table on one shard.
// - A hash layout whose partitions do not each hold whole source partitions is refused
//   before anything is copied.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from './cluster-fixture';
import { startSqlCluster, type Endpoint, type SqlCluster } from './sql-fixture';
import { pinTable, rowsOnMaster } from './transactions-fixture';
import { ACCOUNT_MONEY, createTransferAccount, partitionFigures, partitionsEverywhere, TransferLoad, wrongBalances } from './transfer-account';

const ACCOUNTS = 1_000;
const DB = 'postgres_$$_public';
const COLUMNS = '(id int NOT NULL, balance bigint NOT NULL, note varchar(40))';

interface RepartitionResult {
  blocked_ms_max: string;
  list_table: { table: string; old_table: string; rows_copied: string; rows_verified: string; blocked_ms: string }[];
}

describe('repartition_tables of a partitioned table, transfers running through both compute nodes', () => {
  let s: SqlCluster;
  let shard1 = '';
  let shard2 = '';
  /** What the earlier tests' committed transfers changed, per account: a later load's balances start from there. */
  const carried = new Map<number, number>();
  /**
   * Repartitions transfer_account into `target` while transfers run through both compute
   * nodes, and goes on until transfers committed after the job too (under the same name,
   * now the target's); then stops them. Returns the load, the result and the aside name.
   */
  const repartitionUnderTransfers = async (target: string, what: string) => {
    const load = new TransferLoad(s, { clients: 4, accounts: ACCOUNTS });
    for (const [id, delta] of carried) load.deltas.set(id, delta);
    load.start();
    let reply;
    try {
      await load.committedMore(100);
      reply = await repartition(`${DB}.transfer_account=>${DB}.${target}`);
      expect(reply.error_info ?? '').toBe('');
      expect(reply.status).toBe('done');
      await load.committedMore(100);
    } finally {
      await load.stop();
      for (const [id, delta] of load.deltas) carried.set(id, delta);
    }
    const result = reply.attachment as unknown as RepartitionResult;
    console.log(`repartition of a partitioned table into ${what}: ${load.committed} transfers committed, ${load.failed} failed (${load.errors.slice(-3).join(" | ")}); result ${JSON.stringify(result)}; ${switchLine()}`);
    expect(result.list_table[0]).toMatchObject({ table: `${DB}.transfer_account`, old_table: expect.stringMatching(/^postgres_\$\$_public\.transfer_account__repart_\d+$/), rows_copied: String(ACCOUNTS) });
    return { load, result, aside: result.list_table[0].old_table.split('.')[1] };
  };
  /**
   * A target like transfer_account (hash, modulus 2) whose partition of each remainder is on
   * the other shard than the source's (every row crosses shards); waits for both compute nodes.
   */
  const hashTargetOnOtherShards = async (name: string) => {
    const c = await s.pgAs(s.comps()[0]);
    try {
      await c.query(`CREATE TABLE ${name} ${COLUMNS} PARTITION BY HASH (id)`);
      await pinTable(c, shard2, `CREATE TABLE ${name}_01 PARTITION OF ${name} (PRIMARY KEY (id)) FOR VALUES WITH (MODULUS 2, REMAINDER 0)`);
      await pinTable(c, shard1, `CREATE TABLE ${name}_02 PARTITION OF ${name} (PRIMARY KEY (id)) FOR VALUES WITH (MODULUS 2, REMAINDER 1)`);
    } finally {
      await c.end();
    }
    await partitionsEverywhere(s, name, 2);
  };
  const repartition = (pairs: string, timeoutMs = 240_000) => {
    const id = s.cluster().id;
    return s.f.runJob('repartition_tables', { src_cluster_id: id, dst_cluster_id: id, repartition_tables: pairs }, timeoutMs);
  };
  const onShard = (shardId: string, sql: string) => rowsOnMaster<Record<string, unknown>>(s, shardId === shard1 ? 0 : 1, sql);
  const switchLine = () => s.f.logLines.flatMap((chunk) => chunk.split('\n')).filter((l) => l.includes('"repartition switched names"')).at(-1) ?? '';
  const query = async <T>(at: Endpoint, sql: string, values: unknown[] = []): Promise<T[]> => {
    const c = await s.pgAs(at);
    try {
      return (await c.query(sql, values)).rows as T[];
    } finally {
      await c.end();
    }
  };
  /** The relation kind of `name` on each compute node ('p' partitioned, 'f' foreign), and its partitions. */
  const shapeOn = (at: Endpoint, name: string) =>
    query<{ kind: string; parts: string[] | null }>(at, `SELECT c.relkind::text AS kind, (SELECT array_agg(i.inhrelid::regclass::text ORDER BY i.inhrelid::regclass::text) FROM pg_inherits i WHERE i.inhparent = c.oid) AS parts FROM pg_class c WHERE c.oid = to_regclass($1)`, [name]);
  /** Per partition of `table` (or the table itself): ids and notes, not balances (those the transfers change). */
  const idsAndNotes = async (at: Endpoint, table: string) => {
    const parts = (await shapeOn(at, table))[0]?.parts ?? [table];
    const out: { part: string; n: number; md5: string }[] = [];
    for (const part of parts) {
      const [r] = await query<{ n: number; md5: string }>(at, `SELECT count(*)::int AS n, md5(string_agg(id || ':' || coalesce(note, '<null>'), ',' ORDER BY id)) AS md5 FROM ${part}`);
      out.push({ part, ...r });
    }
    return out;
  };
  const total = async (at: Endpoint, table: string) => (await query<{ n: number; sum: string }>(at, `SELECT count(*)::int AS n, sum(balance)::text AS sum FROM ${table}`))[0];
  const partitionRecord = async (shardId: string, table: string) =>
    JSON.parse(String((await onShard(shardId, `SELECT TABLE_COMMENT AS c FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${DB}' AND TABLE_NAME = '${table}'`))[0]?.c ?? 'null')) as { kcm_partition_of: string[]; bound: string } | null;

  beforeAll(async () => {
    s = await startSqlCluster();
    [shard1, shard2] = Object.keys(s.cluster().shards).sort((a, b) => Number(a) - Number(b));
    await createTransferAccount(s, { by: 'hash', partitions: 2, accounts: ACCOUNTS, shards: [shard1, shard2] });
  }, 600_000);
  afterAll(async () => {
    await s?.close();
  });

  it('a hash layout whose partitions do not hold whole source partitions is refused before anything is copied', async () => {
    const c = await s.pgAs(s.comps()[0]);
    try {
      await c.query(`CREATE TABLE ta_hash4 ${COLUMNS} PARTITION BY HASH (id)`);
      for (let r = 0; r < 4; r++) await pinTable(c, r % 2 ? shard1 : shard2, `CREATE TABLE ta_hash4_${r} PARTITION OF ta_hash4 (PRIMARY KEY (id)) FOR VALUES WITH (MODULUS 4, REMAINDER ${r})`);
    } finally {
      await c.end();
    }
    const reply = await repartition(`${DB}.transfer_account=>${DB}.ta_hash4`);
    expect(reply.status).toBe('failed');
    expect(reply.error_info).toMatch(/repartition refused before copying anything: .*no partition of postgres_\$\$_public\.ta_hash4 holds every row of transfer_account_01 \(FOR VALUES WITH \(modulus 2, remainder 0\)\)/);
    expect(await total(s.comps()[0], 'ta_hash4')).toMatchObject({ n: 0 });
    expect((await shapeOn(s.comps()[1], 'transfer_account'))[0]).toEqual({ kind: 'p', parts: ['transfer_account_01', 'transfer_account_02'] });
  }, 120_000);

  it('an import a target partition refuses (a foreign key no rule covers) fails the job: every target partition empty again, the source keeps its name and records', async () => {
    await hashTargetOnOtherShards('ta_fk');
    await onShard(shard2, `CREATE TABLE \`${DB}\`.fk_parent (id INT PRIMARY KEY)`);
    await onShard(shard2, `ALTER TABLE \`${DB}\`.ta_fk_01 ADD FOREIGN KEY (id) REFERENCES \`${DB}\`.fk_parent (id)`);
    const reply = await repartition(`${DB}.transfer_account=>${DB}.ta_fk`);
    expect(reply.status).toBe('failed');
    expect(reply.error_info).toMatch(/foreign key/i);
    for (const at of s.comps()) {
      expect(await idsAndNotes(at, 'ta_fk')).toEqual([expect.objectContaining({ part: 'ta_fk_01', n: 0 }), expect.objectContaining({ part: 'ta_fk_02', n: 0 })]);
      expect((await shapeOn(at, 'transfer_account'))[0]).toEqual({ kind: 'p', parts: ['transfer_account_01', 'transfer_account_02'] });
      expect(await total(at, 'transfer_account')).toEqual({ n: ACCOUNTS, sum: String(ACCOUNTS * ACCOUNT_MONEY) });
    }
    expect(await partitionRecord(shard1, 'transfer_account_01')).toMatchObject({ kcm_partition_of: ['public', 'transfer_account'] });
    expect(await partitionRecord(shard2, 'ta_fk_01')).toMatchObject({ kcm_partition_of: ['public', 'ta_fk'] });
  }, 120_000);

  it('into a pre-created partitioned target on the other shards: rows land by bound, the target takes the name, nothing is lost', async () => {
    const before = await idsAndNotes(s.comps()[0], 'transfer_account');
    // The target's partitions on the other shard than the source's same remainder: every row crosses shards.
    await hashTargetOnOtherShards('ta_hash');
    const { load, aside } = await repartitionUnderTransfers('ta_hash', 'a partitioned target');

    // Nothing lost or doubled: every account's balance is what the committed transfers made it, on both compute nodes.
    expect(load.unknown).toBe(0);
    for (const at of s.comps()) {
      expect(await wrongBalances(s, at, load, ACCOUNTS)).toEqual([]);
      expect(await total(at, 'transfer_account')).toEqual({ n: ACCOUNTS, sum: String(ACCOUNTS * ACCOUNT_MONEY) });
      // The name is the target's parent (its partitions), the source's parent is aside with its own.
      expect((await shapeOn(at, 'transfer_account'))[0]).toEqual({ kind: 'p', parts: ['ta_hash_01', 'ta_hash_02'] });
      expect((await shapeOn(at, aside))[0]).toEqual({ kind: 'p', parts: ['transfer_account_01', 'transfer_account_02'] });
      expect(await shapeOn(at, 'ta_hash')).toEqual([]);
      // Every row where its bound says: the same ids and notes per remainder as the source's partitions.
      const after = await idsAndNotes(at, 'transfer_account');
      expect(after.map((r) => ({ n: r.n, md5: r.md5 }))).toEqual(before.map((r) => ({ n: r.n, md5: r.md5 })));
      expect(after.map((r) => r.part)).toEqual(['ta_hash_01', 'ta_hash_02']);
    }
    // The aside still holds the source as it was at the switch: every account, the total unchanged.
    expect(await total(s.comps()[1], aside)).toEqual({ n: ACCOUNTS, sum: String(ACCOUNTS * ACCOUNT_MONEY) });
    const figures = await Promise.all(s.comps().map((at) => partitionFigures(s, at)));
    expect(figures[1]).toEqual(figures[0]);
    expect([...figures[0]].map(([name, f]) => [name, f.server])).toEqual([['ta_hash_01', `shard_${shard2}`], ['ta_hash_02', `shard_${shard1}`]]);
    // The shards' partition records agree, so the catalog sync rebuilds the same parents anywhere.
    expect(await partitionRecord(shard2, 'ta_hash_01')).toMatchObject({ kcm_partition_of: ['public', 'transfer_account'], bound: 'FOR VALUES WITH (modulus 2, remainder 0)' });
    expect(await partitionRecord(shard1, 'ta_hash_02')).toMatchObject({ kcm_partition_of: ['public', 'transfer_account'] });
    expect(await partitionRecord(shard1, 'transfer_account_01')).toMatchObject({ kcm_partition_of: ['public', aside] });
    expect(await partitionRecord(shard2, 'transfer_account_02')).toMatchObject({ kcm_partition_of: ['public', aside] });
    // INSERT through the parent routes by the target's bounds (its own rule).
    const c2 = await s.pgAs(s.comps()[1]);
    try {
      await c2.query(`INSERT INTO transfer_account VALUES (${ACCOUNTS + 1}, 0, 'new')`);
      await c2.query(`DELETE FROM transfer_account WHERE id = ${ACCOUNTS + 1}`);
    } finally {
      await c2.end();
    }
  }, 600_000);

  it('then into a pre-created plain table on one shard: the whole table there under the name, nothing lost', async () => {
    const c = await s.pgAs(s.comps()[0]);
    try {
      await pinTable(c, shard1, `CREATE TABLE ta_plain (id int PRIMARY KEY, balance bigint NOT NULL, note varchar(60))`);
    } finally {
      await c.end();
    }
    await waitUntil('ta_plain on every compute node', async () => ((await Promise.all(s.comps().map((at) => shapeOn(at, 'ta_plain')))).every((r) => r[0]?.kind === 'f') ? true : undefined), 30_000);
    const before = await idsAndNotes(s.comps()[0], 'transfer_account');
    const { load, aside } = await repartitionUnderTransfers('ta_plain', 'a plain table');
    expect(load.unknown).toBe(0);
    for (const at of s.comps()) {
      expect(await wrongBalances(s, at, load, ACCOUNTS)).toEqual([]);
      expect(await total(at, 'transfer_account')).toEqual({ n: ACCOUNTS, sum: String(ACCOUNTS * ACCOUNT_MONEY) });
      expect((await shapeOn(at, 'transfer_account'))[0]).toEqual({ kind: 'f', parts: null });
      expect((await shapeOn(at, aside))[0]).toEqual({ kind: 'p', parts: ['ta_hash_01', 'ta_hash_02'] });
      // The same ids and notes as the two partitions together.
      const [after] = await query<{ n: number; md5: string }>(at, `SELECT count(*)::int AS n, md5(string_agg(id || ':' || coalesce(note, '<null>'), ',' ORDER BY id)) AS md5 FROM transfer_account`);
      const [whole] = await query<{ n: number; md5: string }>(at, `SELECT count(*)::int AS n, md5(string_agg(id || ':' || coalesce(note, '<null>'), ',' ORDER BY id)) AS md5 FROM ${aside}`);
      expect(after).toEqual(whole);
      expect(before.reduce((n, r) => n + r.n, 0)).toBe(after.n);
    }
    // On the shard: ta_plain is now transfer_account, every account in it.
    expect((await onShard(shard1, `SELECT COUNT(*) AS n, SUM(balance) AS sum FROM \`${DB}\`.transfer_account`))[0]).toMatchObject({ n: ACCOUNTS });
    expect(await onShard(shard1, `SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${DB}' AND TABLE_NAME = 'ta_plain'`)).toEqual([]);
    expect(await partitionRecord(shard2, 'ta_hash_01')).toMatchObject({ kcm_partition_of: ['public', aside] });
  }, 600_000);

  it('range into coarser ranges: two source partitions into each target partition, under transfers; a plain table into it is refused', async () => {
    const accounts = 400;
    await createTransferAccount(s, { by: 'range', partitions: 4, accounts, table: 'ta_range', shards: [shard1, shard2, shard1, shard2] });
    const c = await s.pgAs(s.comps()[0]);
    try {
      await c.query(`CREATE TABLE ta_range_new ${COLUMNS} PARTITION BY RANGE (id)`);
      await pinTable(c, shard2, `CREATE TABLE ta_range_low PARTITION OF ta_range_new (PRIMARY KEY (id)) FOR VALUES FROM (MINVALUE) TO (201)`);
      await pinTable(c, shard1, `CREATE TABLE ta_range_high PARTITION OF ta_range_new (PRIMARY KEY (id)) FOR VALUES FROM (201) TO (MAXVALUE)`);
    } finally {
      await c.end();
    }
    await partitionsEverywhere(s, 'ta_range_new', 2);
    // transfer_account is a plain table by now: its rows would have to be split by bound.
    const refused = await repartition(`${DB}.transfer_account=>${DB}.ta_range_new`);
    expect(refused.status).toBe('failed');
    expect(refused.error_info).toMatch(/postgres_\$\$_public\.transfer_account is not partitioned, so its rows would have to be split over 2 partitions/);

    const load = new TransferLoad(s, { clients: 4, accounts, table: 'ta_range' }).start();
    let reply;
    try {
      await load.committedMore(100);
      reply = await repartition(`${DB}.ta_range=>${DB}.ta_range_new`);
      expect(reply.error_info ?? '').toBe('');
      expect(reply.status).toBe('done');
      await load.committedMore(100);
    } finally {
      await load.stop();
    }
    console.log(`repartition of range partitions into coarser ranges: ${load.committed} transfers committed, ${load.failed} failed (${load.errors.slice(-3).join(" | ")}); result ${JSON.stringify(reply.attachment)}; ${switchLine()}`);
    expect(load.unknown).toBe(0);
    for (const at of s.comps()) {
      expect(await wrongBalances(s, at, load, accounts, 'ta_range')).toEqual([]);
      expect((await shapeOn(at, 'ta_range'))[0]).toEqual({ kind: 'p', parts: ['ta_range_high', 'ta_range_low'] });
      const parts = await query<{ lo: number; hi: number; n: number }>(at, `SELECT min(id) AS lo, max(id) AS hi, count(*)::int AS n FROM ta_range_low UNION ALL SELECT min(id), max(id), count(*)::int FROM ta_range_high`);
      expect(parts).toEqual([{ lo: 1, hi: 200, n: 200 }, { lo: 201, hi: 400, n: 200 }]);
      expect(await total(at, 'ta_range')).toEqual({ n: accounts, sum: String(accounts * ACCOUNT_MONEY) });
    }
  }, 600_000);
});
