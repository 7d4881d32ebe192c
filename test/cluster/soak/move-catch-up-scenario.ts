// The move catch-up scenarios on real engines, shared by test/cluster/move-catch-up.test.ts
// (once each) and the soak (npm run soak:catch-up, the rotation move 20 times in a row):
// a one-member manager, three agents, a cluster of 2 shards x 3 MariaDB nodes and 1 compute
// node, the copy throttled (1,000 rows/s in 500-row chunks) so a test can act on the source
// between the recorded start position and the catch-up.
//
// The catch-up once stopped short of SHOW MASTER STATUS whenever the source's binlog ended
// with a rotation and then stayed idle (mariadb-binlog held the Rotate, Format_description,
// Gtid_list and Binlog_checkpoint text in its stdio buffer), which the binlog archiver's
// FLUSH BINARY LOGS of every master with new writes makes the common case.

import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { ClusterRecord } from '@kcm/manager';
import { openTestAccounts } from '../../helpers/secrets';
import { startClusterFixture, waitUntil, type ClusterFixture } from '../cluster-fixture';
import { clusterParas } from '../cluster-paras';
import { registerMachines } from '../ha-fixture';

export const DB = 'postgres_$$_public';
type Row = { v: number; note: string };
type Position = { file: string; pos: number };

export interface CatchUpCluster {
  f: ClusterFixture;
  clusterId: string;
  /** The two shard ids, in order. */
  shards(): string[];
  onShard<T>(shardId: string, sql: string, values?: unknown[]): Promise<T[]>;
  /** A session on the shard's master as the storage account (the caller ends it). */
  storageSession(shardId: string): Promise<mysql.Connection>;
  /** A statement as the shard master's admin (FLUSH BINARY LOGS, SHOW MASTER STATUS), over its socket. */
  asAdmin<T>(shardId: string, sql: string): Promise<T[]>;
  pgClient(): Promise<pg.Client>;
  foreignServer(table: string): Promise<string | undefined>;
  /** A table of `rows` rows (id, v = id, note = 'n<id>') on the shard, once the compute node shows it. */
  seedTable(shardId: string, table: string, rows: number): Promise<void>;
  tableRows(shardId: string, table: string): Promise<Map<number, Row>>;
  close(): Promise<void>;
}

export async function startCatchUpCluster(where: { agentPort: number; member: string }): Promise<CatchUpCluster> {
  const f = await startClusterFixture({ ...where, managerConfig: { moveCopyRowsPerSecond: 1_000, moveChunkRows: 500 } });
  let clusterId = '';
  let login = { user: '', password: '' };
  try {
    await registerMachines(f, [2]);
    const reply = await f.runJob('create_cluster', clusterParas({ nick_name: 'mcu', shards: '2' }), 300_000);
    if (reply.status !== 'done') throw new Error(`create_cluster: ${reply.error_info}`);
    const att = reply.attachment as { cluster_id: string; computer_user: string; computer_pwd: string };
    clusterId = att.cluster_id;
    login = { user: att.computer_user, password: att.computer_pwd };
  } catch (err) {
    await f.close();
    throw err;
  }
  const cluster = (): ClusterRecord => f.manager.store.state().clusters[clusterId];
  const masterOf = (shardId: string) => {
    const s = cluster().shards[shardId];
    return s.nodes[s.masterNodeId];
  };
  const storageSession = async (shardId: string) => {
    const m = masterOf(shardId);
    return mysql.createConnection({ host: m.hostaddr, port: m.port, ...openTestAccounts(cluster().accounts).storage });
  };
  const onShard = async <T>(shardId: string, sql: string, values: unknown[] = []): Promise<T[]> => {
    const c = await storageSession(shardId);
    try {
      return (await c.query(sql, values))[0] as T[];
    } finally {
      await c.end();
    }
  };
  const asAdmin = async <T>(shardId: string, sql: string): Promise<T[]> => {
    const m = masterOf(shardId);
    const admin = openTestAccounts(cluster().accounts).admin;
    const c = await mysql.createConnection({ socketPath: path.join(m.datadir, String(m.port), 'run', 'mariadbd.sock'), user: admin.user, password: admin.password });
    try {
      return (await c.query(sql))[0] as T[];
    } finally {
      await c.end();
    }
  };
  const pgClient = async () => {
    const comp = Object.values(cluster().comps)[0];
    const c = new pg.Client({ host: comp.hostaddr, port: comp.port, ...login, database: 'postgres' });
    c.on('error', () => {});
    await c.connect();
    return c;
  };
  const foreignServer = async (table: string) => {
    const c = await pgClient();
    try {
      const r = await c.query<{ srv: string }>(`SELECT s.srvname AS srv FROM pg_foreign_table ft JOIN pg_class c ON c.oid = ft.ftrelid JOIN pg_foreign_server s ON s.oid = ft.ftserver WHERE c.relname = $1`, [table]);
      return r.rows[0]?.srv;
    } finally {
      await c.end();
    }
  };
  return {
    f,
    clusterId,
    shards: () => Object.keys(cluster().shards).sort((a, b) => Number(a) - Number(b)),
    onShard,
    storageSession,
    asAdmin,
    pgClient,
    foreignServer,
    async seedTable(shardId, table, rows) {
      await onShard(shardId, `CREATE DATABASE IF NOT EXISTS \`${DB}\``);
      await onShard(shardId, `CREATE TABLE \`${DB}\`.${table} (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40)) ENGINE=InnoDB`);
      await onShard(shardId, `INSERT INTO \`${DB}\`.${table} SELECT seq, seq, CONCAT('n', seq) FROM \`${DB}\`.seq_1_to_${rows}`);
      await waitUntil(`${table} on the compute node`, async () => ((await foreignServer(table)) === `shard_${shardId}` ? true : undefined), 30_000);
    },
    async tableRows(shardId, table) {
      return new Map((await onShard<{ id: number; v: number; note: string }>(shardId, `SELECT id, v, note FROM \`${DB}\`.${table}`)).map((r) => [r.id, { v: r.v, note: r.note }]));
    },
    close: () => f.close(),
  };
}

/** The newest expand_cluster job submitted after `jobsBefore` (by counter). */
function jobAfter(c: CatchUpCluster, jobsBefore: number) {
  return Object.values(c.f.manager.store.state().jobs).find((j) => j.jobType === 'expand_cluster' && Number(j.id) > jobsBefore);
}

/** Waits until the job has recorded step `step` (0-based), polling the replicated state every 5 ms. */
async function stepRecorded(c: CatchUpCluster, jobsBefore: number, step: number, timeoutMs: number): Promise<void> {
  await waitUntil(`expand_cluster step ${step + 1} recorded`, async () => {
    const job = jobAfter(c, jobsBefore);
    if (job?.result && !(step in job.stepOutputs)) throw new Error(`the job ended (${job.status}) before step ${step + 1}`);
    return job && step in job.stepOutputs ? true : undefined;
  }, timeoutMs, 5);
}

const copyDone = (c: CatchUpCluster, jobsBefore: number) => 1 in (jobAfter(c, jobsBefore)?.stepOutputs ?? {});

export const masterStatus = async (c: CatchUpCluster, shardId: string): Promise<Position> => {
  const [s] = await c.asAdmin<{ File: string; Position: number | string }>(shardId, 'SHOW MASTER STATUS');
  return { file: s.File, pos: Number(s.Position) };
};

const binlogNumber = (file: string) => Number(file.slice(file.lastIndexOf('.') + 1));

export interface NoLoadOutcome {
  status: string;
  error: string;
  /** The recorded start of each table's catch-up and the source's binlog end after the flush. */
  starts: Position[];
  end: Position;
  /** For each table: the rows on the destination equal the source's (renamed aside) row for row. */
  differing: string[];
}

/**
 * The report's case: expand_cluster of three tables with no load. Once the start positions
 * are recorded the source master's binlog is rotated (as the binlog archiver does after
 * writes) and nothing is written after: the catch-up must reach the end of the new file.
 */
export async function expandThreeTablesWithNoLoad(c: CatchUpCluster, tables: string[], rows: number): Promise<NoLoadOutcome> {
  const [src, dst] = c.shards();
  for (const t of tables) await c.seedTable(src, t, rows);
  const jobsBefore = c.f.manager.store.state().counters.job;
  const running = c.f.runJob('expand_cluster', { cluster_id: c.clusterId, src_shard_id: src, dst_shard_id: dst, table_list: tables.map((t) => `postgres.public.${t}`), drop_old_table: '0' }, 300_000);
  await stepRecorded(c, jobsBefore, 0, 60_000);
  await c.asAdmin(src, 'FLUSH BINARY LOGS');
  if (copyDone(c, jobsBefore)) throw new Error('the copy ended before the source binlog was rotated: the scenario needs a slower copy');
  const end = await masterStatus(c, src);
  const reply = await running;
  const starts = (jobAfter(c, jobsBefore)!.stepOutputs[0] as { start: Position }[]).map((p) => p.start);
  const differing: string[] = [];
  if (reply.status === 'done') {
    const result = reply.attachment as { list_table: { old_table: string }[] };
    for (const [i, t] of tables.entries()) {
      const moved = await c.tableRows(dst, t);
      const aside = await c.tableRows(src, result.list_table[i].old_table.split('.')[1]);
      if (moved.size !== rows || JSON.stringify([...moved].sort((a, b) => a[0] - b[0])) !== JSON.stringify([...aside].sort((a, b) => a[0] - b[0]))) differing.push(t);
    }
  }
  return { status: reply.status, error: reply.error_info ?? '', starts, end, differing };
}

export interface RotationMoveOutcome {
  status: string;
  error: string;
  /** Binlog rotations the catch-up logged for this move. */
  rotationsCrossed: number;
  /** The source's binlog files at the hold and after the last rotation. */
  filesAtHold: string;
  endAfterIdle: Position;
  /** The catch-up's applied position when the cut-over finished. */
  cutOverAt: Position | null;
  /** From the release of the hold: until the last write before the last rotation was on the destination, and until the job ended. */
  catchUpMs: number;
  doneMs: number;
  /** Rows that differ between the destination and what the writes made, by id. */
  differences: string[];
  rows: number;
}

/**
 * A move whose catch-up crosses three binlog rotations and an idle spell, all while the
 * catch-up runs: during the throttled copy a row is changed on the source and then
 * row-locked by a test session, so the catch-up, once it reads that change, waits in its
 * re-copy (a locking read) with mariadb-binlog live on the source. Meanwhile: writes through
 * the compute node, FLUSH BINARY LOGS, writes, FLUSH, writes, FLUSH, then nothing for
 * `idleMs`. The lock is released (a rollback: nothing more in the binlog) and the move must
 * finish, its cut-over waiting for the source position after the last rotation.
 */
export async function moveAcrossRotations(c: CatchUpCluster, table: string, from: string, to: string, expected: Map<number, Row>, opts: { idleMs: number; round: number }): Promise<RotationMoveOutcome> {
  const jobsBefore = c.f.manager.store.state().counters.job;
  const logsBefore = c.f.logLines.length;
  const running = c.f.runJob('expand_cluster', { cluster_id: c.clusterId, src_shard_id: from, dst_shard_id: to, table_list: [`postgres.public.${table}`], drop_old_table: '1' }, 300_000);
  await stepRecorded(c, jobsBefore, 0, 60_000);
  // The row the catch-up will wait on: changed after the recorded start, then locked.
  const held = [...expected.keys()].sort((a, b) => a - b)[0];
  const m = await c.storageSession(from);
  const pgc = await c.pgClient();
  let released = 0;
  try {
    const heldValue = -1000 - opts.round;
    await m.query(`UPDATE \`${DB}\`.${table} SET v = ? WHERE id = ?`, [heldValue, held]);
    expected.set(held, { ...expected.get(held)!, v: heldValue });
    await m.query('START TRANSACTION');
    await m.query(`SELECT v FROM \`${DB}\`.${table} WHERE id = ? FOR UPDATE`, [held]);
    if (copyDone(c, jobsBefore)) throw new Error('the copy ended before the hold was in place: the scenario needs a slower copy');
    // Evidence that the catch-up runs and waits on the held row.
    await waitUntil('the catch-up waiting on the held row', async () => {
      const waiting = await c.onShard<{ n: number }>(from, `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND INFO LIKE '%LOCK IN SHARE MODE%' AND INFO LIKE ?`, [`%${table}%`]);
      return Number(waiting[0].n) > 0 ? true : undefined;
    }, 60_000, 20);
    const filesAtHold = (await masterStatus(c, from)).file;
    // Three rotations with writes between, through the compute node (they reach the source shard).
    let lastWriteId = 0;
    for (let r = 1; r <= 3; r++) {
      const base = 1_000_000 + opts.round * 1000 + r * 10;
      for (let j = 1; j <= 3; j++) {
        await pgc.query(`INSERT INTO public.${table} (id, v, note) VALUES ($1, $2, $3)`, [base + j, r, `r${opts.round}.${r}.${j}`]);
        expected.set(base + j, { v: r, note: `r${opts.round}.${r}.${j}` });
        lastWriteId = base + j;
      }
      const ids = [...expected.keys()].filter((id) => id !== held && id < 1_000_000).sort((a, b) => a - b);
      const updated = ids[r];
      await pgc.query(`UPDATE public.${table} SET v = v + 100 WHERE id = $1`, [updated]);
      expected.set(updated, { ...expected.get(updated)!, v: expected.get(updated)!.v + 100 });
      const deleted = ids[ids.length - 1 - r];
      await pgc.query(`DELETE FROM public.${table} WHERE id = $1`, [deleted]);
      expected.delete(deleted);
      await c.asAdmin(from, 'FLUSH BINARY LOGS');
    }
    // The idle spell: no transaction written (the server itself still adds the new file's
    // second Binlog_checkpoint a moment after the rotation: the binlog's end moves, its GTIDs do not).
    const gtids = async () => (await c.asAdmin<{ g: string }>(from, 'SELECT @@gtid_binlog_pos AS g'))[0].g;
    const gtidsAfterRotations = await gtids();
    await new Promise((r) => setTimeout(r, opts.idleMs));
    const endAfterIdle = await masterStatus(c, from);
    if ((await gtids()) !== gtidsAfterRotations) throw new Error(`the source was written during the idle spell: ${gtidsAfterRotations} -> ${await gtids()}`);
    await m.query('ROLLBACK');
    released = Date.now();
    // Catch-up figure: the last write before the last rotation reaches the destination.
    const d = await c.storageSession(to);
    let catchUpMs = -1;
    try {
      await waitUntil('the last write on the destination', async () => {
        const [rows] = (await d.query(`SELECT 1 FROM \`${DB}\`.${table} WHERE id = ?`, [lastWriteId])) as unknown as [unknown[]];
        return rows.length > 0 ? true : undefined;
      }, 150_000, 5);
      catchUpMs = Date.now() - released;
    } catch {
      catchUpMs = -1;
    } finally {
      await d.end();
    }
    const reply = await running;
    const doneMs = Date.now() - released;
    const job = jobAfter(c, jobsBefore)!;
    const cutOver = (job.stepOutputs[4] as { at: Position }[] | undefined)?.[0]?.at ?? null;
    const rotationsCrossed = c.f.logLines
      .slice(logsBefore)
      .filter((l) => l.includes('move catch-up crossed a binlog rotation') && l.includes(`${DB}.${table}`)).length;
    const differences: string[] = [];
    let rows = 0;
    if (reply.status === 'done') {
      const moved = await c.tableRows(to, table);
      rows = moved.size;
      for (const [id, want] of expected) {
        const got = moved.get(id);
        if (!got || got.v !== want.v || got.note !== want.note) differences.push(`${id}: want ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
      }
      for (const id of moved.keys()) if (!expected.has(id)) differences.push(`${id}: on the destination, not written`);
    }
    return { status: reply.status, error: reply.error_info ?? '', rotationsCrossed, filesAtHold, endAfterIdle, cutOverAt: cutOver, catchUpMs, doneMs, differences, rows };
  } finally {
    if (!released) await m.query('ROLLBACK').catch(() => {});
    await m.end().catch(() => {});
    await pgc.end().catch(() => {});
  }
}

/** Whether `a` is at or past `b` (files by number). */
export function atOrPastPosition(a: Position, b: Position): boolean {
  if (a.file !== b.file) return binlogNumber(a.file) > binlogNumber(b.file);
  return a.pos >= b.pos;
}

/** The rows a seeded table holds: id 1..n, v = id, note = 'n<id>'. */
export function seededRows(n: number): Map<number, Row> {
  return new Map(Array.from({ length: n }, (_, i) => [i + 1, { v: i + 1, note: `n${i + 1}` }]));
}
