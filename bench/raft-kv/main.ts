// npm run bench:raft-kv -- [--seconds N] [--concurrency 1,8,64,256] [--vs-etcd]
//
// Starts 3 raft-kv members (server.ts) on 127.0.0.11-13, waits for a leader, and runs
// the etcd reference workload (workload.ts) at each concurrency, clients spread
// round-robin over all members. With --vs-etcd (and /usr/bin/etcd present) it then runs
// the identical workload against a 3-member etcd on 127.0.0.21-23 and prints both side
// by side. The two systems never run at the same time. Child processes and temp dirs
// are removed on exit, Ctrl-C included.

import { parseArgs } from 'node:util';
import { KvCluster, sleep } from './cluster';
import { CpuMeter } from './cpu';
import { EtcdCluster, etcdAvailable } from './etcd';
import { formatPhase, runPhase } from './workload';
import type { PhaseResult } from './workload';

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '1,8,64,256' },
    'vs-etcd': { type: 'boolean', default: false },
  },
});
const seconds = Number(flags.seconds);
const concurrencies = flags.concurrency.split(',').map(Number);

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

/** The phases of the workload, identical for both systems: only the put and the fsync counter differ. */
async function runPhases(
  label: 'ours' | 'etcd',
  keySpace: string,
  put: (worker: number, key: string, value: Uint8Array) => Promise<boolean>,
  fsyncCounts: () => Promise<FsyncCounts>,
  pids: () => (number | undefined)[],
): Promise<PhaseResult[]> {
  const results: PhaseResult[] = [];
  const cpu = new CpuMeter(pids);
  for (const concurrency of concurrencies) {
    const before = await fsyncCounts();
    cpu.start();
    const r = await runPhase({ concurrency, seconds, keyPrefix: `${keySpace}/c${concurrency}`, put });
    r.cpuMsPerOp = cpu.perOp(r.ops);
    const after = await fsyncCounts();
    r.leaderFsyncs = after.leader - before.leader;
    r.totalFsyncs = after.total - before.total;
    if (after.leaderIndex >= 0) r.leaderMember = after.leaderIndex;
    console.log(formatPhase(label, r));
    results.push(r);
  }
  return results;
}

async function benchRaftKv(): Promise<PhaseResult[]> {
  const cluster = await KvCluster.start({
    hosts: ['127.0.0.11', '127.0.0.12', '127.0.0.13'],
    raftPort: 7311,
    kvPort: 7312,
    tickMs: 100,
    electionTick: 10,
  });
  cleanups.push(() => cluster.stop());
  const leader = await cluster.waitForLeader();
  console.log(`raft-kv: leader is ${cluster.members[leader].id}`);
  await warmUp((w, key, value) => cluster.members[w % 3].session.put(key, value).then((r) => r.error === ''));

  const fsyncs = async () => {
    const statuses = await cluster.statuses();
    const leaderIndex = statuses.findIndex((s) => s?.role === 'leader');
    return {
      leader: statuses[leaderIndex]?.storageSyncedWrites ?? 0,
      total: statuses.reduce((sum, s) => sum + (s?.storageSyncedWrites ?? 0), 0),
      leaderIndex,
    };
  };
  const results = await runPhases('ours', 'raft-kv', async (w, key, value) => (await cluster.members[w % 3].session.put(key, value)).error === '', fsyncs, () =>
    cluster.members.map((m) => m.process?.pid),
  );
  await cleanups.pop()!();
  return results;
}

async function benchEtcd(): Promise<PhaseResult[]> {
  const etcd = await EtcdCluster.start(['127.0.0.21', '127.0.0.22', '127.0.0.23']);
  cleanups.push(() => etcd.stop());
  await warmUp((w, key, value) => etcd.put(w % 3, key, value));
  const results = await runPhases('etcd', 'etcd', (w, key, value) => etcd.put(w % 3, key, value), () => etcd.fsyncCounts(), () => etcd.pids());
  await cleanups.pop()!();
  return results;
}

/** Two seconds of light load first: connections open, JIT warm, leader's no-op committed. */
async function warmUp(put: (w: number, key: string, value: Uint8Array) => Promise<boolean>): Promise<void> {
  await runPhase({ concurrency: 3, seconds: 2, keyPrefix: 'warmup', put });
  await sleep(200);
}

function printComparison(ours: PhaseResult[], etcd: PhaseResult[]): void {
  console.log('\n  c | ops/s ours   etcd  ratio | p50 ours  etcd | p99 ours  etcd  ratio | max ours  etcd | ops/fsync ours etcd');
  for (let i = 0; i < ours.length; i++) {
    const o = ours[i];
    const e = etcd[i];
    const perFsync = (r: PhaseResult) => (r.leaderFsyncs ? (r.ops / r.leaderFsyncs).toFixed(1) : '-');
    console.log(
      `${String(o.concurrency).padStart(3)} | ${o.opsPerSec.toFixed(0).padStart(9)} ${e.opsPerSec.toFixed(0).padStart(6)} ` +
        `${(o.opsPerSec / e.opsPerSec).toFixed(2).padStart(6)} | ${o.p50.toFixed(2).padStart(8)} ${e.p50.toFixed(2).padStart(5)} | ` +
        `${o.p99.toFixed(2).padStart(8)} ${e.p99.toFixed(2).padStart(5)} ${(o.p99 / e.p99).toFixed(2).padStart(6)} | ` +
        `${o.max.toFixed(1).padStart(8)} ${e.max.toFixed(1).padStart(5)} | ${perFsync(o).padStart(14)} ${perFsync(e).padStart(4)}`,
    );
  }
  const pass =
    ours.every((o, i) => o.p99 <= etcd[i].p99) &&
    ours.filter((o) => o.concurrency >= 64).every((o) => o.opsPerSec >= etcd[ours.indexOf(o)].opsPerSec);
  const c1 = ours.findIndex((o) => o.concurrency === 1);
  if (c1 >= 0) {
    const where = (r: PhaseResult) => (r.leaderMember === undefined ? 'unknown' : r.leaderMember === 0 ? 'the leader' : 'a follower');
    console.log(`c=1 talks to member 0 only: ours ${where(ours[c1])}, etcd ${where(etcd[c1])} (a follower forwards every put)`);
  }
  console.log(`\ntarget (c>=64 ops/s >= etcd, p99 <= etcd at every c): ${pass ? 'MET' : 'NOT MET'}`);
}

async function main(): Promise<void> {
  console.log(`raft-kv benchmark: ${seconds} s per phase, concurrency ${concurrencies.join(', ')}, 128-byte values`);
  const ours = await benchRaftKv();
  if (!flags['vs-etcd']) return;
  if (!etcdAvailable()) {
    console.log('--vs-etcd: /usr/bin/etcd not found (apt-get install etcd-server); skipping the comparison');
    return;
  }
  const etcd = await benchEtcd();
  printComparison(ours, etcd);
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => cleanUp());
