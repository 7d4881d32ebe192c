// npm run bench:sql -- [--rows 2000] [--selects 2000]
//
// SQL through a compute node against the same statements sent straight to the shard
// master, in the same run, on real engines (issue 17): a 2-shard x 3-node, 2-compute-node
// cluster (test/cluster/sql-fixture.ts), one table created through compute node 1
// (kcm_ddl places it on a shard), then, one client and one statement at a time:
//
//  1. inserts: `--rows` single-row INSERTs through the compute node, then as many straight
//     to the table's shard master with the storage account;
//  2. point selects: `--selects` primary-key SELECTs each way;
//  3. where the time goes: the shard's statement counters (Com_*) per compute-node
//     statement, and EXPLAIN ANALYZE of one point select on the compute node;
//  4. what a multi-statement transaction leaves on the shard after ROLLBACK (nothing, since
//     kcm_ddl's shard transactions; bench:txn measures transactions).
//
// Run it under the system lock (it uses the fixed test addresses):
//   flock /tmp/kcm-system.lock npm run bench:sql

import { parseArgs } from 'node:util';
import type mysql from 'mysql2/promise';
import { startSqlCluster, type SqlCluster } from '../../test/cluster/sql-fixture';

const { values: flags } = parseArgs({ options: { rows: { type: 'string', default: '2000' }, selects: { type: 'string', default: '2000' } } });
const ROWS = Number(flags.rows);
const SELECTS = Number(flags.selects);
const PAD = 'x'.repeat(64);

async function timed(n: number, one: (i: number) => Promise<unknown>): Promise<{ perSec: number; ms: number }> {
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await one(i);
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  return { perSec: (n / ms) * 1000, ms };
}

async function statusCounters(m: mysql.Connection): Promise<Map<string, number>> {
  const [rows] = (await m.query(`SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_stmt_prepare', 'Com_stmt_execute', 'Com_stmt_close', 'Com_select', 'Com_insert', 'Com_set_option')`)) as unknown as [{ Variable_name: string; Value: string }[]];
  return new Map(rows.map((r) => [r.Variable_name, Number(r.Value)]));
}

function perStatement(before: Map<string, number>, after: Map<string, number>, statements: number): string {
  return [...after.entries()].map(([k, v]) => `${k} ${((v - (before.get(k) ?? 0)) / statements).toFixed(2)}`).join(', ');
}

async function main(): Promise<void> {
  console.log(`bench:sql: starting a 2-shard, 2-compute-node cluster (rows ${ROWS}, selects ${SELECTS})`);
  let s: SqlCluster | undefined;
  try {
    s = await startSqlCluster();
    const comp = await s.pgAs(s.comps()[0]);
    await comp.query('create table bench_kv(id int primary key, v int not null, pad varchar(100))');
    const holder = (await s.shardTables('bench_kv')).findIndex((t) => t.length === 1);
    const master = await s.mysqlAs(s.masters()[holder]);
    const counters = await s.mysqlAs(s.masters()[holder]);
    await master.query('USE `postgres_$$_public`');

    const c0 = await statusCounters(counters);
    const viaInsert = await timed(ROWS, (i) => comp.query('INSERT INTO bench_kv (id, v, pad) VALUES ($1, $2, $3)', [i, i, PAD]));
    const c1 = await statusCounters(counters);
    const directInsert = await timed(ROWS, (i) => master.execute('INSERT INTO bench_kv (id, v, pad) VALUES (?, ?, ?)', [ROWS + i, i, PAD]));

    const ids = Array.from({ length: SELECTS }, (_, i) => (i * 7919) % (2 * ROWS));
    const c2 = await statusCounters(counters);
    const viaSelect = await timed(SELECTS, (i) => comp.query('SELECT v FROM bench_kv WHERE id = $1', [ids[i]]));
    const c3 = await statusCounters(counters);
    const directSelect = await timed(SELECTS, (i) => master.execute('SELECT v FROM bench_kv WHERE id = ?', [ids[i]]));

    const plan = await comp.query('EXPLAIN (ANALYZE, VERBOSE) SELECT v FROM bench_kv WHERE id = 42');

    // A multi-statement transaction: what ROLLBACK and a failing statement leave on the shard.
    await comp.query('BEGIN');
    await comp.query('INSERT INTO bench_kv (id, v) VALUES (-1, 1)');
    await comp.query('INSERT INTO bench_kv (id, v) VALUES (-2, 2)');
    await comp.query('ROLLBACK');
    await comp.query('BEGIN');
    await comp.query('INSERT INTO bench_kv (id, v) VALUES (-3, 3)');
    const duplicate = await comp.query('INSERT INTO bench_kv (id, v) VALUES (-3, 3)').then(() => 'accepted', (e: Error) => e.message);
    await comp.query('ROLLBACK');
    const [kept] = (await master.query('SELECT id FROM bench_kv WHERE id < 0 ORDER BY id DESC')) as unknown as [{ id: number }[]];

    const row = (name: string, via: { perSec: number; ms: number }, direct: { perSec: number; ms: number }) =>
      `${name.padEnd(14)} compute node ${via.perSec.toFixed(0).padStart(6)}/s   shard master ${direct.perSec.toFixed(0).padStart(6)}/s   ratio ${(via.perSec / direct.perSec).toFixed(2)} (compute node / master), ${((via.ms / (name.startsWith('insert') ? ROWS : SELECTS)) * 1000).toFixed(0)} us vs ${((direct.ms / (name.startsWith('insert') ? ROWS : SELECTS)) * 1000).toFixed(0)} us per statement`;
    console.log('\nOne client, one statement at a time:');
    console.log(row('insert', viaInsert, directInsert));
    console.log(row('point select', viaSelect, directSelect));
    console.log('\nShard statement counters per compute-node statement:');
    console.log(`  insert:       ${perStatement(c0, c1, ROWS)}`);
    console.log(`  point select: ${perStatement(c2, c3, SELECTS)}`);
    console.log('\nEXPLAIN (ANALYZE, VERBOSE) of a point select on the compute node:');
    for (const r of plan.rows) console.log(`  ${r['QUERY PLAN']}`);
    console.log('\nMulti-statement transaction through the compute node:');
    console.log(`  BEGIN; INSERT -1; INSERT -2; ROLLBACK  -> rows -1, -2 on the shard afterwards: ${kept.filter((k) => k.id >= -2).map((k) => k.id).join(', ') || 'none'}`);
    console.log(`  BEGIN; INSERT -3; INSERT -3 (duplicate: ${duplicate}); ROLLBACK -> row -3 on the shard afterwards: ${kept.some((k) => k.id === -3) ? 'yes' : 'no'}`);
    await comp.query('drop table bench_kv');
    await comp.end();
    await master.end();
    await counters.end();
  } finally {
    await s?.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
