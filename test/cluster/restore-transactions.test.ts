// A point-in-time restore taken in the middle of cross-shard transfers, on real engines
// (issue 30 Build 5; DESIGN.md section 12: "a point-in-time restore applies the same rule as
// of T"; README "Point-in-time restore"). A source cluster of 2 shards gets a full backup,
// then 4 clients make transfers through its compute node, each moving money from acct_a
// (shard 1, the coordinator) to acct_b (shard 2, an XA branch) and writing its id into
// ledger_a and ledger_b in the same transaction. Two transfers are held across T at kcm_ddl's
// test-only fault points: one prepared before T and decided after it, one decided before T
// with its branch committed after it. cluster_restore to T into a second cluster; on the
// destination's shard masters ledger_a and ledger_b hold exactly the same ids (no transfer
// split), every balance is what those ids say and the total is exact, every transfer
// acknowledged before T is there and none begun at or after T is, the first held transfer
// is rolled back and the second committed by the restore, and no kcm XA branch stays
// prepared on any destination node.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import path from 'node:path';
import { emitRaw, waitForJobEnd } from '../helpers/emit-client';
import { sleep } from '../manager/helpers/processes';
import { HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { registerMachines } from './machines';
import { createSqlCluster, type Endpoint, type SqlCluster } from './sql-fixture';
import { compSessionWithFault, createAccounts, holdCommitGate, pinTable, preparedKcmBranches, rowsOnMaster } from './transactions-fixture';

const AGENT_PORT = 58164;
const MEMBER = '127.0.1.64:58165';
/** Accounts the clients move money between; two more are the held transfers' own. */
const ACCOUNTS = 8;
const START = 100_000;
const CLIENTS = 4;
const HELD_ROLLED_BACK = { id: 1_000_001, account: ACCOUNTS + 1 };
const HELD_COMMITTED = { id: 1_000_002, account: ACCOUNTS + 2 };
const DB = '`postgres_$$_public`';

interface Transfer {
  id: number;
  from: number;
  to: number;
  startedMs: number;
  /** When the client saw COMMIT answered; undefined when it failed. */
  committedMs?: number;
}

/** Moves 1 from acct_a(from) to acct_b(to) and writes the transfer's id into both ledgers, in one transaction. */
async function transferWithLedger(c: pg.Client, t: Pick<Transfer, 'id' | 'from' | 'to'>): Promise<void> {
  await c.query('BEGIN');
  try {
    await c.query('update acct_a set money = money - 1 where id = $1', [t.from]);
    await c.query('insert into ledger_a values ($1)', [t.id]);
    await c.query('update acct_b set money = money + 1 where id = $1', [t.to]);
    await c.query('insert into ledger_b values ($1)', [t.id]);
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

describe('cluster_restore to a time T in the middle of cross-shard transfers (real engines)', () => {
  let f: ClusterFixture;
  let src: SqlCluster;
  let dst: SqlCluster;
  let restoreTime = 0;
  const transfers: Transfer[] = [];

  beforeAll(async () => {
    // The in-doubt resolver waits 120 s: the held transfers are live, and their second phase
    // must come from their compute node after T, not from the source's resolver before it.
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER, managerConfig: { xaInDoubtAfterMs: 120_000 } });
    // Two clusters of 6 storage nodes, each with a 1-core quota: 4 cores a host (placement
    // takes turns, so the second cluster sees the first one's quotas).
    await registerMachines(f, { totalCpuCores: '4' });
    const storage = await f.runJob('create_backup_storage', { name: 'txn', stype: 'fs', hostaddr: HOSTS[2], port: String(AGENT_PORT), path: path.join(f.tmp, 'backups') }, 30_000);
    expect(storage.status, storage.error_info).toBe('done');
    [src, dst] = await Promise.all([
      createSqlCluster(f, { nick_name: 'source', comps: '1' }),
      createSqlCluster(f, { nick_name: 'restored', comps: '1' }),
    ]);
    const ids = Object.keys(src.cluster().shards).sort((a, b) => Number(a) - Number(b));
    const c = await src.pgAs(src.comps()[0]);
    try {
      await createAccounts(c, ids, ACCOUNTS + 2, START);
      await pinTable(c, ids[0], 'create table ledger_a(id bigint primary key)');
      await pinTable(c, ids[1], 'create table ledger_b(id bigint primary key)');
    } finally {
      await c.end();
    }
  }, 400_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  /** Rows of `sql` on every node of shard i of a cluster (storage account). */
  async function onNodes<T>(s: SqlCluster, i: number, sql: string): Promise<T[][]> {
    const shard = Object.values(s.cluster().shards).sort((a, b) => Number(a.id) - Number(b.id))[i];
    const nodes: Endpoint[] = Object.values(shard.nodes).map((n) => ({ host: n.hostaddr, port: n.port }));
    return Promise.all(nodes.map(async (at) => {
      const m = await s.mysqlAs(at);
      try {
        return ((await m.query(sql)) as unknown as [T[]])[0];
      } finally {
        await m.end();
      }
    }));
  }
  const ledger = async (s: SqlCluster, i: number, table: string) => (await rowsOnMaster<{ id: number | string }>(s, i, `SELECT id FROM ${DB}.${table} ORDER BY id`)).map((r) => Number(r.id));
  const moneyOf = async (s: SqlCluster, i: number, table: string) => new Map((await rowsOnMaster<{ id: number; money: number | string }>(s, i, `SELECT id, money FROM ${DB}.${table}`)).map((r) => [Number(r.id), Number(r.money)]));
  const decisionRows = async (s: SqlCluster) => Number((await rowsOnMaster<{ n: number }>(s, 0, 'SELECT COUNT(*) AS n FROM kcm_sys.xa_decisions'))[0].n);

  it('a full backup of the source ends done', async () => {
    const reply = await f.runJob('manual_backup_cluster', { cluster_id: src.cluster().id }, 180_000);
    expect(reply.status, reply.error_info).toBe('done');
  }, 200_000);

  it('4 clients make cross-shard transfers for a few seconds; two transfers are held across T, one before its decision and one after it', async () => {
    const comp = Object.values(src.cluster().comps)[0];
    const gateKeeper = await src.pgAs(src.comps()[0]);
    const gate = await holdCommitGate(gateKeeper);
    const held = await Promise.all([compSessionWithFault(comp, src.computeUser, 'pause_after_prepare'), compSessionWithFault(comp, src.computeUser, 'pause_after_decision')]);
    const clients = await Promise.all(Array.from({ length: CLIENTS }, () => src.pgAs(src.comps()[0])));
    try {
      const heldTransfers = [HELD_ROLLED_BACK, HELD_COMMITTED].map(({ id, account }, k) => transferWithLedger(held[k], { id, from: account, to: account }));
      for (const t of heldTransfers) t.catch(() => {}); // awaited below, unless an earlier step fails
      // Both stopped at their gates before the clients start: both branches prepared on
      // shard 2, and the second transfer's decision committed on shard 1.
      await waitUntil('both held transfers at their gates', async () => ((await preparedKcmBranches(src, 1)).length === 2 && (await decisionRows(src)) === 1 ? true : undefined), 15_000, 50);

      let stop = false;
      let nextId = 1;
      const running = clients.map(async (c) => {
        while (!stop) {
          const id = nextId++;
          const t: Transfer = { id, from: 1 + (id % ACCOUNTS), to: 1 + ((id * 3) % ACCOUNTS), startedMs: Date.now() };
          transfers.push(t);
          try {
            await transferWithLedger(c, t);
            t.committedMs = Date.now();
          } catch {
            // A failed transfer leaves nothing; the ledgers say so. (A pause: a client whose
            // connection is gone fails at once, and must not starve the timers.)
            await sleep(20);
          }
        }
      });
      try {
        await sleep(2500);
        // T is a whole second (binlog event times are): every shard statement begun before it
        // is stamped before it, every one begun at or after it is not replayed.
        restoreTime = Math.floor(Date.now() / 1000) + 1;
        await sleep(restoreTime * 1000 + 1100 - Date.now());
        // Still held past T: the first undecided, the second's branch prepared.
        expect((await preparedKcmBranches(src, 1)).length).toBeGreaterThanOrEqual(2);
        await gate.open();
        await Promise.all(heldTransfers);
        await sleep(2000);
      } finally {
        stop = true;
        await Promise.allSettled(running);
      }
    } finally {
      await Promise.all([...clients, ...held, gateKeeper].map((c) => c.end()));
    }
    const committed = transfers.filter((t) => t.committedMs !== undefined);
    const straddling = transfers.filter((t) => t.startedMs < restoreTime * 1000 && (t.committedMs ?? Infinity) >= restoreTime * 1000);
    console.log(`${transfers.length} transfers, ${committed.length} committed; ${straddling.length} begun before T and not acknowledged by then`);
    expect(committed.filter((t) => t.committedMs! < restoreTime * 1000).length).toBeGreaterThan(20);
    expect(transfers.filter((t) => t.startedMs >= restoreTime * 1000).length).toBeGreaterThan(20);
    // The source itself: both held transfers committed, every ledger id on both shards.
    const [a, b] = [await ledger(src, 0, 'ledger_a'), await ledger(src, 1, 'ledger_b')];
    expect(a).toEqual(b);
    expect(a).toEqual(expect.arrayContaining([HELD_ROLLED_BACK.id, HELD_COMMITTED.id]));
    expect(await preparedKcmBranches(src, 1)).toEqual([]);
  }, 120_000);

  it('cluster_restore to T ends done and ends the two held transfers by their decision as of T', async () => {
    const paras = { src_cluster_id: src.cluster().id, dst_cluster_id: dst.cluster().id, restore_time: String(restoreTime) };
    const deadline = Date.now() + 30_000;
    let jobId: string;
    for (;;) {
      const ack = await emitRaw(MEMBER, 'cluster_restore', paras);
      if (ack.error_code === '0') {
        jobId = ack.job_id;
        break;
      }
      if (!/beyond the archived binlogs/.test(ack.error_info) || Date.now() > deadline) throw new Error(`cluster_restore refused: ${ack.error_info}`);
      await sleep(500);
    }
    const started = Date.now();
    const reply = await waitForJobEnd([MEMBER], jobId, 240_000);
    console.log(`cluster_restore (2 shards x 3 nodes) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(reply.status, reply.error_info).toBe('done');
    // The fault landed: branches were left prepared by the replay, and the restore ended them,
    // at least one by a decision replayed from before T and one for want of it.
    const shards = (reply.attachment as { list_shard: { xa_committed: string; xa_rolled_back: string }[] }).list_shard;
    console.log(`branches ended by the restore: ${JSON.stringify(shards.map((s) => ({ committed: s.xa_committed, rolled_back: s.xa_rolled_back })))}`);
    expect(shards.reduce((n, s) => n + Number(s.xa_committed), 0)).toBeGreaterThanOrEqual(1);
    expect(shards.reduce((n, s) => n + Number(s.xa_rolled_back), 0)).toBeGreaterThanOrEqual(1);
  }, 300_000);

  it('on the destination no transfer is split, the total is exact, and the transfers are those of the source as of T', async () => {
    // No kcm branch prepared on any destination node (the standbys end theirs by replication).
    await waitUntil('no kcm XA branch prepared on the destination', async () => {
      const left = await Promise.all([0, 1].map((i) => onNodes<{ formatID: number }>(dst, i, 'XA RECOVER')));
      return left.flat(2).filter((r) => Number(r.formatID) === 7037805).length === 0 ? true : undefined;
    }, 30_000);
    const [a, b] = [await ledger(dst, 0, 'ledger_a'), await ledger(dst, 1, 'ledger_b')];
    // All or nothing: each transfer's two halves came back together, or neither did.
    expect(a).toEqual(b);
    const present = new Set(a);
    expect(present.has(HELD_COMMITTED.id)).toBe(true); // decided before T, branch committed by the restore
    expect(present.has(HELD_ROLLED_BACK.id)).toBe(false); // prepared before T, decided after it
    const byId = new Map(transfers.map((t) => [t.id, t]));
    const T = restoreTime * 1000;
    const missing = transfers.filter((t) => t.committedMs !== undefined && t.committedMs < T && !present.has(t.id)).map((t) => t.id);
    const late = transfers.filter((t) => t.startedMs >= T && present.has(t.id)).map((t) => t.id);
    expect({ missing, late }).toEqual({ missing: [], late: [] });
    // Every balance is what the restored ledger says, and the total is exact.
    const expectedA = new Map(Array.from({ length: ACCOUNTS + 2 }, (_, i) => [i + 1, START]));
    const expectedB = new Map(expectedA);
    for (const id of present) {
      const t = id === HELD_COMMITTED.id ? { from: HELD_COMMITTED.account, to: HELD_COMMITTED.account } : byId.get(id)!;
      expectedA.set(t.from, expectedA.get(t.from)! - 1);
      expectedB.set(t.to, expectedB.get(t.to)! + 1);
    }
    const [moneyA, moneyB] = [await moneyOf(dst, 0, 'acct_a'), await moneyOf(dst, 1, 'acct_b')];
    expect(moneyA).toEqual(expectedA);
    expect(moneyB).toEqual(expectedB);
    expect([...moneyA.values(), ...moneyB.values()].reduce((x, y) => x + y, 0)).toBe(2 * (ACCOUNTS + 2) * START);
    // The decisions as of T are on the destination's coordinator: the replayed commit of the
    // second held transfer, and the abort the restore recorded for the first.
    const rows = await rowsOnMaster<{ outcome: string }>(dst, 0, 'SELECT outcome FROM kcm_sys.xa_decisions');
    expect(rows.filter((r) => r.outcome === 'abort').length).toBeGreaterThanOrEqual(1);
    console.log(`restored: ${present.size} transfers of ${transfers.length} (${transfers.filter((t) => t.committedMs !== undefined && t.committedMs < T).length} acknowledged before T)`);
  }, 60_000);
});
