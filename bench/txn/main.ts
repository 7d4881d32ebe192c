// npm run bench:txn -- [--seconds 15] [--clients 4] [--accounts 1000]
//
// Transactions through compute nodes against the same transactions sent straight to the
// shard masters, in the same run, on real engines (issue 30): a 2-shard x 3-node,
// 2-compute-node cluster (test/cluster/sql-fixture.ts), accounts in acct_a (shard 1) and
// acct_b (shard 2), `--clients` concurrent clients for `--seconds` each way:
//
//  1. cross-shard transfer through compute nodes (clients spread over both):
//     BEGIN; UPDATE acct_a ... - 50; UPDATE acct_b ... + 50; COMMIT   (kcm's two-phase commit)
//  2. the same transfer as XA sent by the client straight to both masters, as a user would
//     script it: XA START / UPDATE / XA END / XA PREPARE on each, then XA COMMIT on each;
//  3. single-shard transaction through compute nodes: BEGIN; two UPDATEs of acct_a; COMMIT;
//  4. the same straight to shard 1's master: START TRANSACTION; two UPDATEs; COMMIT.
//
// It prints transactions/s, p50 and p99 latency each way, the ratio (compute node /
// direct), and the statements each shard master received per transaction (Questions).
// Accounts are picked at random, acct_a's row always locked before acct_b's, so there are
// no deadlocks. The money total is checked at the end.
//
// Run it under the system lock (it uses the fixed test addresses):
//   flock /tmp/kcm-system.lock npm run bench:txn

import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import type mysql from 'mysql2/promise';
import type pg from 'pg';
import { waitUntil } from '../../test/cluster/cluster-fixture';
import { startSqlCluster, type SqlCluster } from '../../test/cluster/sql-fixture';
import { createAccounts, inTransaction, moneyOnShards, transfer } from '../../test/cluster/transactions-fixture';

const { values: flags } = parseArgs({
  options: { seconds: { type: 'string', default: '15' }, clients: { type: 'string', default: '4' }, accounts: { type: 'string', default: '1000' } },
});
const SECONDS = Number(flags.seconds);
const CLIENTS = Number(flags.clients);
const ACCOUNTS = Number(flags.accounts);
const START = 1000;

interface Figures {
  done: number;
  failed: number;
  perSec: number;
  p50: number;
  p99: number;
  questions: number[];
}

const pick = () => 1 + Math.floor(Math.random() * ACCOUNTS);

async function questions(masters: mysql.Connection[]): Promise<number[]> {
  return Promise.all(masters.map(async (m) => {
    const [[row]] = (await m.query("SHOW GLOBAL STATUS LIKE 'Questions'")) as unknown as [{ Value: string }[]];
    return Number(row.Value);
  }));
}

/** Runs `one` in `clients` loops for SECONDS; latency per transaction, failures counted. */
async function run(name: string, clients: number, one: (client: number) => Promise<void>, counters: mysql.Connection[]): Promise<Figures> {
  const latencies: number[] = [];
  let failed = 0;
  const q0 = await questions(counters);
  const started = Date.now();
  const until = started + SECONDS * 1000;
  await Promise.all(Array.from({ length: clients }, async (_, k) => {
    while (Date.now() < until) {
      const t = process.hrtime.bigint();
      try {
        await one(k);
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      } catch (err) {
        failed++;
        if (failed <= 3) console.log(`  ${name}: ${(err as Error).message}`);
      }
    }
  }));
  const seconds = (Date.now() - started) / 1000;
  const q1 = await questions(counters);
  // The counter reads themselves count one Question each on every master.
  const questionsPerTxn = q1.map((v, i) => (v - q0[i] - 1) / Math.max(1, latencies.length));
  latencies.sort((a, b) => a - b);
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  return { done: latencies.length, failed, perSec: latencies.length / seconds, p50: at(0.5), p99: at(0.99), questions: questionsPerTxn };
}

function line(name: string, f: Figures): string {
  return `${name.padEnd(36)} ${f.perSec.toFixed(0).padStart(6)} txn/s  p50 ${f.p50.toFixed(2).padStart(6)} ms  p99 ${f.p99.toFixed(2).padStart(6)} ms  ` +
    `(${f.done} done, ${f.failed} failed; shard statements per txn ${f.questions.map((q) => q.toFixed(1)).join(' + ')})`;
}

function transferViaCompute(c: pg.Client): Promise<void> {
  return transfer(c, pick(), pick(), 50);
}

async function transferAsXa(a: mysql.Connection, b: mysql.Connection): Promise<void> {
  const xid = `'bench-${randomBytes(8).toString('hex')}'`;
  let prepared = false;
  try {
    await a.query(`XA START ${xid}`);
    await a.execute('UPDATE acct_a SET money = money - 50 WHERE id = ?', [pick()]);
    await a.query(`XA END ${xid}`);
    await b.query(`XA START ${xid}`);
    await b.execute('UPDATE acct_b SET money = money + 50 WHERE id = ?', [pick()]);
    await b.query(`XA END ${xid}`);
    await a.query(`XA PREPARE ${xid}`);
    await b.query(`XA PREPARE ${xid}`);
    prepared = true;
    await a.query(`XA COMMIT ${xid}`);
    await b.query(`XA COMMIT ${xid}`);
  } catch (err) {
    if (!prepared) {
      await a.query(`XA END ${xid}`).catch(() => {});
      await a.query(`XA ROLLBACK ${xid}`).catch(() => {});
      await b.query(`XA END ${xid}`).catch(() => {});
      await b.query(`XA ROLLBACK ${xid}`).catch(() => {});
    }
    throw err;
  }
}

function singleShardViaCompute(c: pg.Client): Promise<void> {
  const [x, y] = [pick(), pick()].sort((p, q) => p - q);
  return inTransaction(c, async () => {
    await c.query('update acct_a set money = money - 1 where id = $1', [x]);
    await c.query('update acct_a set money = money + 1 where id = $1', [y]);
  });
}

async function singleShardDirect(a: mysql.Connection): Promise<void> {
  const [x, y] = [pick(), pick()].sort((p, q) => p - q);
  await a.query('START TRANSACTION');
  try {
    await a.execute('UPDATE acct_a SET money = money - 1 WHERE id = ?', [x]);
    await a.execute('UPDATE acct_a SET money = money + 1 WHERE id = ?', [y]);
    await a.query('COMMIT');
  } catch (err) {
    await a.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

async function main(): Promise<void> {
  console.log(`bench:txn: starting a 2-shard, 2-compute-node cluster (${CLIENTS} clients, ${SECONDS} s each way, ${ACCOUNTS} accounts per shard)`);
  let s: SqlCluster | undefined;
  try {
    s = await startSqlCluster();
    const ids = Object.keys(s.cluster().shards);
    const setup = await s.pgAs(s.comps()[0]);
    await createAccounts(setup, ids, ACCOUNTS, START);
    await setup.end();
    const sql = s;
    // The catalog sync shows the tables on compute node 2 within a round.
    for (const at of sql.comps()) {
      await waitUntil(`acct_a and acct_b on ${at.host}:${at.port}`, async () => {
        const c = await sql.pgAs(at);
        try {
          const { rows } = await c.query(`SELECT count(*)::int AS n FROM pg_class WHERE relname IN ('acct_a', 'acct_b')`);
          return rows[0].n === 2 ? true : undefined;
        } finally {
          await c.end();
        }
      }, 15_000);
    }
    const comps = await Promise.all(Array.from({ length: CLIENTS }, (_, k) => sql.pgAs(sql.comps()[k % 2])));
    const direct = await Promise.all(Array.from({ length: CLIENTS }, async () => {
      const [a, b] = await Promise.all(sql.masters().map((m) => sql.mysqlAs(m)));
      await a.query('USE `postgres_$$_public`');
      await b.query('USE `postgres_$$_public`');
      return { a, b };
    }));
    const counters = await Promise.all(sql.masters().map((m) => sql.mysqlAs(m)));

    const viaCross = await run('cross-shard transfer, compute nodes', CLIENTS, (k) => transferViaCompute(comps[k]), counters);
    const directCross = await run('cross-shard transfer, XA to masters', CLIENTS, (k) => transferAsXa(direct[k].a, direct[k].b), counters);
    const viaSingle = await run('single-shard txn, compute nodes', CLIENTS, (k) => singleShardViaCompute(comps[k]), counters);
    const directSingle = await run('single-shard txn, shard master', CLIENTS, (k) => singleShardDirect(direct[k].a), counters);

    console.log(`\n${CLIENTS} clients, ${SECONDS} s each:`);
    console.log(line('cross-shard transfer, compute nodes', viaCross));
    console.log(line('cross-shard transfer, XA to masters', directCross));
    console.log(`  ratio ${(viaCross.perSec / directCross.perSec).toFixed(2)} (compute nodes / direct XA)`);
    console.log(line('single-shard txn, compute nodes', viaSingle));
    console.log(line('single-shard txn, shard master', directSingle));
    console.log(`  ratio ${(viaSingle.perSec / directSingle.perSec).toFixed(2)} (compute nodes / direct)`);

    const total = await moneyOnShards(sql);
    console.log(`\nmoney on the shards: ${total} (expected ${2 * ACCOUNTS * START}): ${total === 2 * ACCOUNTS * START ? 'exact' : 'WRONG'}`);
    await Promise.all([...comps.map((c) => c.end()), ...direct.flatMap((d) => [d.a.end(), d.b.end()]), ...counters.map((c) => c.end())]);
    if (total !== 2 * ACCOUNTS * START) process.exitCode = 1;
  } finally {
    await s?.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
