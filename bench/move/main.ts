// npm run bench:move -- [--moves 20] [--rows 100000]
//
// Table-move figures on real engines (issue 18): a one-member manager, three agents on
// 127.0.2.1-3 (test/cluster/cluster-fixture.ts), a cluster of 2 shards x 3 MariaDB nodes + 1
// compute node, and two clients inserting, updating and deleting rows of the moved table
// through the compute node the whole time (test/cluster/move-load.ts keeps their log of
// acknowledged writes).
//
//  1. Copy throughput: the move's copy phase (rows_copied / copy_ms of its result) against a
//     raw `mariadb-dump --single-transaction | mariadb` pipe of the same table from the shard
//     master holding it into a scratch database on the other shard's master (the move's
//     target, its semi-sync standbys replicating as for the move), in the same run and under
//     the same client load, one pipe right before each move in its direction (the load swings
//     on a shared machine: the per-move ratio's median is the steadier figure). The pipe's
//     time includes starting the two clients; the move's includes opening its snapshot.
//  2. `--moves` cut-overs: the table moved back and forth between the shards under the load
//     (drop_old_table 1); the agents' blocked window (blocked_ms) and the write stall the
//     clients saw across each cut-over: the longest gap between two consecutive acknowledged
//     writes (either client) that overlaps the cut-over's span (first hold sent to last
//     re-point answered, from the manager's "move cut over" log line, same process and
//     clock): p50/p99/max. Beside it, the same measure with no move running (the load alone
//     for --baseline-ms before the first move, windows of the cut-overs' lengths): a gap the
//     clients see anyway, since a write queued by the hold still takes its own round trip
//     after the release. And, as before, the longest gap over each whole move (copy, verify
//     and cut-over), which is not the cut-over's alone.
//  3. Acknowledged writes lost: every row of the clients' log compared with the table on its
//     final shard (must be 0).
//
// Run it under the system lock (it uses the fixed test addresses):
//   flock /tmp/kcm-system.lock npm run bench:move

import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { startClusterFixture } from '../../test/cluster/cluster-fixture';
import { clusterParas } from '../../test/cluster/cluster-paras';
import { registerMachines } from '../../test/cluster/ha-fixture';
import { MoveLoad, rowDifferences, stallAcross, type Row } from '../../test/cluster/move-load';
import { openTestAccounts } from '../../test/helpers/secrets';

const { values: flags } = parseArgs({ options: { moves: { type: 'string', default: '20' }, rows: { type: 'string', default: '100000' }, 'baseline-ms': { type: 'string', default: '10000' } } });
const MOVES = Number(flags.moves);
const ROWS = Number(flags.rows);
const BASELINE_MS = Number(flags['baseline-ms']);
const DB = 'postgres_$$_public';
const RAW_DB = 'benchraw_$$_public';

// The blocked window's parts as the "move cut over" log line gives them (cutover.ts CutOverParts, engine.ts tail).
const PART_NAMES = ['holds_ms', 'position_ms', 'tail_ms', 'flush_ms', 'read_ms', 'tail_rows', 'repoint_ms', 'lock_wait_ms', 'wait_ms', 'ddl_ms', 'commit_ms', 'repoint_rpc_ms'];
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)];
const summary = (values: number[]) => `p50 ${percentile(values, 50)} ms, p99 ${percentile(values, 99)} ms, max ${Math.max(...values)} ms (n=${values.length})`;

async function main() {
  const f = await startClusterFixture({ agentPort: 58190, member: '127.0.1.90:58190' });
  try {
    await registerMachines(f, [2]);
    const created = await f.runJob('create_cluster', clusterParas({ nick_name: 'bm', shards: '2', innodb_size: '128' }), 300_000);
    if (created.status !== 'done') throw new Error(`create_cluster: ${created.error_info}`);
    const att = created.attachment as { cluster_id: string; computer_user: string; computer_pwd: string };
    const cluster = () => f.manager.store.state().clusters[att.cluster_id];
    const shardIds = Object.keys(cluster().shards).sort((a, b) => Number(a) - Number(b));
    const storage = openTestAccounts(cluster().accounts).storage;
    const masterOf = (id: string) => {
      const s = cluster().shards[id];
      return s.nodes[s.masterNodeId];
    };
    const onShard = async <T>(id: string, sql: string): Promise<T[]> => {
      const m = masterOf(id);
      const c = await mysql.createConnection({ host: m.hostaddr, port: m.port, ...storage });
      try {
        return (await c.query(sql))[0] as T[];
      } finally {
        await c.end();
      }
    };
    await onShard(shardIds[0], `CREATE DATABASE IF NOT EXISTS \`${DB}\``);
    await onShard(shardIds[0], `CREATE TABLE \`${DB}\`.mv_bench (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40)) ENGINE=InnoDB`);
    await onShard(shardIds[0], `INSERT INTO \`${DB}\`.mv_bench SELECT seq, seq, CONCAT('n', seq) FROM \`${DB}\`.seq_1_to_${ROWS}`);
    await new Promise((r) => setTimeout(r, 3000));

    // The raw pipe: mariadb-dump of the table on shard A into a scratch database on shard B.
    const rawCopy = async (from: string, to: string): Promise<number> => {
      await onShard(to, `DROP DATABASE IF EXISTS \`${RAW_DB}\``);
      await onShard(to, `CREATE DATABASE \`${RAW_DB}\``);
      const a = masterOf(from);
      const b = masterOf(to);
      const env = { ...process.env, MYSQL_PWD: storage.password };
      const started = performance.now();
      await new Promise<void>((resolve, reject) => {
        const dump = spawn('mariadb-dump', ['-h', a.hostaddr, '-P', String(a.port), '-u', storage.user, '--single-transaction', '--skip-lock-tables', DB, 'mv_bench'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
        const load = spawn('mariadb', ['-h', b.hostaddr, '-P', String(b.port), '-u', storage.user, RAW_DB], { env, stdio: ['pipe', 'inherit', 'inherit'] });
        dump.stdout.pipe(load.stdin);
        load.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`mariadb exited ${code}`))));
      });
      const ms = performance.now() - started;
      const [{ n }] = await onShard<{ n: number }>(to, `SELECT COUNT(*) AS n FROM \`${RAW_DB}\`.mv_bench`);
      await onShard(to, `DROP DATABASE \`${RAW_DB}\``);
      return (n / ms) * 1000;
    };

    const comp = Object.values(cluster().comps)[0];
    const load = new MoveLoad({ host: comp.hostaddr, port: comp.port, user: att.computer_user, password: att.computer_pwd, database: 'postgres' }, 'public.mv_bench', ROWS);
    load.start();
    await new Promise((r) => setTimeout(r, 1000));
    const baselineFrom = performance.timeOrigin + performance.now();
    await new Promise((r) => setTimeout(r, BASELINE_MS));
    const baselineTo = performance.timeOrigin + performance.now();
    // A raw pipe right before each move, same direction, under the same client load (it writes
    // to the source table): on a shared machine the load swings within a run, so each move's
    // copy is compared with its own neighbour.
    const rawRates: number[] = [];
    const blocked: number[] = [];
    const gaps: number[] = [];
    const stalls: number[] = [];
    const spans: number[] = [];
    const copyRates: number[] = [];
    const parts: string[] = [];
    let at = 0;
    for (let i = 0; i < MOVES; i++) {
      const [src, dst] = [shardIds[at], shardIds[1 - at]];
      rawRates.push(await rawCopy(src, dst));
      const started = Date.now();
      const logFrom = f.logLines.length;
      const reply = await f.runJob('expand_cluster', { cluster_id: att.cluster_id, src_shard_id: src, dst_shard_id: dst, table_list: ['postgres.public.mv_bench'], drop_old_table: '1' }, 300_000);
      const ended = Date.now();
      if (reply.status !== 'done') throw new Error(`move ${i + 1}: ${reply.error_info}`);
      const t = (reply.attachment as { list_table: { rows_copied: string; copy_ms: string; blocked_ms: string; cut_over_ms: string }[] }).list_table[0];
      blocked.push(Number(t.blocked_ms));
      gaps.push(load.longestGap(started, ended));
      const cut = f.logLines
        .slice(logFrom)
        .flatMap((chunk) => chunk.split('\n'))
        .filter((l) => l.includes('"move cut over"'))
        .map((l) => JSON.parse(l) as { span_from?: number; span_to?: number } & Record<string, unknown>)[0];
      if (!cut?.span_from || !cut.span_to) throw new Error(`move ${i + 1}: no "move cut over" log line`);
      spans.push(cut.span_to - cut.span_from);
      stalls.push(Math.round(load.stallAcross(cut.span_from, cut.span_to)));
      parts.push(Object.entries(cut).filter(([k]) => PART_NAMES.includes(k)).map(([k, v]) => `${k} ${String(v)}`).join(', '));
      copyRates.push((Number(t.rows_copied) / Number(t.copy_ms)) * 1000);
      console.log(`move ${i + 1} shard ${src} -> ${dst}: ${ended - started} ms, copied ${t.rows_copied} rows in ${t.copy_ms} ms (raw pipe just before: ${Math.round(rawRates[i])} rows/s), blocked ${t.blocked_ms} ms (cut-over ${t.cut_over_ms} ms), client stall across the cut-over ${stalls[stalls.length - 1]} ms, longest client gap in the whole move ${gaps[gaps.length - 1]} ms`);
      at = 1 - at;
    }
    await new Promise((r) => setTimeout(r, 500));
    await load.stop();
    const rows = new Map((await onShard<{ id: number; v: number; note: string }>(shardIds[at], `SELECT id, v, note FROM \`${DB}\`.mv_bench`)).map((r) => [r.id, { v: r.v, note: r.note } as Row]));
    const lost = rowDifferences(load, rows);
    const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
    const [raw, move] = [mean(rawRates), mean(copyRates)];
    const pairRatios = copyRates.map((r, i) => r / rawRates[i]);
    console.log('\n== bench:move (machine shared with other work; ratios are from this one run) ==');
    console.log(`cut-overs under load: ${MOVES}; writes acknowledged ${load.writes}, failed ${load.failures}`);
    console.log(`blocked window (agents, lock asked for -> commit): ${summary(blocked)}`);
    // The same measure with no move: windows of the cut-overs' lengths spread over the load-only period.
    const baseline = spans.map((len, i) => {
      const from = baselineFrom + ((baselineTo - baselineFrom - len) * (i + 0.5)) / spans.length;
      return Math.round(stallAcross(load.acksAt, from, from + len));
    });
    console.log(`write stall across each cut-over (clients, longest gap between acknowledged writes overlapping it): ${summary(stalls)}`);
    console.log(`  the same measure with no move running (load alone, ${BASELINE_MS} ms before the first move): ${summary(baseline)}`);
    console.log(`longest gap between acknowledged writes over each whole move, copy and verify included (clients): ${summary(gaps)}`);
    console.log('where the time went in the cut-overs with the longest client stall (manager: holds, position, tail = flush + read, repoint; agent that held longest: lock wait, wait for the re-point, DDL, COMMIT, RPC):');
    for (const i of stalls.map((_, i) => i).sort((a, b) => stalls[b] - stalls[a]).slice(0, 5)) console.log(`  move ${i + 1}: stall ${stalls[i]} ms, blocked ${blocked[i]} ms: ${parts[i]}`);
    console.log(`acknowledged writes lost: ${lost.length}${lost.length > 0 ? ` (${lost.slice(0, 5).join('; ')})` : ''}`);
    console.log(`copy throughput: move ${Math.round(move)} rows/s vs raw mariadb-dump | mariadb ${Math.round(raw)} rows/s (means of ${copyRates.length} copies and ${rawRates.length} pipes, each pipe right before its move, under the write load): ${(move / raw).toFixed(2)}x; per-move ratio p50 ${percentile(pairRatios, 50).toFixed(2)}x (min ${Math.min(...pairRatios).toFixed(2)}, max ${Math.max(...pairRatios).toFixed(2)})`);
  } finally {
    await f.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
