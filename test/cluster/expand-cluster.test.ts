// expand_cluster on real engines: a one-member manager, three agents, a cluster of 2 shards
// x 3 MariaDB nodes and 1 PostgreSQL compute node. A table on shard 1 under an insert/update/
// delete load through the compute node is moved to shard 2: every write the client saw
// acknowledged is on shard 2 afterwards (each row compared against the client's own log), the
// compute node reads and writes the table at its new place, the old table is renamed aside,
// and the result reports the cut-over's blocked window. A row changed on the target behind the
// move's back fails the verify gate, naming its key, and the source keeps serving.

import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { TableMoveAgentClient } from '@kcm/agent-api';
import type { ClusterRecord } from '@kcm/manager';
import { startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './ha-fixture';
import { MoveLoad, rowDifferences, type Row } from './move-load';
import { openTestAccounts } from '../helpers/secrets';

const MEMBER = '127.0.1.90:58190';
const AGENT_PORT = 58190;
const SEEDED = 20_000;
const DB = 'postgres_$$_public';

describe('expand_cluster on real engines (2 shards x 3 nodes, 1 compute node)', () => {
  let f: ClusterFixture;
  let clusterId = '';
  let login: { user: string; password: string };
  const cluster = (): ClusterRecord => f.manager.store.state().clusters[clusterId];
  const shardIds = () => Object.keys(cluster().shards).sort((a, b) => Number(a) - Number(b));
  const masterOf = (shardId: string) => {
    const s = cluster().shards[shardId];
    return s.nodes[s.masterNodeId];
  };
  const comp = () => Object.values(cluster().comps)[0];
  const onShard = async <T>(shardId: string, sql: string, values: unknown[] = []): Promise<T[]> => {
    const m = masterOf(shardId);
    const c = await mysql.createConnection({ host: m.hostaddr, port: m.port, ...openTestAccounts(cluster().accounts).storage });
    try {
      return (await c.query(sql, values))[0] as T[];
    } finally {
      await c.end();
    }
  };
  const pgClient = async () => {
    const c = new pg.Client({ host: comp().hostaddr, port: comp().port, ...login, database: 'postgres' });
    c.on('error', () => {});
    await c.connect();
    return c;
  };
  const onComp = async <T extends pg.QueryResultRow>(sql: string): Promise<T[]> => {
    const c = await pgClient();
    try {
      return (await c.query<T>(sql)).rows;
    } finally {
      await c.end();
    }
  };
  const foreignServer = async (table: string) =>
    (await onComp<{ srv: string }>(`SELECT s.srvname AS srv FROM pg_foreign_table ft JOIN pg_class c ON c.oid = ft.ftrelid JOIN pg_foreign_server s ON s.oid = ft.ftserver WHERE c.relname = '${table}'`))[0]?.srv;
  const seedTable = async (shardId: string, table: string) => {
    await onShard(shardId, `CREATE DATABASE IF NOT EXISTS \`${DB}\``);
    await onShard(shardId, `CREATE TABLE \`${DB}\`.${table} (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40)) ENGINE=InnoDB`);
    await onShard(shardId, `INSERT INTO \`${DB}\`.${table} SELECT seq, seq, CONCAT('n', seq) FROM \`${DB}\`.seq_1_to_${SEEDED}`);
    await waitUntil(`${table} on the compute node`, async () => ((await foreignServer(table)) === `shard_${shardId}` ? true : undefined), 20_000);
  };
  const tableRows = async (shardId: string, table: string) =>
    new Map((await onShard<{ id: number; v: number; note: string }>(shardId, `SELECT id, v, note FROM \`${DB}\`.${table}`)).map((r) => [r.id, { v: r.v, note: r.note } as Row]));

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER });
    await registerMachines(f, [2]);
    const reply = await f.runJob('create_cluster', clusterParas({ nick_name: 'mv', shards: '2' }), 300_000);
    if (reply.status !== 'done') throw new Error(`create_cluster: ${reply.error_info}`);
    const att = reply.attachment as { cluster_id: string; computer_user: string; computer_pwd: string };
    clusterId = att.cluster_id;
    login = { user: att.computer_user, password: att.computer_pwd };
  }, 300_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  it('moves a table under an insert/update/delete load: every acknowledged write is on shard 2, reads and writes follow it', async () => {
    const [src, dst] = shardIds();
    await seedTable(src, 'mv_items');
    const load = new MoveLoad({ host: comp().hostaddr, port: comp().port, ...login, database: 'postgres' }, 'public.mv_items', SEEDED);
    load.start();
    await new Promise((r) => setTimeout(r, 500));
    const started = Date.now();
    const reply = await f.runJob('expand_cluster', { cluster_id: clusterId, src_shard_id: src, dst_shard_id: dst, table_list: ['postgres.public.mv_items'], drop_old_table: '0' }, 120_000);
    const ended = Date.now();
    await new Promise((r) => setTimeout(r, 500));
    await load.stop();
    expect(reply.error_info ?? '').toBe('');
    expect(reply.status).toBe('done');
    const result = reply.attachment as { blocked_ms_max: string; list_table: { rows_copied: string; blocked_ms: string; old_table: string; rows_verified: string }[] };
    console.log(`expand_cluster: ${ended - started} ms, writes ${load.writes} (failed ${load.failures}), longest client gap ${load.longestGap(started, ended)} ms, result ${JSON.stringify(result)}`);
    expect(Number(result.blocked_ms_max)).toBeGreaterThan(0);
    expect(Number(result.list_table[0].rows_copied)).toBeGreaterThanOrEqual(SEEDED - load.writes);
    expect(load.writes).toBeGreaterThan(50);

    // Every acknowledged write, row by row, on shard 2; the count and a checksum agree with the client's log.
    const moved = await tableRows(dst, 'mv_items');
    expect(rowDifferences(load, moved)).toEqual([]);
    const certain = [...load.expected.keys()].filter((id) => !load.uncertain.has(id));
    expect(moved.size).toBeGreaterThanOrEqual(certain.length);
    // The source is renamed aside, not dropped; the compute node uses shard 2.
    expect(result.list_table[0].old_table).toMatch(/^postgres_\$\$_public\.mv_items__moved_\d+$/);
    expect(await onShard(src, `SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'mv_items'`, [DB])).toEqual([]);
    expect(await foreignServer('mv_items')).toBe(`shard_${dst}`);
    const c = await pgClient();
    try {
      await c.query(`INSERT INTO public.mv_items (id, v, note) VALUES (5000000, 1, 'after')`);
      expect((await c.query(`SELECT note FROM public.mv_items WHERE id = 5000000`)).rows).toEqual([{ note: 'after' }]);
      expect((await c.query(`SELECT count(*)::int AS n FROM public.mv_items`)).rows[0].n).toBe(moved.size + 1);
    } finally {
      await c.end();
    }
    expect(await onShard(dst, `SELECT note FROM \`${DB}\`.mv_items WHERE id = 5000000`)).toEqual([{ note: 'after' }]);
  }, 180_000);
  it('fails the verify gate on a row changed on the target behind the move, naming its key; the source keeps serving', async () => {
    const [src, dst] = shardIds();
    await seedTable(src, 'mv_bad');
    const jobsBefore = f.manager.store.state().counters.job;
    const running = f.runJob('expand_cluster', { cluster_id: clusterId, src_shard_id: src, dst_shard_id: dst, table_list: ['postgres.public.mv_bad'], drop_old_table: '1' }, 120_000);
    // Once the copy is recorded, change the last row on the target (the verify reads it last),
    // holding the table meanwhile so the verify cannot have read it before the change.
    const job = () => Object.values(f.manager.store.state().jobs).find((j) => j.jobType === 'expand_cluster' && Number(j.id) > jobsBefore);
    await waitUntil('the copy step recorded', async () => (job() && 1 in job()!.stepOutputs ? true : undefined), 60_000, 5);
    const m = masterOf(dst);
    const c = await mysql.createConnection({ host: m.hostaddr, port: m.port, ...openTestAccounts(cluster().accounts).storage });
    try {
      await c.query(`LOCK TABLES \`${DB}\`.mv_bad WRITE`);
      await c.query(`UPDATE \`${DB}\`.mv_bad SET v = -1 WHERE id = ${SEEDED}`);
      await new Promise((r) => setTimeout(r, 300));
      await c.query('UNLOCK TABLES');
    } finally {
      await c.end();
    }
    const reply = await running;
    expect(reply.status).toBe('failed');
    expect(reply.error_code).toBe('2003');
    expect(reply.error_info).toContain(`primary key (id) = ["${SEEDED}"]`);
    // The source serves as before: the compute node still reads shard 1, the target's partial table is gone.
    expect(await foreignServer('mv_bad')).toBe(`shard_${src}`);
    expect((await onComp<{ n: number }>('SELECT count(*)::int AS n FROM public.mv_bad'))[0].n).toBe(SEEDED);
    expect(await onShard(dst, `SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'mv_bad'`, [DB])).toEqual([]);
  }, 180_000);

  it('the cut-over\'s hold and re-point fire no event trigger inside the blocked window (kcm_ddl\'s start PL/Python there), and a replacement prepared before the lock never outlives its hold', async () => {
    const [src, dst] = shardIds();
    await seedTable(src, 'mv_quiet');
    // As the superuser (the agent's own unix-socket login): an event trigger that logs every
    // DDL command and drop, as kcm_ddl's fire on this table's ALTER, CREATE, DROP and RENAME.
    const admin = new pg.Client({ host: path.join(comp().compDatadir, String(comp().port)), port: comp().port, user: 'postgres', database: 'postgres' });
    admin.on('error', () => {});
    await admin.connect();
    const agent = new TableMoveAgentClient(`${comp().hostaddr}:${f.agentPort}`);
    const ref = { port: comp().port, database: 'postgres', schema: 'public', table: 'mv_quiet' };
    try {
      await admin.query(`SET kcm.sync = 'on'`);
      await admin.query(`CREATE TABLE public.mv_ddl_log (tag text, object text)`);
      await admin.query(`CREATE FUNCTION public.mv_log_end() RETURNS event_trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO public.mv_ddl_log SELECT tg_tag, object_identity FROM pg_event_trigger_ddl_commands(); END $$`);
      await admin.query(`CREATE FUNCTION public.mv_log_drop() RETURNS event_trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO public.mv_ddl_log SELECT tg_tag, object_identity FROM pg_event_trigger_dropped_objects(); END $$`);
      await admin.query(`CREATE EVENT TRIGGER mv_log_end ON ddl_command_end EXECUTE FUNCTION public.mv_log_end()`);
      await admin.query(`CREATE EVENT TRIGGER mv_log_drop ON sql_drop EXECUTE FUNCTION public.mv_log_drop()`);
      const leftovers = async () => (await admin.query(`SELECT relname FROM pg_class WHERE relname LIKE 'mv_quiet%kcm_move'`)).rows;
      // A hold that prepared the replacement (as the cut-over's do) and was released leaves nothing of it.
      const released = await agent.hold('quiet-0', ref, 10_000, `shard_${dst}`);
      expect(released.prepared).toBe(true);
      expect(await leftovers()).toEqual([]);
      await agent.release('quiet-0');
      expect(await leftovers()).toEqual([]);
      expect(await foreignServer('mv_quiet')).toBe(`shard_${src}`);
      const held = await agent.hold('quiet-1', ref, 10_000, `shard_${dst}`);
      expect(held.server).toBe(`shard_${src}`);
      expect(held.prepared).toBe(true);
      const repointed = await agent.repoint('quiet-1', `shard_${dst}`);
      expect(await leftovers()).toEqual([]);
      expect(repointed.held_ms).toBeGreaterThanOrEqual(held.lock_wait_ms);
      expect(await foreignServer('mv_quiet')).toBe(`shard_${dst}`);
      // (Only this table's objects: the agent's catalog sync may run meanwhile, triggers and all.)
      expect((await admin.query(`SELECT tag, object FROM public.mv_ddl_log WHERE object LIKE '%mv_quiet%'`)).rows).toEqual([]);
      // And back, so the compute node's table is where its rows are.
      await agent.hold('quiet-2', ref, 10_000);
      await agent.repoint('quiet-2', `shard_${src}`);
      expect(await foreignServer('mv_quiet')).toBe(`shard_${src}`);
      expect((await onComp<{ n: number }>('SELECT count(*)::int AS n FROM public.mv_quiet'))[0].n).toBe(SEEDED);
    } finally {
      agent.close();
      await admin.query('DROP EVENT TRIGGER IF EXISTS mv_log_end; DROP EVENT TRIGGER IF EXISTS mv_log_drop; DROP FUNCTION IF EXISTS public.mv_log_end(); DROP FUNCTION IF EXISTS public.mv_log_drop(); DROP TABLE IF EXISTS public.mv_ddl_log').catch(() => {});
      await admin.end();
    }
  }, 60_000);
});
