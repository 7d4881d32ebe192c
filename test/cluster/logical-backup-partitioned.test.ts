// logical_backup and logical_restore of a partitioned table on the canonical workload (issue
// 36, build items 3 and 7): `transfer_account` partitioned by range over 2 shards, made
// through a compute node, with transfers running through both compute nodes. The parent
// lives only on the compute nodes; its partitions are shard tables whose COMMENT records the
// parent, key and bound. A logical_backup naming the parent stores every partition, from
// the shard it lives on; after the table is dropped, logical_restore brings every partition
// back on its shard and the parent on both compute nodes, with the backup point's rows: the
// transfers committed after the backup are not in it. A backup of an object no shard holds
// stores nothing and does not answer done.
//
// What the backup holds: each shard's part is one mariadb-dump --single-transaction snapshot
// of that shard, taken one after the other (README, logical backup), so with transfers
// between shards running there is no single moment the whole table equals. To know exactly
// what the backup must hold, the load is stopped while it runs and started again after it.
// A second table is backed up with transfers running inside each partition (so a partition's
// total is the same at every commit): restored, each partition must hold every row and
// exactly its total, which only a transactionally consistent snapshot of its shard does.

import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_PORT, HOSTS, waitUntil } from './cluster-fixture';
import { emit } from '../helpers/emit-client';
import { startSqlCluster, type SqlCluster } from './sql-fixture';
import { ACCOUNT_MONEY, contentOf, createTransferAccount, partitionFigures, TransferLoad, type PartitionFigures } from './transfer-account';

const ACCOUNTS = 400;
const PARENT = 'postgres_$$_public.transfer_account';
const pad = (n: number) => String(n).padStart(2, '0');
const clock = (d: Date) => `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
const localDateTime = (d: Date) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock(d)}`;
const total = (figures: Map<string, PartitionFigures>) => [...figures.values()].reduce((n, f) => n + f.balance, 0);

describe('logical backup and restore of a partitioned table under transfers', () => {
  let s: SqlCluster;
  let partitions: string[];
  /** Per partition, as both compute nodes read it at the backup point. */
  let atBackup: Map<string, PartitionFigures>;
  let load: TransferLoad;

  const sets = () => Object.values(s.f.manager.store.state().logicalBackups.sets).filter((set) => set.dbTable === PARENT);

  beforeAll(async () => {
    s = await startSqlCluster();
    const storage = await s.f.runJob('create_backup_storage', { name: 'logical', stype: 'fs', hostaddr: HOSTS[2], port: String(AGENT_PORT), path: path.join(s.f.tmp, 'backups') }, 30_000);
    expect(storage.status, storage.error_info).toBe('done');
    partitions = await createTransferAccount(s, { by: 'range', partitions: 4, accounts: ACCOUNTS });
  }, 600_000);

  afterAll(async () => {
    await load?.stop();
    await s?.close();
  }, 120_000);

  it('a logical_backup naming the parent stores every partition from the shard it lives on, and answers done once it is stored', async () => {
    load = new TransferLoad(s, { clients: 4, accounts: ACCOUNTS }).start();
    await load.committedMore(100);
    await load.stop();
    atBackup = await partitionFigures(s, s.comps()[0]);
    expect(await partitionFigures(s, s.comps()[1])).toEqual(atBackup);
    expect([...atBackup.keys()]).toEqual(partitions);
    expect(new Set([...atBackup.values()].map((f) => f.server)).size).toBe(2); // over both shards
    expect(total(atBackup)).toBe(ACCOUNTS * ACCOUNT_MONEY);
    expect([...atBackup.values()].map((f) => f.rows)).toEqual([100, 100, 100, 100]);

    const opens = new Date(Math.floor(Date.now() / 1000) * 1000);
    const window = `${clock(opens)}-${clock(new Date(opens.getTime() + 2 * 3600_000))}`;
    const backup = await s.f.runJob('logical_backup', { cluster_id: s.cluster().id, backup_type: 'table', backup: [{ db_table: PARENT, backup_time: window }] }, 120_000);
    expect(backup.status, backup.error_info).toBe('done');
    expect(backup.attachment).toEqual({ backup_type: 'table', backup: [{ db_table: PARENT, backup_time: window }] });

    // Answered done: the set is recorded already, one part per shard, naming the partitions it holds.
    const [set] = sets();
    expect(sets()).toHaveLength(1);
    const holder = new Map(set.parts.flatMap((p) => p.tables.map((t) => [t.slice(t.indexOf('.') + 1), `shard_${p.shardId}`] as const)));
    expect(new Map([...atBackup].map(([name, f]) => [name, f.server]))).toEqual(holder);
    expect(set.parts).toHaveLength(2);
    for (const part of set.parts) expect(part).toMatchObject({ storage: 'logical', bytes: expect.any(Number), sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    // get_backup_storage counts it with the storage that keeps it.
    const storages = (await emit(s.f.member, 'get_backup_storage', {})).attachment as { list_backup_storage: { name: string; logical_backup_sets: string }[] };
    expect(storages.list_backup_storage.find((x) => x.name === 'logical')?.logical_backup_sets).toBe('1');

    // Transfers after the backup: the restore must not bring them back.
    load = new TransferLoad(s, { clients: 4, accounts: ACCOUNTS }).start();
    await load.committedMore(100);
    await load.stop();
    expect(contentOf(await partitionFigures(s, s.comps()[0]))).not.toEqual(contentOf(atBackup));
  }, 300_000);

  it('after DROP TABLE, logical_restore brings every partition back on its shard and the parent on both compute nodes, with the backup point rows', async () => {
    const c = await s.pgAs(s.comps()[0]);
    try {
      await c.query('DROP TABLE transfer_account');
    } finally {
      await c.end();
    }
    for (const name of partitions) {
      await waitUntil(`${name} gone from every shard`, async () => ((await s.shardTables(name)).flat().length === 0 ? true : undefined), 30_000);
    }
    await waitUntil('transfer_account gone from both compute nodes', async () => ((await s.compRelations('transfer_account')).flat().length === 0 ? true : undefined), 30_000);

    const restoreTime = localDateTime(new Date(Date.now() + 1000));
    await new Promise((r) => setTimeout(r, 1100));
    const restored = await s.f.runJob('logical_restore', { src_cluster_id: s.cluster().id, dst_cluster_id: s.cluster().id, restore_type: 'table', restore: [{ db_table: PARENT, restore_time: restoreTime }] }, 180_000);
    expect(restored.status, restored.error_info).toBe('done');
    const [set] = sets();
    const shardTables = set.parts.flatMap((p) => p.tables);
    expect(restored.attachment).toEqual({ done_dts: [PARENT, ...shardTables].map((t) => `${t},`).join('') });
    expect([...shardTables].sort()).toEqual(partitions.map((p) => `postgres_$$_public.${p}`));

    // Each partition on the shard its part came from, and on no other.
    const masters = s.masters();
    const shardIds = Object.keys(s.cluster().shards);
    for (const part of set.parts) {
      for (const table of part.tables) {
        const name = table.slice(table.indexOf('.') + 1);
        const where = await s.shardTables(name);
        expect(where.map((tables, i) => (tables.length > 0 ? shardIds[i] : null)).filter(Boolean), `${name} on ${masters.length} masters`).toEqual([part.shardId]);
      }
    }
    // The parent on both compute nodes, each partition attached, the rows of the backup point.
    for (const at of s.comps()) {
      expect(await s.compRelations('transfer_account')).toEqual(s.comps().map(() => ['public.transfer_account p']));
      expect(await partitionFigures(s, at), `${at.host}:${at.port}`).toEqual(atBackup);
    }
  }, 300_000);

  it('the restored table takes transfers through both compute nodes again, and its money still adds up', async () => {
    load = new TransferLoad(s, { clients: 4, accounts: ACCOUNTS }).start();
    await load.committedMore(100);
    await load.stop();
    const [first, second] = await Promise.all(s.comps().map((at) => partitionFigures(s, at)));
    expect(second).toEqual(first);
    expect(total(first)).toBe(ACCOUNTS * ACCOUNT_MONEY);
    expect([...first.values()].map((f) => f.rows)).toEqual([100, 100, 100, 100]);
  }, 180_000);

  it('a logical_backup taken while transfers run holds a consistent snapshot of each partition: restored, every row is there and each partition has its total', async () => {
    const HOT = 'transfer_hot';
    const hotParts = await createTransferAccount(s, { by: 'range', partitions: 4, accounts: ACCOUNTS, table: HOT });
    const hot = new TransferLoad(s, { clients: 4, accounts: ACCOUNTS, table: HOT, within: ACCOUNTS / 4 }).start();
    try {
      await hot.committedMore(100);
      const opens = new Date(Math.floor(Date.now() / 1000) * 1000);
      const window = `${clock(opens)}-${clock(new Date(opens.getTime() + 2 * 3600_000))}`;
      const backup = await s.f.runJob('logical_backup', { cluster_id: s.cluster().id, backup: [{ db_table: `postgres_$$_public.${HOT}`, backup_time: window }] }, 120_000);
      expect(backup.status, backup.error_info).toBe('done');
      await hot.committedMore(100); // the load ran before, and still runs after the backup answered
    } finally {
      await hot.stop();
    }
    expect(hot.unknown).toBe(0);

    const c = await s.pgAs(s.comps()[1]);
    try {
      await c.query(`DROP TABLE ${HOT}`);
    } finally {
      await c.end();
    }
    await waitUntil(`${HOT} gone from both compute nodes`, async () => ((await s.compRelations(HOT)).flat().length === 0 ? true : undefined), 30_000);
    const restoreTime = localDateTime(new Date(Date.now() + 1000));
    await new Promise((r) => setTimeout(r, 1100));
    const restored = await s.f.runJob('logical_restore', { src_cluster_id: s.cluster().id, dst_cluster_id: s.cluster().id, db_table: `postgres_$$_public.${HOT}`, restore_time: restoreTime }, 180_000);
    expect(restored.status, restored.error_info).toBe('done');
    const hotSet = Object.values(s.f.manager.store.state().logicalBackups.sets).find((set) => set.dbTable === `postgres_$$_public.${HOT}`)!;
    expect(restored.attachment).toEqual({ done_dts: [hotSet.dbTable, ...hotSet.parts.flatMap((part) => part.tables)].map((t) => `${t},`).join('') });

    const figures = await Promise.all(s.comps().map((at) => partitionFigures(s, at, HOT)));
    expect(figures[1]).toEqual(figures[0]);
    expect([...figures[0].keys()]).toEqual(hotParts);
    for (const [name, f] of figures[0]) expect({ name, rows: f.rows, balance: f.balance }).toEqual({ name, rows: ACCOUNTS / 4, balance: (ACCOUNTS / 4) * ACCOUNT_MONEY });
    expect(new Set([...figures[0].values()].map((f) => f.server)).size).toBe(2);
  }, 300_000);

  it('a logical_backup of a table no shard holds, nor any partition of it, stores nothing and does not answer done', async () => {
    const before = s.f.manager.store.state().logicalBackups;
    const schedules = Object.keys(before.schedules);
    const setCount = Object.keys(before.sets).length;
    const opens = new Date(Math.floor(Date.now() / 1000) * 1000);
    const window = `${clock(opens)}-${clock(new Date(opens.getTime() + 2 * 3600_000))}`;
    const gone = 'postgres_$$_public.transfer_gone';
    const backup = await s.f.runJob('logical_backup', { cluster_id: s.cluster().id, backup_type: 'table', backup: [{ db_table: gone, backup_time: window }] }, 60_000);
    expect(backup.status).toBe('failed');
    expect(backup.error_info).toContain(`no shard of cluster ${s.cluster().id} holds table ${gone} (nor any partition of a partitioned table of that name); nothing is stored`);
    const after = s.f.manager.store.state().logicalBackups;
    expect(Object.keys(after.schedules)).toEqual(schedules);
    expect(Object.keys(after.sets)).toHaveLength(setCount);
  }, 120_000);
});
