// What the transaction tests share: tables pinned to a shard, account balances read on the
// shard masters themselves, a transfer through a compute node, and a compute-node session
// with one of kcm_ddl's test-only fault points set (superuser-only, so it is set over the
// node's socket as its superuser before the session becomes the compute account).

import path from 'node:path';
import pg from 'pg';
import type { CompRecord } from '@kcm/manager';
import type { SqlCluster } from './sql-fixture';

/** Runs a CREATE TABLE with kcm.shard naming the shard it must go to. */
export async function pinTable(c: pg.Client, shardId: string, createTable: string): Promise<void> {
  await c.query(`SET kcm.shard = '${shardId}'`);
  try {
    await c.query(createTable);
  } finally {
    await c.query('RESET kcm.shard');
  }
}

/** The rows of one statement run on shard i's master with the storage account. */
export async function rowsOnMaster<T>(s: SqlCluster, shardIndex: number, sql: string): Promise<T[]> {
  const m = await s.mysqlAs(s.masters()[shardIndex]);
  try {
    return ((await m.query(sql)) as unknown as [T[]])[0];
  } finally {
    await m.end();
  }
}

/** acct_a on the first shard and acct_b on the second, accounts 1..perShard holding money each. */
export async function createAccounts(c: pg.Client, shardIds: string[], perShard: number, money: number): Promise<void> {
  await pinTable(c, shardIds[0], 'create table acct_a(id int primary key, money bigint not null)');
  await pinTable(c, shardIds[1], 'create table acct_b(id int primary key, money bigint not null)');
  for (const t of ['acct_a', 'acct_b']) await c.query(`insert into ${t} select g, ${money} from generate_series(1, ${perShard}) g`);
}

/** Every account's money, read on the shard masters: `a<id>` from acct_a (shard 1), `b<id>` from acct_b (shard 2). */
export async function balances(s: SqlCluster): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const [i, table] of [[0, 'acct_a'], [1, 'acct_b']] as const) {
    const rows = await rowsOnMaster<{ id: number; money: string }>(s, i, `SELECT id, money FROM \`postgres_$$_public\`.${table} ORDER BY id`);
    for (const r of rows) out.set(`${table.slice(-1)}${r.id}`, Number(r.money));
  }
  return out;
}

export async function moneyOnShards(s: SqlCluster): Promise<number> {
  return [...(await balances(s)).values()].reduce((a, b) => a + b, 0);
}

/** Runs work inside BEGIN ... COMMIT on a compute node; rolls back and rethrows on error. */
export async function inTransaction(c: pg.Client, work: () => Promise<unknown>): Promise<void> {
  await c.query('BEGIN');
  try {
    await work();
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

/** Moves amount from acct_a(from) on shard 1 to acct_b(to) on shard 2 in one transaction; rolls back and rethrows on error. */
export async function transfer(c: pg.Client, from: number, to: number, amount: number): Promise<void> {
  await inTransaction(c, async () => {
    await c.query('update acct_a set money = money - $1 where id = $2', [amount, from]);
    await c.query('update acct_b set money = money + $1 where id = $2', [amount, to]);
  });
}

/** True when nobody holds the row's lock on the shard master (a locking read that does not wait). */
export async function rowLockIsFree(s: SqlCluster, shardIndex: number, table: string, id: number): Promise<boolean> {
  const m = await s.mysqlAs(s.masters()[shardIndex]);
  try {
    await m.query('START TRANSACTION');
    await m.query(`SELECT id FROM \`postgres_$$_public\`.${table} WHERE id = ? FOR UPDATE NOWAIT`, [id]);
    return true;
  } catch {
    return false;
  } finally {
    await m.query('ROLLBACK').catch(() => {});
    await m.end();
  }
}

/**
 * Holds the advisory lock the pause_* fault points wait on (kcm_ddl's shard_transactions.c):
 * a commit with such a fault set stops there until `open()` is called.
 */
export async function holdCommitGate(c: pg.Client): Promise<{ open: () => Promise<void> }> {
  await c.query('SELECT pg_advisory_lock(7037805)');
  return { open: async () => void (await c.query('SELECT pg_advisory_unlock(7037805)')) };
}

/** A session on the compute node with kcm.transaction_fault set, acting as the compute account. */
export async function compSessionWithFault(comp: CompRecord, computeUser: string, fault: string): Promise<pg.Client> {
  // The superuser logs in only over the node's socket, as the agent's OS user (root here).
  const c = new pg.Client({ host: path.join(comp.compDatadir, String(comp.port)), port: comp.port, user: 'postgres', database: 'postgres' });
  c.on('error', () => {});
  await c.connect();
  await c.query(`SET kcm.transaction_fault = '${fault}'`);
  await c.query(`SET ROLE ${pg.escapeIdentifier(computeUser)}`);
  return c;
}

/** The kcm XA branches (formatID 7037805) prepared on shard i's master, as gtrid+bqual. */
export async function preparedKcmBranches(s: SqlCluster, shardIndex: number): Promise<string[]> {
  const rows = await rowsOnMaster<{ formatID: number; data: string | Buffer }>(s, shardIndex, 'XA RECOVER');
  return rows.filter((r) => Number(r.formatID) === 7037805).map((r) => String(r.data));
}
