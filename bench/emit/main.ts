// npm run bench:emit -- [--seconds 8] [--concurrency 1,16,64] [--raft-kv-seconds N] [--skip-raft-kv] [--skip-bare-http] [--skip-queued] [--keep] [--cpu-prof DIR] [--insecure]
//
// Starts a local 3-manager group (127.0.1.51-53), then at each concurrency measures
// acknowledged async jobs per second (create_machine, see emit-load.ts) and sync queries
// per second (get_cluster_summary), requests round-robin over all members, with p50/p99.
// After each job phase it waits until the leader has ended every job it acknowledged
// (they fail fast: nobody serves their hosts) and reports how fast jobs ran to their end,
// and where a job's mean time went (at the client, in the member it reached, in the Raft
// commit), from the members' histograms.
// Then, at each concurrency, submissions alone: the same requests all naming one host whose
// agent never answers, so they queue behind its first job and none runs beside them
// (emit-load.ts). What is left is each job's submission: HTTP, forwarding, validation, the
// JobSubmitted commit, the reply.
// The group is then stopped, and two baselines run with the same phase length and
// concurrencies, one after the other, never at the same time:
//  - bare HTTP (bare-http.ts): the same job requests, client and concurrency, against one
//    fastify process that only parses the body and answers accept. What an HTTP request
//    costs on this machine before kcm does any work for it.
//  - bench/raft-kv (its own 3 members): the raw Raft write path.
// All print side by side from the same run on the same machine.

import { spawn } from 'node:child_process';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CpuMeter, perOp, type CpuUse } from '../raft-kv/cpu';
import type { PhaseResult } from '../raft-kv/workload';
import { emitRaw, findLeader, metrics } from '../../test/helpers/emit-client';
import { LocalGroup } from '../../test/manager/helpers/group';
import { REPO_ROOT, waitFor } from '../../test/manager/helpers/processes';
import { benchBareHttp, type BareHttpRow } from './bare-http';
import { asyncJobsPhase, closeConnections, queriesPhase, type AsyncPhaseResult, type EmitTarget, type HostCounter } from './emit-load';
import { startStalledAgent } from './stalled-agent';

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    concurrency: { type: 'string', default: '1,16,64' },
    'raft-kv-seconds': { type: 'string' },
    'skip-raft-kv': { type: 'boolean', default: false },
    'skip-bare-http': { type: 'boolean', default: false },
    'skip-queued': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    // Plaintext internal links instead of mutual TLS (the default), to measure what TLS costs.
    insecure: { type: 'boolean', default: false },
  },
});
const seconds = Number(flags.seconds);
const concurrencies = flags.concurrency.split(',').map(Number);
const MEMBERS = ['127.0.1.51:18330', '127.0.1.52:18330', '127.0.1.53:18330'];
const AGENT_PORT = 18393;
/** The host of the queued submissions: its agent (stalled-agent.ts) accepts and never answers. */
const BUSY_HOST = '127.3.255.254';

interface EmitRow {
  concurrency: number;
  jobs: AsyncPhaseResult;
  /** Jobs ended per second, from the phase's start until its last job ended. */
  jobsEndedPerSec: number;
  drainMs: number;
  queries: PhaseResult;
  /** CPU ms per acknowledged job, from the phase's start until its last job ended: each member's, then the load generator's. */
  jobCpuMs: CpuUse;
  /** Same, per answered query, over the query phase. */
  queryCpuMs: CpuUse;
  /** Index (in MEMBERS) of the member leading when the phase's jobs had ended. */
  leaderIndex: number;
}

const profileDir = flags['cpu-prof'] ? path.resolve(flags['cpu-prof']) : undefined;
if (profileDir) process.env.KCM_TEST_NODE_ARGS = `${process.env.KCM_TEST_NODE_ARGS ?? ''} --cpu-prof --cpu-prof-dir=${profileDir}`;

// The rate limit off: the bench measures what the gateway can serve, not emitRatePerSecond.
const group = new LocalGroup({ name: 'bench-emit', members: MEMBERS, agentHosts: [], agentPort: AGENT_PORT, keepDir: flags.keep, managerConfig: { emitRatePerSecond: 0, ...(flags.insecure ? { insecure: true } : {}) } });
console.log(`internal links: ${flags.insecure ? 'plaintext (--insecure)' : 'mutual TLS'}`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => void group.stop().finally(() => process.exit(130)));
}

function formatPhase(label: string, r: PhaseResult): string {
  const ms = (x: number) => x.toFixed(1).padStart(6);
  return `${label.padEnd(6)} c=${String(r.concurrency).padStart(3)}  ${r.opsPerSec.toFixed(0).padStart(6)}/s  p50 ${ms(r.p50)}  p95 ${ms(r.p95)}  p99 ${ms(r.p99)}  max ${ms(r.max)} ms  failed ${r.errors}`;
}

/**
 * CPU ms per operation of each member and of this process between start() and perOp()
 * (raft-kv's CpuMeter). An idle member still burns CPU (ticks, heartbeats, timers); with
 * the idle rate measured (measureIdle), perOp() subtracts it, so a phase slowed down by
 * other load on the machine does not look costlier per operation only because it lasted
 * longer per operation.
 */
class CpuPerOp {
  private readonly meter: CpuMeter;
  private startedAt = 0;
  /** CPU ms per wall-clock second of each member at rest. */
  idleMsPerSec: number[] = [];

  constructor(pids: () => (number | undefined)[]) {
    this.meter = new CpuMeter(pids);
  }

  async measureIdle(ms: number): Promise<void> {
    this.start();
    await new Promise((resolve) => setTimeout(resolve, ms));
    const seconds = this.elapsedSeconds();
    this.idleMsPerSec = this.meter.used().members.map((used) => used / seconds);
  }

  start(): void {
    this.meter.start();
    this.startedAt = performance.now();
  }

  perOp(ops: number): CpuUse {
    const seconds = this.elapsedSeconds();
    const used = this.meter.used();
    return perOp({ members: used.members.map((m, i) => m - (this.idleMsPerSec[i] ?? 0) * seconds), client: used.client }, ops);
  }

  private elapsedSeconds(): number {
    return (performance.now() - this.startedAt) / 1000;
  }
}

/** Each member's CPU ms (the leader marked L), their sum, and the load generator's. */
function formatCpu(c: CpuUse, leaderIndex: number): string {
  const members = c.members.map((ms, i) => `${i === leaderIndex ? 'L' : 'F'} ${ms.toFixed(2)}`).join('  ');
  const total = c.members.reduce((a, b) => a + b, 0);
  return `${members}  (managers ${total.toFixed(2)}, client ${c.client.toFixed(2)})`;
}

/** Sums and counts of the histograms that split a submission's time, over all members. */
interface TimeSplit {
  /** Accepted create_machine requests: time from request to reply at the member the client reached. */
  emitSum: number;
  emitCount: number;
  /** Raft proposals (submissions and runner commits): propose to applied, where proposed (the leader). */
  raftSum: number;
  raftCount: number;
}

async function timeSplit(): Promise<TimeSplit> {
  const all = await Promise.all(MEMBERS.map((m) => metrics(m)));
  const sum = (series: string) => all.reduce((acc, m) => acc + (m.get(series) ?? 0), 0);
  const accepted = '{job_type="create_machine",outcome="ok"}';
  return {
    emitSum: sum(`kcm_emit_request_duration_seconds_sum${accepted}`),
    emitCount: sum(`kcm_emit_request_duration_seconds_count${accepted}`),
    raftSum: sum('kcm_raft_proposal_duration_seconds_sum{outcome="ok"}'),
    raftCount: sum('kcm_raft_proposal_duration_seconds_count{outcome="ok"}'),
  };
}

/** Mean ms of each part between two readings. */
function splitMeans(before: TimeSplit, after: TimeSplit): { atMember: number; raft: number } {
  const mean = (sum: number, count: number) => (count > 0 ? (sum / count) * 1000 : 0);
  return { atMember: mean(after.emitSum - before.emitSum, after.emitCount - before.emitCount), raft: mean(after.raftSum - before.raftSum, after.raftCount - before.raftCount) };
}

interface QueuedRow {
  concurrency: number;
  submissions: PhaseResult;
  /** CPU ms per acknowledged submission over the phase: each member's, then the load generator's. */
  cpuMs: CpuUse;
  leaderIndex: number;
}

/** Unfinished jobs (started + ongoing) in the leader's replicated state. */
async function unfinishedJobs(leader: string): Promise<number> {
  const m = await metrics(leader);
  return (m.get('kcm_jobs{status="started"}') ?? 0) + (m.get('kcm_jobs{status="ongoing"}') ?? 0);
}

/**
 * Submissions alone, at each concurrency (see the header). Runs after the job phases: the
 * queue it builds does not drain while the group runs (one job per agent deadline).
 */
async function benchQueued(target: EmitTarget, cpu: CpuPerOp, hosts: HostCounter, runId: string): Promise<QueuedRow[]> {
  const agent = await startStalledAgent(BUSY_HOST, AGENT_PORT);
  try {
    const busyHost = () => BUSY_HOST;
    await asyncJobsPhase(target, 1, 0.2, hosts, `${runId}-queued-warmup`, busyHost);
    const rows: QueuedRow[] = [];
    for (const concurrency of concurrencies) {
      cpu.start();
      const submissions = await asyncJobsPhase(target, concurrency, seconds, hosts, `${runId}-queued`, busyHost);
      const cpuMs = cpu.perOp(submissions.ops);
      const leader = (await findLeader(MEMBERS)) ?? MEMBERS[0];
      const queued = await unfinishedJobs(leader);
      console.log(formatPhase('queued', submissions));
      const leaderIndex = MEMBERS.indexOf(leader);
      console.log(`       c=${String(concurrency).padStart(3)}  CPU ms per acked submission above idle: ${formatCpu(cpuMs, leaderIndex)}; ${queued} jobs unfinished`);
      rows.push({ concurrency, submissions, cpuMs, leaderIndex });
    }
    return rows;
  } finally {
    agent.close();
  }
}

async function benchEmit(): Promise<{ rows: EmitRow[]; queuedRows: QueuedRow[] }> {
  await group.start();
  const leader = await group.waitForLeader(MEMBERS, 30_000);
  console.log(`kcm managers: leader is ${leader}; data under ${group.dir}`);
  const target: EmitTarget = { members: MEMBERS, baseDir: path.join(group.dir, 'unused') };
  const hosts: HostCounter = { next: 0 };
  const runId = `bench-${Date.now()}`;
  // Warm up: connections open, JIT warm, the runner's first jobs done.
  await asyncJobsPhase(target, 3, 1, hosts, `${runId}-warmup`);
  await queriesPhase(target, 3, 1);
  await waitFor('warm-up jobs to end', async () => (await unfinishedJobs(leader)) === 0, 60_000, 200);

  const cpu = new CpuPerOp(() => MEMBERS.map((m) => group.manager(m).pid));
  await cpu.measureIdle(3000);
  console.log(`idle CPU ms per second: ${cpu.idleMsPerSec.map((ms, i) => `${MEMBERS[i] === leader ? 'L' : 'F'} ${ms.toFixed(1)}`).join('  ')} (subtracted below)`);
  const rows: EmitRow[] = [];
  for (const concurrency of concurrencies) {
    const started = performance.now();
    const splitBefore = await timeSplit();
    cpu.start();
    const jobs = await asyncJobsPhase(target, concurrency, seconds, hosts, runId);
    console.log(formatPhase('jobs', jobs));
    const split = splitMeans(splitBefore, await timeSplit());
    console.log(
      `       c=${String(concurrency).padStart(3)}  mean ms per acked job: ${jobs.meanMs.toFixed(2)} at the client, ${split.atMember.toFixed(2)} in the member it reached ` +
        `(forwarding included), of which the Raft commit (propose to applied at the leader) ${split.raft.toFixed(2)}`,
    );
    const current = (await findLeader(MEMBERS)) ?? leader;
    await waitFor(`the jobs of c=${concurrency} to end`, async () => (await unfinishedJobs(current)) === 0, 300_000, 200);
    const endedAt = performance.now();
    const jobCpuMs = cpu.perOp(jobs.ops);
    const drainMs = endedAt - started - jobs.seconds * 1000;
    const jobsEndedPerSec = jobs.jobIds.length / ((endedAt - started) / 1000);
    const leaderIndex = MEMBERS.indexOf(current);
    console.log(`       c=${String(concurrency).padStart(3)}  ${jobs.jobIds.length} jobs ended ${drainMs.toFixed(0)} ms after the phase: ${jobsEndedPerSec.toFixed(0)} jobs ended/s`);
    console.log(`       c=${String(concurrency).padStart(3)}  CPU ms per acked job above idle (phase + drain): ${formatCpu(jobCpuMs, leaderIndex)}`);
    cpu.start();
    const queries = await queriesPhase(target, concurrency, seconds);
    const queryCpuMs = cpu.perOp(queries.ops);
    console.log(formatPhase('query', queries));
    console.log(`       c=${String(concurrency).padStart(3)}  CPU ms per query above idle: ${formatCpu(queryCpuMs, leaderIndex)}`);
    rows.push({ concurrency, jobs, jobsEndedPerSec, drainMs, queries, jobCpuMs, queryCpuMs, leaderIndex });
  }
  const last = await emitRaw(MEMBERS[0], 'get_status', {}, { jobId: rows.at(-1)?.jobs.jobIds.at(-1) ?? '1' });
  console.log(`last job: ${last.status} (${last.error_info.slice(0, 80)})`);
  const queuedRows = flags['skip-queued'] ? [] : await benchQueued(target, cpu, hosts, runId);
  if (profileDir) {
    // A profile is written only on a clean exit; SIGKILL (group.stop) would lose it.
    for (const [i, m] of MEMBERS.entries()) console.log(`profile of ${m}${i === rows.at(-1)?.leaderIndex ? ' (leader)' : ''}: pid ${group.manager(m).pid}`);
    await Promise.all(MEMBERS.map((m) => group.manager(m).signal('SIGTERM')));
    console.log(`CPU profiles in ${profileDir}`);
  }
  await group.stop();
  return { rows, queuedRows };
}

interface RaftKvRow {
  opsPerSec: number;
  p50: number;
  p99: number;
  /** CPU ms per put, the three members together (the load generator's not included). */
  membersCpuMs: number;
}

/** Runs bench/raft-kv/main.ts (it exports no function) and parses its 'ours' phase lines. */
async function benchRaftKv(phaseSeconds: number): Promise<Map<number, RaftKvRow>> {
  const args = ['--import', 'tsx', path.join(REPO_ROOT, 'bench/raft-kv/main.ts'), '--seconds', String(phaseSeconds), '--concurrency', concurrencies.join(','), ...(flags.insecure ? ['--insecure'] : [])];
  const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    process.stdout.write(chunk);
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const rows = new Map<number, RaftKvRow>();
  for (const m of out.matchAll(/^ours\s+c=\s*(\d+)\s+(\d+) ops\/s\s+p50\s+([\d.]+)\s+p95\s+[\d.]+\s+p99\s+([\d.]+).*cpu ms\/op ([\d.]+) =/gm)) {
    rows.set(Number(m[1]), { opsPerSec: Number(m[2]), p50: Number(m[3]), p99: Number(m[4]), membersCpuMs: Number(m[5]) });
  }
  if (rows.size === 0) console.log(`bench/raft-kv printed no phase lines (exit code ${code}); its column is left empty`);
  return rows;
}

/** A table cell: `x` with `d` decimals, right-aligned in `w` characters. */
const n = (x: number, w: number, d = 0) => x.toFixed(d).padStart(w);
/** An empty table cell. */
const dash = (w: number) => '-'.padStart(w);
/** The leader's CPU ms and all members' together, the leader's cell `w` wide. */
const cpuCells = (c: CpuUse, leaderIndex: number, w: number) => `${n(c.members[leaderIndex] ?? 0, w, 2)} ${n(c.members.reduce((a, b) => a + b, 0), 4, 2)}`;

function printQueued(rows: QueuedRow[], kv: Map<number, RaftKvRow>): void {
  if (rows.length === 0) return;
  console.log('\nSubmissions alone (queued behind one busy host: no job runs beside them) vs raft-kv puts');
  console.log('  c | submissions acked/s   p50    p99 | CPU ms/submission leader  all | raft-kv puts/s   p50 CPU ms/put');
  for (const r of rows) {
    const k = kv.get(r.concurrency);
    const kvCols = k ? `${n(k.opsPerSec, 14)} ${n(k.p50, 5, 2)} ${n(k.membersCpuMs, 10, 2)}` : `${dash(14)} ${dash(5)} ${dash(10)}`;
    console.log(
      `${n(r.concurrency, 3)} | ${n(r.submissions.opsPerSec, 19)} ${n(r.submissions.p50, 5, 1)} ${n(r.submissions.p99, 6, 1)} | ` +
        `${cpuCells(r.cpuMs, r.leaderIndex, 24)} | ${kvCols}`,
    );
  }
}

function printSideBySide(rows: EmitRow[], bare: BareHttpRow[], kv: Map<number, RaftKvRow>): void {
  console.log(`\nEmit on 3 kcm managers vs bare HTTP vs raft-kv puts, ${seconds} s per phase, same machine, same run (latencies in ms)`);
  console.log('  c | jobs acked/s   p50    p99 | jobs ended/s | CPU ms/job leader  all | queries/s   p50    p99 | bare HTTP req/s | raft-kv puts/s   p50    p99 CPU ms/put');
  for (const r of rows) {
    const k = kv.get(r.concurrency);
    const b = bare.find((x) => x.concurrency === r.concurrency);
    const kvCols = k ? `${n(k.opsPerSec, 14)} ${n(k.p50, 5, 2)} ${n(k.p99, 6, 2)} ${n(k.membersCpuMs, 10, 2)}` : `${dash(14)} ${dash(5)} ${dash(6)} ${dash(10)}`;
    console.log(
      `${n(r.concurrency, 3)} | ${n(r.jobs.opsPerSec, 12)} ${n(r.jobs.p50, 5, 1)} ${n(r.jobs.p99, 6, 1)} | ${n(r.jobsEndedPerSec, 12)} | ` +
        `${cpuCells(r.jobCpuMs, r.leaderIndex, 17)} | ` +
        `${n(r.queries.opsPerSec, 9)} ${n(r.queries.p50, 5, 1)} ${n(r.queries.p99, 6, 1)} | ${b ? n(b.result.opsPerSec, 15) : dash(15)} | ${kvCols}`,
    );
  }
  const errors = rows.reduce((s, r) => s + r.jobs.errors + r.queries.errors, 0);
  console.log(`failed requests (not acknowledged / not answered): ${errors}`);
  console.log('CPU ms/job: all three managers per acknowledged job (to its end); CPU ms/put: raft-kv\'s three members per put. Load generators not included in either.');
}

async function main(): Promise<void> {
  console.log(`emit benchmark: ${seconds} s per phase, concurrency ${concurrencies.join(', ')}`);
  const { rows, queuedRows } = await benchEmit();
  const bare = flags['skip-bare-http'] ? [] : await benchBareHttp(concurrencies, seconds);
  const kv = flags['skip-raft-kv'] ? new Map<number, RaftKvRow>() : await benchRaftKv(Number(flags['raft-kv-seconds'] ?? seconds));
  printSideBySide(rows, bare, kv);
  printQueued(queuedRows, kv);
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => {
    closeConnections();
    return group.stop();
  });
