// npm run bench:raft-kv -- [--seconds N] [--concurrency 1,8,64,256] [--vs-etcd] [--leader-member I] [--slices K] [--insecure] [--snapshot-entries N]
//
// Starts 3 raft-kv members (server.ts) on 127.0.0.11-13 and, with --vs-etcd (and
// /usr/bin/etcd present), a 3-member etcd on 127.0.0.21-23, and runs the etcd reference
// workload (workload.ts) on each at every concurrency, clients spread round-robin over
// all members (worker w talks to member w % 3).
//
// Fair comparison on a noisy 2-core machine:
// - Both systems get the same topology: before measuring, each one's leadership is moved
//   to member `--leader-member` (default 1, so the c=1 client, which talks to member 0,
//   goes through a follower that forwards its puts, the case of 2 out of 3 random
//   elections). Without this the c=1 row compares wherever each election happened to land.
// - Both are up for the whole run, but only one is under load at a time. Each phase
//   (10 s by default) is cut into K slices per system (default 2) run in ABBA order
//   (ours, etcd, etcd, ours, ...), so slow minutes of the machine fall on both alike;
//   the slices' latencies are pooled into one distribution per system and phase.
//
// `--ab-node-args '<node flags>'` (instead of --vs-etcd) compares our build with itself:
// a second raft-kv group on 127.0.0.14-16 runs with those Node flags, interleaved the same
// way, to A/B a runtime setting on a machine too noisy for runs minutes apart.
//
// Child processes and temp dirs are removed on exit, Ctrl-C included.

import { parseArgs } from 'node:util';
import { KvCluster, sleep } from './cluster';
import { useTestTls } from '../../test/helpers/pki';
import { CpuMeter, addCpu, perOp, type CpuUse } from './cpu';
import { EtcdCluster, etcdAvailable } from './etcd';
import { collectSamples, formatPhase, runPhase, summarize, type PutFn, type Samples } from './workload';
import type { PhaseResult } from './workload';

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '1,8,64,256' },
    'vs-etcd': { type: 'boolean', default: false },
    'leader-member': { type: 'string', default: '1' },
    slices: { type: 'string', default: '2' },
    'ab-node-args': { type: 'string' },
    // Snapshot every N applied entries (the members' default is 100,000): a smaller N puts
    // snapshots inside the phases even when a shared machine gives only ~1,000 puts/s.
    'snapshot-entries': { type: 'string' },
    // Plaintext links instead of mutual TLS (kcm's default), to measure what TLS costs.
    insecure: { type: 'boolean', default: false },
  },
});
const seconds = Number(flags.seconds);
const concurrencies = flags.concurrency.split(',').map(Number);
const leaderMember = Number(flags['leader-member']);
const slices = Math.max(1, Number(flags.slices));
if (![0, 1, 2].includes(leaderMember)) throw new Error('--leader-member must be 0, 1 or 2');

// The load generator's clients use the same CA (and a manager certificate) as the members.
const tls = flags.insecure ? undefined : useTestTls(['127.0.0.11', '127.0.0.12', '127.0.0.13', '127.0.0.14', '127.0.0.15', '127.0.0.16']).files;
console.log(`links: ${tls ? 'mutual TLS' : 'plaintext (--insecure)'}`);

const cleanups: (() => Promise<void>)[] = [];
async function cleanUp(): Promise<void> {
  while (cleanups.length > 0) await cleanups.pop()!().catch(() => {});
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\n${signal}: stopping the clusters\n`);
    void cleanUp().finally(() => process.exit(130));
  });
}

interface FsyncCounts {
  leader: number;
  total: number;
  leaderIndex: number;
}

/** What the phase loop needs of a system under test: only these differ between ours and etcd. */
interface SystemUnderTest {
  label: string;
  put: PutFn;
  fsyncCounts(): Promise<FsyncCounts>;
  pids(): (number | undefined)[];
  moveLeader(index: number): Promise<void>;
  /** A counter that grows by one per election (or leader change): compared before and after each slice. */
  elections(): Promise<number>;
}

async function startOurs(variant?: { label: string; nodeArgs: string[] }): Promise<SystemUnderTest> {
  const cluster = await KvCluster.start({
    hosts: variant ? ['127.0.0.14', '127.0.0.15', '127.0.0.16'] : ['127.0.0.11', '127.0.0.12', '127.0.0.13'],
    raftPort: variant ? 7321 : 7311,
    kvPort: variant ? 7322 : 7312,
    tickMs: 100,
    electionTick: 10,
    nodeArgs: variant?.nodeArgs,
    tls,
    snapshotEntries: flags['snapshot-entries'] === undefined ? undefined : Number(flags['snapshot-entries']),
  });
  cleanups.push(() => cluster.stop());
  await cluster.waitForLeader();
  return {
    label: variant?.label ?? 'ours',
    put: async (w, key, value) => (await cluster.members[w % 3].session.put(key, value)).error === '',
    fsyncCounts: async () => {
      const statuses = await cluster.statuses();
      const leaderIndex = statuses.findIndex((s) => s?.role === 'leader');
      return {
        leader: statuses[leaderIndex]?.storageSyncedWrites ?? 0,
        total: statuses.reduce((sum, s) => sum + (s?.storageSyncedWrites ?? 0), 0),
        leaderIndex,
      };
    },
    pids: () => cluster.members.map((m) => m.process?.pid),
    moveLeader: (index) => cluster.moveLeader(index),
    elections: async () => Math.max(0, ...(await cluster.statuses()).map((s) => s?.term ?? 0)),
  };
}

async function startEtcd(): Promise<SystemUnderTest> {
  const etcd = await EtcdCluster.start(['127.0.0.21', '127.0.0.22', '127.0.0.23']);
  cleanups.push(() => etcd.stop());
  return {
    label: 'etcd',
    put: (w, key, value) => etcd.put(w % 3, key, value),
    fsyncCounts: () => etcd.fsyncCounts(),
    pids: () => etcd.pids(),
    moveLeader: (index) => etcd.moveLeader(index),
    elections: () => etcd.leaderChangesSeen(),
  };
}

/** Two seconds of light load first: connections open, JIT warm, leader's no-op committed. */
async function warmUp(system: SystemUnderTest, round: number): Promise<void> {
  await runPhase({ concurrency: 3, seconds: 2, keyPrefix: `${system.label}/warmup${round}`, put: system.put });
  await sleep(200);
}

/** Warms every system up and moves its leadership to `--leader-member`. */
async function prepare(systems: SystemUnderTest[]): Promise<void> {
  for (const system of systems) {
    await warmUp(system, 1);
    await system.moveLeader(leaderMember);
    await warmUp(system, 2); // the new leader's connections and JIT too
  }
}

/** One phase of every system at `concurrency`, in ABBA slices; one result per system, in order. */
async function runPhaseOfAll(systems: SystemUnderTest[], concurrency: number): Promise<PhaseResult[]> {
  const samples: Samples[][] = systems.map(() => []);
  const cpu: CpuUse[] = systems.map((s) => ({ members: s.pids().map(() => 0), client: 0 }));
  const fsyncs = systems.map(() => ({ leader: 0, total: 0, leaderIndex: -1 }));
  const elections = systems.map(() => 0);
  for (let slice = 0; slice < slices; slice++) {
    const order = systems.map((_, i) => i);
    if (slice % 2 === 1) order.reverse();
    for (const i of order) {
      const system = systems[i];
      const meter = new CpuMeter(system.pids);
      const before = await system.fsyncCounts();
      const electionsBefore = await system.elections();
      meter.start();
      const keyPrefix = `${system.label}/c${concurrency}/s${slice}`;
      samples[i].push(await collectSamples({ concurrency, seconds: seconds / slices, keyPrefix, put: system.put }));
      cpu[i] = addCpu(cpu[i], meter.used());
      const after = await system.fsyncCounts();
      elections[i] += (await system.elections()) - electionsBefore;
      fsyncs[i].leader += after.leader - before.leader;
      fsyncs[i].total += after.total - before.total;
      fsyncs[i].leaderIndex = after.leaderIndex;
    }
  }
  return systems.map((system, i) => {
    const r = summarize(concurrency, samples[i]);
    r.leaderFsyncs = fsyncs[i].leader;
    r.totalFsyncs = fsyncs[i].total;
    if (fsyncs[i].leaderIndex >= 0) r.leaderMember = fsyncs[i].leaderIndex;
    r.cpuMsPerOp = perOp(cpu[i], r.ops);
    r.leaderChanges = elections[i];
    console.log(formatPhase(system.label, r));
    return r;
  });
}

function printComparison(ours: PhaseResult[], etcd: PhaseResult[]): void {
  console.log('\n  c | ops/s ours   etcd  ratio | p50 ours  etcd | p99 ours  etcd  ratio | max ours  etcd | ops/fsync ours etcd | cpu ms/op ours etcd');
  for (let i = 0; i < ours.length; i++) {
    const o = ours[i];
    const e = etcd[i];
    const perFsync = (r: PhaseResult) => (r.leaderFsyncs ? (r.ops / r.leaderFsyncs).toFixed(1) : '-');
    const cpu = (r: PhaseResult) => (r.cpuMsPerOp ? r.cpuMsPerOp.members.reduce((a, b) => a + b, 0) + r.cpuMsPerOp.client : 0).toFixed(2);
    console.log(
      `${String(o.concurrency).padStart(3)} | ${o.opsPerSec.toFixed(0).padStart(9)} ${e.opsPerSec.toFixed(0).padStart(6)} ` +
        `${(o.opsPerSec / e.opsPerSec).toFixed(2).padStart(6)} | ${o.p50.toFixed(2).padStart(8)} ${e.p50.toFixed(2).padStart(5)} | ` +
        `${o.p99.toFixed(2).padStart(8)} ${e.p99.toFixed(2).padStart(5)} ${(o.p99 / e.p99).toFixed(2).padStart(6)} | ` +
        `${o.max.toFixed(1).padStart(8)} ${e.max.toFixed(1).padStart(5)} | ${perFsync(o).padStart(14)} ${perFsync(e).padStart(4)} | ` +
        `${cpu(o).padStart(14)} ${cpu(e).padStart(4)}`,
    );
  }
  const pass =
    ours.every((o, i) => o.p99 <= etcd[i].p99) &&
    ours.filter((o) => o.concurrency >= 64).every((o) => o.opsPerSec >= etcd[ours.indexOf(o)].opsPerSec);
  console.log('cpu ms/op: all three members and the load generator together');
  console.log(`\ntarget (c>=64 ops/s >= etcd, p99 <= etcd at every c): ${pass ? 'MET' : 'NOT MET'}`);
}

async function main(): Promise<void> {
  const abArgs = flags['ab-node-args'];
  if (abArgs !== undefined) return abTest(abArgs.split(' ').filter((a) => a.length > 0));
  const withEtcd = flags['vs-etcd'] && etcdAvailable();
  if (flags['vs-etcd'] && !withEtcd) console.log('--vs-etcd: /usr/bin/etcd not found (apt-get install etcd-server); measuring ours only');
  console.log(
    `raft-kv benchmark: ${seconds} s per phase${withEtcd ? ` in ${slices} ABBA slices per system` : ''}, ` +
      `concurrency ${concurrencies.join(', ')}, 128-byte values, leader on member ${leaderMember} ` +
      `(the c=1 client talks to member 0: ${leaderMember === 0 ? 'the leader' : 'a follower that forwards'})`,
  );
  const systems = [await startOurs()];
  if (withEtcd) systems.push(await startEtcd());
  await prepare(systems);

  const results: PhaseResult[][] = systems.map(() => []);
  for (const concurrency of concurrencies) {
    const phase = await runPhaseOfAll(withEtcd ? systems : systems.slice(0, 1), concurrency);
    phase.forEach((r, i) => results[i].push(r));
  }
  if (withEtcd) printComparison(results[0], results[1]);
}

/** Ours with the default Node flags (A) against ours with `nodeArgs` (B), interleaved. */
async function abTest(nodeArgs: string[]): Promise<void> {
  console.log(`A/B: ours (A) vs ours with node flags [${nodeArgs.join(' ')}] (B), ${seconds} s per phase in ${slices} ABBA slices`);
  const systems = [await startOurs(), await startOurs({ label: 'ours-B', nodeArgs })];
  await prepare(systems);
  for (const concurrency of concurrencies) await runPhaseOfAll(systems, concurrency);
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => cleanUp());
