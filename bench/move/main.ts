// npm run bench:move -- [--moves 20] [--sizes 100000,400000] [--agents process|inline]
//
// Table-move figures on real engines (issues 18, 32): a one-member manager in this process,
// three agents on 127.0.2.1-3 (test/cluster/cluster-fixture.ts), each its own OS process as
// deployed (`--agents inline` runs them in this process, as before issue 32), a cluster of 2
// shards x 3 MariaDB nodes + 1 compute node, and two clients inserting, updating and deleting
// rows of the moved table through the compute node the whole time, in a child process of
// their own (load-process.ts keeps their log of acknowledged writes).
//
// For each table size of `--sizes`, in the same run and on the same cluster (a table per size):
//  1. Copy throughput: the move's copy phase (rows_copied / copy_ms of its result) against a
//     raw `mariadb-dump --single-transaction | mariadb` pipe (raw-pipe.ts) of the same table
//     from the shard master holding it into a scratch database on the other shard's master
//     (the move's target, its semi-sync standbys replicating as for the move), under the same
//     client load, one pipe right before each move in its direction (the load swings on a
//     shared machine: the per-move ratio's median is the steadier figure). The pipe's time
//     includes starting the two tools; the move's includes opening its snapshot.
//  2. `--moves` cut-overs: the table moved back and forth between the shards under the load
//     (drop_old_table 1); the agents' blocked window (blocked_ms) and the write stall the
//     clients saw across each cut-over: the longest gap between two consecutive acknowledged
//     writes (either client) that overlaps the cut-over's span (first hold sent to last
//     re-point answered, from the manager's "move cut over" log line; the clients' times are
//     taken on CLOCK_MONOTONIC and placed on this process's clock): p50/p99/max. Beside it,
//     the same measure with no move running (the load alone for --baseline-ms before the
//     first move, windows of the cut-overs' lengths): a gap the clients see anyway, since a
//     write queued by the hold still takes its own round trip after the release. And the
//     longest gap over each whole move (copy, verify and cut-over), not the cut-over's alone.
//  3. Acknowledged writes lost: every row of the clients' log compared with the table on its
//     final shard (must be 0).
//  4. The manager process's CPU seconds and bytes read over each move (process-use.ts), and
//     the same per second of the load-alone period (the leader's own loops), to tell what a
//     move adds; with process agents, their CPU too. A manager on the data path would read
//     the table's bytes, growing with --sizes.
//
// Run it under the system lock (it uses the fixed test addresses):
//   flock /tmp/kcm-system.lock npm run bench:move

import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { HOSTS, startClusterFixture } from '../../test/cluster/cluster-fixture';
import { clusterParas } from '../../test/cluster/cluster-paras';
import { registerMachines } from '../../test/cluster/ha-fixture';
import { emit, jobStatus } from '../../test/helpers/emit-client';
import { openTestAccounts } from '../../test/helpers/secrets';
import { LoadChild } from './load-child';
import { dumpPipe } from './raw-pipe';
import { processUse, useBetween, type ProcessUse } from './process-use';

const { values: flags } = parseArgs({
  options: {
    moves: { type: 'string', default: '20' },
    sizes: { type: 'string', default: '100000,400000' },
    // One size only (as before --sizes).
    rows: { type: 'string' },
    'baseline-ms': { type: 'string', default: '10000' },
    agents: { type: 'string', default: 'process' },
    // The move's copy chunk (manager config moveChunkRows); default: the config's default.
    'chunk-rows': { type: 'string' },
  },
});
const MOVES = Number(flags.moves);
const SIZES = (flags.rows ?? flags.sizes).split(',').map(Number);
const BASELINE_MS = Number(flags['baseline-ms']);
if (flags.agents !== 'process' && flags.agents !== 'inline') throw new Error('--agents is process or inline');
const PROCESS_AGENTS = flags.agents === 'process';
const DB = 'postgres_$$_public';
const RAW_DB = 'benchraw_$$_public';

// The blocked window's parts as the "move cut over" log line gives them (cutover.ts CutOverParts, engine.ts tail).
const PART_NAMES = ['holds_ms', 'position_ms', 'tail_ms', 'flush_ms', 'read_ms', 'tail_rows', 'repoint_ms', 'lock_wait_ms', 'wait_ms', 'ddl_ms', 'commit_ms', 'repoint_rpc_ms'];
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)];
const summary = (values: number[]) => `p50 ${percentile(values, 50)} ms, p99 ${percentile(values, 99)} ms, max ${Math.max(...values)} ms (n=${values.length})`;
const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const kb = (bytes: number) => (bytes / 1e3).toFixed(1);

/** One move's cost to the manager process, and its length. */
interface MoveUse extends ProcessUse {
  seconds: number;
}

interface SizeFigures {
  rows: number;
  /** The table's InnoDB data_length when seeded. */
  tableBytes: number;
  moveSeconds: number[];
  use: MoveUse[];
  /** The manager's use per second with the load alone, no move. */
  idle: ProcessUse;
}

async function main() {
  const f = await startClusterFixture({
    agentPort: 58190,
    member: '127.0.1.90:58190',
    processAgentHosts: PROCESS_AGENTS ? HOSTS : [],
    ...(flags['chunk-rows'] ? { managerConfig: { moveChunkRows: Number(flags['chunk-rows']) } } : {}),
  });
  try {
    const agentPids = [...f.processAgents.values()].map((a) => a.pid).filter((pid): pid is number => pid !== undefined);
    await registerMachines(f, [2]);
    const created = await f.runJob('create_cluster', clusterParas({ nick_name: 'bm', shards: '2', innodb_size: '128' }), 300_000);
    if (created.status !== 'done') throw new Error(`create_cluster: ${created.error_info}`);
    const att = created.attachment as { cluster_id: string; computer_user: string; computer_pwd: string };
    const cluster = () => f.manager.store.state().clusters[att.cluster_id];
    const shardIds = Object.keys(cluster().shards).sort((a, b) => Number(a) - Number(b));
    const storage = openTestAccounts(cluster().accounts).storage;
    const masterOf = (id: string) => {
      const s = cluster().shards[id];
      const m = s.nodes[s.masterNodeId];
      return { host: m.hostaddr, port: m.port, ...storage };
    };
    const onShard = async <T>(id: string, sql: string): Promise<T[]> => {
      const c = await mysql.createConnection(masterOf(id));
      try {
        return (await c.query(sql))[0] as T[];
      } finally {
        await c.end();
      }
    };
    const comp = Object.values(cluster().comps)[0];
    const compLogin = { host: comp.hostaddr, port: comp.port, user: att.computer_user, password: att.computer_pwd, database: 'postgres' };
    await onShard(shardIds[0], `CREATE DATABASE IF NOT EXISTS \`${DB}\``);

    // An expand_cluster, waited for on the replicated job record (no Emit polling in the measured window).
    const runMove = async (table: string, src: string, dst: string) => {
      const ack = await emit(f.member, 'expand_cluster', { cluster_id: att.cluster_id, src_shard_id: src, dst_shard_id: dst, table_list: [`postgres.public.${table}`], drop_old_table: '1' });
      const deadline = Date.now() + 600_000;
      for (;;) {
        const status = f.manager.store.state().jobs[ack.job_id]?.status;
        if (status === 'done' || status === 'failed') break;
        if (Date.now() > deadline) throw new Error(`expand_cluster ${ack.job_id} did not end in 10 minutes`);
        await sleep(100);
      }
      return ack.job_id;
    };

    const bySize: SizeFigures[] = [];
    for (const rows of SIZES) {
      const table = `mv_bench_${rows}`;
      console.log(`\n-- ${rows} rows (table ${table}) --`);
      await onShard(shardIds[0], `CREATE TABLE \`${DB}\`.\`${table}\` (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40)) ENGINE=InnoDB`);
      await onShard(shardIds[0], `INSERT INTO \`${DB}\`.\`${table}\` SELECT seq, seq, CONCAT('n', seq) FROM \`${DB}\`.seq_1_to_${rows}`);
      await onShard(shardIds[0], `ANALYZE TABLE \`${DB}\`.\`${table}\``);
      const [{ bytes }] = await onShard<{ bytes: number }>(shardIds[0], `SELECT data_length AS bytes FROM information_schema.tables WHERE table_schema = '${DB}' AND table_name = '${table}'`);
      console.log(`table data (InnoDB data_length): ${(Number(bytes) / 1e6).toFixed(1)} MB`);
      await sleep(3000); // the catalog sync shows it on the compute node

      const rawCopy = async (from: string, to: string): Promise<number> => {
        await onShard(to, `DROP DATABASE IF EXISTS \`${RAW_DB}\``);
        await onShard(to, `CREATE DATABASE \`${RAW_DB}\``);
        const ms = await dumpPipe(masterOf(from), masterOf(to), DB, table, RAW_DB);
        const [{ n }] = await onShard<{ n: number }>(to, `SELECT COUNT(*) AS n FROM \`${RAW_DB}\`.\`${table}\``);
        await onShard(to, `DROP DATABASE \`${RAW_DB}\``);
        return (n / ms) * 1000;
      };

      const load = new LoadChild(compLogin, `public.${table}`, rows);
      let stopped = false;
      try {
        await sleep(1000);
        const idleFrom = processUse(agentPids);
        const baselineFrom = performance.timeOrigin + performance.now();
        await sleep(BASELINE_MS);
        const baselineTo = performance.timeOrigin + performance.now();
        const idleUse = useBetween(idleFrom, processUse(agentPids));
        const idleSeconds = (baselineTo - baselineFrom) / 1000;
        const idle = { cpuSeconds: idleUse.cpuSeconds / idleSeconds, readBytes: idleUse.readBytes / idleSeconds, agentCpuSeconds: idleUse.agentCpuSeconds / idleSeconds };
        // A raw pipe right before each move, same direction, under the same client load (it writes
        // to the source table): on a shared machine the load swings within a run, so each move's
        // copy is compared with its own neighbour.
        const rawRates: number[] = [];
        const blocked: number[] = [];
        const moveSpans: [number, number][] = [];
        const cutSpans: [number, number][] = [];
        const copyRates: number[] = [];
        const parts: string[] = [];
        const use: MoveUse[] = [];
        const moveSeconds: number[] = [];
        let at = 0;
        for (let i = 0; i < MOVES; i++) {
          const [src, dst] = [shardIds[at], shardIds[1 - at]];
          rawRates.push(await rawCopy(src, dst));
          const started = Date.now();
          const logFrom = f.logLines.length;
          const before = processUse(agentPids);
          const t0 = performance.now();
          const jobId = await runMove(table, src, dst);
          const seconds = (performance.now() - t0) / 1000;
          use.push({ ...useBetween(before, processUse(agentPids)), seconds });
          moveSeconds.push(seconds);
          const ended = Date.now();
          const reply = await jobStatus(f.member, jobId);
          if (reply.status !== 'done') throw new Error(`move ${i + 1}: ${reply.error_info}`);
          const t = (reply.attachment as { list_table: { rows_copied: string; copy_ms: string; blocked_ms: string; cut_over_ms: string }[] }).list_table[0];
          blocked.push(Number(t.blocked_ms));
          moveSpans.push([started, ended]);
          const cut = f.logLines
            .slice(logFrom)
            .flatMap((chunk) => chunk.split('\n'))
            .filter((l) => l.includes('"move cut over"'))
            .map((l) => JSON.parse(l) as { span_from?: number; span_to?: number } & Record<string, unknown>)[0];
          if (!cut?.span_from || !cut.span_to) throw new Error(`move ${i + 1}: no "move cut over" log line`);
          cutSpans.push([cut.span_from, cut.span_to]);
          parts.push(Object.entries(cut).filter(([k]) => PART_NAMES.includes(k)).map(([k, v]) => `${k} ${String(v)}`).join(', '));
          copyRates.push((Number(t.rows_copied) / Number(t.copy_ms)) * 1000);
          const u = use[use.length - 1];
          console.log(`move ${i + 1} shard ${src} -> ${dst}: ${ended - started} ms, copied ${t.rows_copied} rows in ${t.copy_ms} ms (raw pipe just before: ${Math.round(rawRates[i])} rows/s), blocked ${t.blocked_ms} ms (cut-over ${t.cut_over_ms} ms); manager process ${u.cpuSeconds.toFixed(2)} CPU s, read ${kb(u.readBytes)} kB; agents ${u.agentCpuSeconds.toFixed(2)} CPU s`);
          at = 1 - at;
        }
        await sleep(500);
        stopped = true;
        const record = await load.stop({ ...masterOf(shardIds[at]), database: DB, table });
        const stalls = cutSpans.map(([from, to]) => Math.round(record.stallAcross(from, to)));
        const gaps = moveSpans.map(([from, to]) => record.longestGap(from, to));
        const [raw, move] = [mean(rawRates), mean(copyRates)];
        const pairRatios = copyRates.map((r, i) => r / rawRates[i]);
        console.log(`\n== bench:move, ${rows} rows, agents ${flags.agents} (machine shared with other work; ratios are from this one run) ==`);
        console.log(`cut-overs under load: ${MOVES}; writes acknowledged ${record.writes}, failed ${record.result.failures}`);
        console.log(`blocked window (agents, lock asked for -> commit): ${summary(blocked)}`);
        // The same measure with no move: windows of the cut-overs' lengths spread over the load-only period.
        const baseline = cutSpans.map(([from, to], i) => {
          const len = to - from;
          const at0 = baselineFrom + ((baselineTo - baselineFrom - len) * (i + 0.5)) / cutSpans.length;
          return Math.round(record.stallAcross(at0, at0 + len));
        });
        console.log(`write stall across each cut-over (clients, longest gap between acknowledged writes overlapping it): ${summary(stalls)}`);
        console.log(`  the same measure with no move running (load alone, ${BASELINE_MS} ms before the first move): ${summary(baseline)}`);
        console.log(`longest gap between acknowledged writes over each whole move, copy and verify included (clients): ${summary(gaps)}`);
        console.log('where the time went in the cut-overs with the longest client stall (manager: holds, position, tail = flush + read, repoint; agent that held longest: lock wait, wait for the re-point, DDL, COMMIT, RPC):');
        for (const i of stalls.map((_, i) => i).sort((a, b) => stalls[b] - stalls[a]).slice(0, 5)) console.log(`  move ${i + 1}: stall ${stalls[i]} ms, blocked ${blocked[i]} ms: ${parts[i]}`);
        console.log(`acknowledged writes lost: ${record.result.lostCount}${record.result.lostCount > 0 ? ` (${record.result.lostSample.join('; ')})` : ''}`);
        console.log(`copy throughput: move ${Math.round(move)} rows/s vs raw mariadb-dump | mariadb ${Math.round(raw)} rows/s (means of ${copyRates.length} copies and ${rawRates.length} pipes, each pipe right before its move, under the write load): ${(move / raw).toFixed(2)}x; per-move ratio p50 ${percentile(pairRatios, 50).toFixed(2)}x (min ${Math.min(...pairRatios).toFixed(2)}, max ${Math.max(...pairRatios).toFixed(2)})`);
        bySize.push({ rows, tableBytes: Number(bytes), moveSeconds, use, idle });
        printUse(bySize[bySize.length - 1]);
      } finally {
        if (!stopped) load.kill();
      }
    }
    console.log(`\n== the manager process per move, by table size (agents ${flags.agents}${PROCESS_AGENTS ? '' : ': their work is in the manager process'}; the load's clients in their own process) ==`);
    for (const s of bySize) printUse(s);
  } finally {
    await f.close();
  }
}

/**
 * The manager's CPU and bytes read per move, as measured and above what the same time with
 * the load alone costs it (the leader's loops: probes, leases, catalog sync), p50 and max.
 */
function printUse(s: SizeFigures): void {
  const p50max = (v: number[], fmt: (x: number) => string) => `p50 ${fmt(percentile(v, 50))}, max ${fmt(Math.max(...v))}`;
  const cpu = s.use.map((u) => u.cpuSeconds);
  const read = s.use.map((u) => u.readBytes);
  const cpuAbove = s.use.map((u) => u.cpuSeconds - s.idle.cpuSeconds * u.seconds);
  const readAbove = s.use.map((u) => u.readBytes - s.idle.readBytes * u.seconds);
  const s2 = (x: number) => x.toFixed(2);
  console.log(`${s.rows} rows (${(s.tableBytes / 1e6).toFixed(1)} MB of data): move ${p50max(s.moveSeconds, (x) => `${x.toFixed(1)} s`)}; manager CPU ${p50max(cpu, (x) => `${s2(x)} s`)} (above idle: ${p50max(cpuAbove, (x) => `${s2(x)} s`)}; idle ${s2(s.idle.cpuSeconds)} s/s); manager bytes read (rchar: sockets, pipes and files) ${p50max(read, (x) => `${kb(x)} kB`)} (above idle: ${p50max(readAbove, (x) => `${kb(x)} kB`)}; idle ${kb(s.idle.readBytes)} kB/s); agents' CPU ${p50max(s.use.map((u) => u.agentCpuSeconds), (x) => `${s2(x)} s`)}`);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
