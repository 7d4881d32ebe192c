// npm run bench:scale:failure [-- --hosts 1000 --clusters 1000 --rounds 20 --older-agents]
//
// The leader's shard failure detector (services/manager/src/leader/shard-failure-detector.ts) at
// fleet scale: every shard master of `clusters` clusters (3 shards each: 3,000 masters at
// 1,000 clusters) judged every failureDetectIntervalMs (500 ms by default), with the
// manager's real agent pool (AgentPool: gRPC over mutual TLS) against the HOLLOW fleet
// (hollow-agents.ts, a simulator for the control plane only: no engine runs; every master
// answers ReplicationStatus and beats WatchStatus as healthy; with --older-agents it serves no
// WatchStatus, and the detector calls each master's agent every round). The detector runs in this process against the
// state a manager would hold (loadFleetStateDirectly, every cluster ready); the fleet is one
// child process, so the two sides' CPU is measured apart.
//
// Prints, for the steady rounds: round time against the interval, this process's CPU per
// round and per second over them all (beats arrive between rounds), the fleet's, masters
// judged from beats, SQL pings per round (a new MariaDB connection each: the healthy case
// should need none), GC pauses, and the longest event-loop block while rounds ran. Run it under the
// system-test lock (it listens on 127.54.x.x:58154).

import os from 'node:os';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { AgentPool, loadTlsMaterial, useTls } from '@kcm/agent-api';
import { silentLogger } from '@kcm/common';
import { DEFAULT_FAILURE_DETECT_INTERVAL_MS, ShardFailureDetector, type Command } from '@kcm/manager';
import { testCert } from '../../test/helpers/pki';
import { testSecretBox } from '../../test/helpers/secrets';
import { cpuSecondsOf, processCpuSeconds, startHollowFleet } from './fleet-process';
import { hollowHosts } from './hollow-agents';
import { loadFleetStateDirectly } from './meta-state';

const FIRST = '127.54.0.1';
const PORT = 58154;

const fmt = (s: number) => `${s.toFixed(2)} s`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      hosts: { type: 'string', default: '1000' },
      clusters: { type: 'string', default: '1000' },
      rounds: { type: 'string', default: '20' },
      'ping-after-ms': { type: 'string' },
      'older-agents': { type: 'boolean', default: false },
    },
  });
  const [hostCount, clusterCount, roundCount] = [values.hosts, values.clusters, values.rounds].map(Number);
  const intervalMs = DEFAULT_FAILURE_DETECT_INTERVAL_MS;
  console.log(`load average before: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} (${os.cpus().length} cores)`);
  const hosts = hollowHosts(FIRST, hostCount);
  const state = loadFleetStateDirectly(hostCount, clusterCount, 0, FIRST);
  for (const cluster of Object.values(state.clusters)) cluster.status = 'ready'; // BENCH-ONLY: no job ran
  const masters = Object.values(state.clusters).reduce((n, c) => n + Object.keys(c.shards).length, 0);

  useTls(loadTlsMaterial(testCert('manager', ['127.0.0.1']), 'manager'));
  const fleet = await startHollowFleet(hosts, PORT, { olderAgents: values['older-agents'] });
  const pool = new AgentPool(PORT);
  const proposed: Command[] = [];
  const detector = new ShardFailureDetector({
    store: { state: () => state, propose: async (cmd: Command) => (proposed.push(cmd), { ok: true as const, value: { jobId: '0' } }) },
    agents: pool,
    secrets: testSecretBox(),
    logger: silentLogger(),
    intervalMs,
    sqlPingAfterMs: values['ping-after-ms'] === undefined ? undefined : Number(values['ping-after-ms']),
  });
  console.log(`${hostCount} hollow hosts, ${clusterCount} ready clusters: ${masters} shard masters judged every ${intervalMs} ms`);

  const rounds: { seconds: number; cpuS: number; fleetCpuS: number; pings: number; fromBeats: number }[] = [];
  const blocks = monitorEventLoopDelay({ resolution: 10 });
  const gcPauses: { minor: boolean; ms: number }[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcPauses.push({ minor: (e as { detail?: { kind?: number } }).detail?.kind === 1, ms: e.duration });
  });
  let overran = 0;
  let steadyFrom = { ms: 0, cpu: 0, fleetCpu: 0 };
  // Two rounds before the steady ones: the first opens every connection (and the streams), the second takes the first beats.
  const warmRounds = 2;
  for (let i = 0; i < warmRounds + roundCount; i++) {
    if (i === warmRounds) {
      blocks.enable();
      gcObserver.observe({ entryTypes: ['gc'] });
      steadyFrom = { ms: performance.now(), cpu: processCpuSeconds(), fleetCpu: cpuSecondsOf(fleet.pid!) };
    }
    const [t0, cpu0, fleet0, pings0, beats0] = [performance.now(), processCpuSeconds(), cpuSecondsOf(fleet.pid!), detector.sqlPings, detector.judgedFromBeats];
    await detector.checkAll();
    const seconds = (performance.now() - t0) / 1000;
    rounds.push({ seconds, cpuS: processCpuSeconds() - cpu0, fleetCpuS: cpuSecondsOf(fleet.pid!) - fleet0, pings: detector.sqlPings - pings0, fromBeats: detector.judgedFromBeats - beats0 });
    if (i >= warmRounds && seconds * 1000 > intervalMs) overran++;
    if (seconds * 1000 < intervalMs) await sleep(intervalMs - seconds * 1000); // the next tick, as PeriodicRounds would start it
  }
  const steadyS = (performance.now() - steadyFrom.ms) / 1000;
  const [managerCpuPerS, fleetCpuPerS] = [(processCpuSeconds() - steadyFrom.cpu) / steadyS, (cpuSecondsOf(fleet.pid!) - steadyFrom.fleetCpu) / steadyS];
  blocks.disable();
  gcObserver.disconnect();
  await detector.stop();
  const [first] = rounds;
  const steady = rounds.slice(warmRounds);
  console.log(`first round (new TLS connections, streams opened): ${fmt(first.seconds)}, CPU ${fmt(first.cpuS)}, SQL pings ${first.pings}`);
  console.log(`steady rounds (${steady.length}): median ${fmt(median(steady.map((r) => r.seconds)))}, max ${fmt(Math.max(...steady.map((r) => r.seconds)))} ` +
    `(interval ${fmt(intervalMs / 1000)}; ${overran} overran it)`);
  console.log(`CPU per steady round: manager median ${fmt(median(steady.map((r) => r.cpuS)))} (${((100 * median(steady.map((r) => r.cpuS))) / (intervalMs / 1000)).toFixed(0)}% of a core at one round per interval), ` +
    `fleet median ${fmt(median(steady.map((r) => r.fleetCpuS)))}`);
  console.log(`CPU over the steady rounds (${steadyS.toFixed(1)} s), per second: manager ${managerCpuPerS.toFixed(3)} s/s, fleet ${fleetCpuPerS.toFixed(3)} s/s`);
  console.log(`masters judged from a WatchStatus beat per steady round: median ${median(steady.map((r) => r.fromBeats))} (of ${masters}); the others by a call`);
  console.log(`SQL pings per steady round: median ${median(steady.map((r) => r.pings))} (of ${masters} masters)`);
  const pauses = (xs: number[]) => (xs.length ? `${xs.length}, max ${Math.max(...xs).toFixed(1)} ms, total ${xs.reduce((a, b) => a + b, 0).toFixed(0)} ms` : '0');
  console.log(`GC pauses during steady rounds: scavenges ${pauses(gcPauses.filter((g) => g.minor).map((g) => g.ms))}; other ${pauses(gcPauses.filter((g) => !g.minor).map((g) => g.ms))}`);
  console.log(`longest event-loop block during steady rounds: ${(blocks.max / 1e6).toFixed(0)} ms (p99 ${(blocks.percentile(99) / 1e6).toFixed(0)} ms)`);
  console.log(`failovers submitted: ${proposed.length} (every master is healthy: expected 0)`);
  console.log(`load average after: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);

  pool.close();
  await new Promise((r) => {
    fleet.once('exit', r);
    fleet.kill('SIGTERM');
  });
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
