// logical_backup and logical_restore end to end on real engines (issue 14 must-show): a
// one-member manager, three agents, a cluster of 1 shard x 3 MariaDB nodes and 1 PostgreSQL
// compute node, and an fs backup storage on host 1. Rows are written through the compute
// node; a logical_backup whose window opens now runs at once, inside its window; the table
// is dropped; logical_restore brings it back (answering done_dts in the spec's shape) and
// the compute node serves its rows again, as does every standby of the shard.

import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandKind, type ClusterRecord } from '@kcm/manager';
import { computerPorts, HOSTS, startClusterFixture, storagePorts, waitUntil, type ClusterFixture } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { openTestAccounts } from '../helpers/secrets';

const DB_TABLE = 'postgres_$$_public.orders';
const pad = (n: number) => String(n).padStart(2, '0');
const clock = (d: Date) => `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
const localDateTime = (d: Date) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock(d)}`;

describe('logical backup and restore on real engines', () => {
  let f: ClusterFixture;
  let cluster: ClusterRecord;
  let computer: { user: string; password: string };

  const master = () => {
    const shard = Object.values(cluster.shards)[0];
    return shard.nodes[shard.masterNodeId];
  };
  const onShardNode = async <T>(node: { hostaddr: string; port: number }, sql: string): Promise<T> => {
    const c = await mysql.createConnection({ host: node.hostaddr, port: node.port, ...openTestAccounts(cluster.accounts).storage, connectTimeout: 5000 });
    try {
      return (await c.query(sql))[0] as T;
    } finally {
      await c.end();
    }
  };
  const onComp = async <T extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<T[]> => {
    const comp = Object.values(cluster.comps)[0];
    const c = new pg.Client({ host: comp.hostaddr, port: comp.port, user: computer.user, password: computer.password, database: 'postgres' });
    c.on('error', () => {});
    await c.connect();
    try {
      return (await c.query<T>(sql, values)).rows;
    } finally {
      await c.end();
    }
  };

  beforeAll(async () => {
    f = await startClusterFixture();
    for (const [i, host] of HOSTS.entries()) {
      const machines = i === 0 ? (['storage', 'computer'] as const) : (['storage'] as const);
      for (const type of machines) {
        const range = type === 'storage' ? storagePorts(i) : computerPorts(i);
        const reply = await f.runJob('create_machine', { hostaddr: host, machine_type: type, port_range: `${range.low}-${range.high}`, rack_id: 'r1', ...f.dirs(i), total_mem: '4096', total_cpu_cores: '2' });
        expect(reply.status, reply.error_info).toBe('done');
      }
    }
    // The storage registered as create_backup_storage would: an fs directory served by host 1's agent.
    const registered = await f.manager.store.propose({ kind: CommandKind.BackupStorageCreated, at: Date.now(), name: 'local', stype: 'fs', hostaddr: HOSTS[0], port: f.agentPort, path: path.join(f.tmp, 'backups') });
    expect(registered.ok).toBe(true);
    const created = await f.runJob('create_cluster', clusterParas({ nick_name: 'shop', computer_iplists: [HOSTS[0]] }), 180_000);
    expect(created.status, created.error_info).toBe('done');
    const attachment = created.attachment as { cluster_id: string; computer_user: string; computer_pwd: string };
    cluster = f.manager.store.state().clusters[attachment.cluster_id];
    computer = { user: attachment.computer_user, password: attachment.computer_pwd };
  }, 240_000);

  afterAll(async () => {
    await f?.close();
  }, 60_000);

  it('rows written through the compute node are backed up by a logical_backup whose window opens now, inside the window, once', async () => {
    await onShardNode(master(), 'CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
    await onShardNode(master(), 'CREATE TABLE `postgres_$$_public`.orders (id INT PRIMARY KEY, note VARCHAR(40))');
    await waitUntil('the compute node to see public.orders', async () => ((await onComp("SELECT 1 FROM information_schema.tables WHERE table_name = 'orders'")).length > 0 ? true : undefined), 20_000);
    for (const [id, note] of [[1, 'first'], [2, "it's second"], [3, 'third']] as const) await onComp('INSERT INTO public.orders (id, note) VALUES ($1, $2)', [id, note]);

    const opens = new Date(Math.floor(Date.now() / 1000) * 1000);
    const window = `${clock(opens)}-${clock(new Date(opens.getTime() + 2 * 3600_000))}`;
    const scheduled = await f.runJob('logical_backup', { cluster_id: cluster.id, backup_type: 'table', backup: [{ db_table: DB_TABLE, backup_time: window }] });
    expect(scheduled.status, scheduled.error_info).toBe('done');
    expect(scheduled.attachment).toEqual({ backup_type: 'table', backup: [{ db_table: DB_TABLE, backup_time: window }] });

    const sets = await waitUntil('the backup set of the window', async () => {
      const found = Object.values(f.manager.store.state().logicalBackups.sets);
      return found.length > 0 ? found : undefined;
    }, 30_000);
    expect(sets).toHaveLength(1);
    const [set] = sets;
    expect(set.takenAt).toBeGreaterThanOrEqual(opens.getTime());
    expect(set.takenAt).toBeLessThan(opens.getTime() + 2 * 3600_000);
    expect(set.parts).toEqual([expect.objectContaining({ shardId: Object.keys(cluster.shards)[0], storage: 'local', tables: [DB_TABLE], bytes: expect.any(Number) })]);
    expect(set.parts[0].sha256).toMatch(/^[0-9a-f]{64}$/);
    const run = f.manager.store.state().logicalBackups.schedules[`${cluster.id}/table/${DB_TABLE}`].lastRun;
    expect(run).toMatchObject({ runId: set.id, attempts: 1, ok: true });
    // Later rounds in the same window do not run it again.
    await new Promise((r) => setTimeout(r, 1500));
    expect(Object.keys(f.manager.store.state().logicalBackups.sets)).toEqual([set.id]);
  }, 90_000);

  it('logical_restore brings the dropped table back with done_dts in the spec shape, served by the compute node and every standby', async () => {
    await onShardNode(master(), 'DROP TABLE `postgres_$$_public`.orders');
    await waitUntil('the compute node to lose public.orders', async () => ((await onComp("SELECT 1 FROM information_schema.tables WHERE table_name = 'orders'")).length === 0 ? true : undefined), 20_000);

    const restoreTime = localDateTime(new Date(Date.now() + 1000));
    await new Promise((r) => setTimeout(r, 1100));
    const restored = await f.runJob('logical_restore', { src_cluster_id: cluster.id, dst_cluster_id: cluster.id, restore_type: 'table', restore: [{ db_table: DB_TABLE, restore_time: restoreTime }] });
    expect(restored.status, restored.error_info).toBe('done');
    expect(restored.attachment).toEqual({ done_dts: 'postgres_$$_public.orders,' });

    expect(await onComp('SELECT id, note FROM public.orders ORDER BY id')).toEqual([
      { id: 1, note: 'first' },
      { id: 2, note: "it's second" },
      { id: 3, note: 'third' },
    ]);
    for (const node of Object.values(Object.values(cluster.shards)[0].nodes)) {
      await waitUntil(`the rows on ${node.hostaddr}:${node.port}`, async () => ((await onShardNode<unknown[]>(node, 'SELECT id FROM `postgres_$$_public`.orders')).length === 3 ? true : undefined), 10_000);
    }
  }, 60_000);

  it('the older flat form without a type restores too; a restore_time before every backup is refused naming the entry', async () => {
    const flat = await f.runJob('logical_restore', { src_cluster_id: cluster.id, dst_cluster_id: cluster.id, db_table: DB_TABLE, restore_time: localDateTime(new Date()) });
    expect(flat.status, flat.error_info).toBe('done');
    expect(flat.attachment).toEqual({ done_dts: 'postgres_$$_public.orders,' });
    const early = await f.runJob('logical_restore', { src_cluster_id: cluster.id, dst_cluster_id: cluster.id, db_table: DB_TABLE, restore_time: '2020-01-01 00:00:00' }).catch((err: Error) => err);
    expect(String((early as Error).message ?? JSON.stringify(early))).toMatch(/paras\.restore\[0\]\.restore_time: cluster \d+ has no logical backup of table postgres_\$\$_public\.orders taken before 2020-01-01 00:00:00/);
  }, 60_000);
});
