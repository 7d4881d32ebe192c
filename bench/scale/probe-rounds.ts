// npm run bench:scale:probe [-- --hosts 1000 --interval-ms 2000 --dead-after-ms 30000 --steady-rounds 10 --silence 10 --hang 10 --older-agents]
//
// The leader's health monitor (services/manager/src/leader/health-monitor.ts) with the manager's
// real agent pool (AgentPool: gRPC over mutual TLS) against the HOLLOW fleet
// (hollow-agents.ts, a simulator for the control plane only: no engine runs). The monitor
// runs in this process with a single-member store; the fleet is one child process, so the
// CPU of the two sides is measured apart (this process: process.cpuUsage; the fleet:
// /proc/<pid>/stat).
//
// Prints: the first round (every connection is new: a TCP connect and a TLS handshake per
// host, and a Watch stream opened) and the steady rounds, each with this process's CPU and
// the fleet's, CPU per second over them (beats are handled between rounds), this process's
// GC pauses and longest event-loop delay meanwhile; ticks that
// found a round still running; then the time from silencing `--silence` hosts (they answer
// UNAVAILABLE at once) and hanging `--hang` others (they never answer: only the call's
// deadline ends it) to their being marked dead, against machineDeadAfterMs + one interval,
// the rounds meanwhile, and whether any host that kept answering was ever seen unreachable
// or marked dead. Run it under the system-test lock (it listens on 127.52.x.x:58152).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { AgentPool, loadTlsMaterial, useTls } from '@kcm/agent-api';
import { silentLogger } from '@kcm/common';
import { CommandKind, HealthMonitor, type Command } from '@kcm/manager';
import { LocalStore } from '../../services/manager/test/helpers/local-store';
import { testCert } from '../../test/helpers/pki';
import { cpuSecondsOf, processCpuSeconds, startHollowFleet } from './fleet-process';
import { hollowHosts } from './hollow-agents';

const FIRST = '127.52.0.1';
const PORT = 58152;

interface Round {
  startedMs: number;
  seconds: number;
  managerCpuS: number;
  fleetCpuS: number;
}

function registered(hostaddr: string, machineType: 'storage' | 'computer'): Command {
  return {
    kind: CommandKind.MachineRegistered, at: Date.now(), hostaddr, machineType, portLow: 5000, portHigh: 5199, rackId: 'r1',
    datadir: '/kcm/data', logdir: '/kcm/log', walLogDir: '/kcm/wal', compDatadir: '/kcm/comp', totalMemMb: 65_536, totalCpuCores: 16, facts: null,
  } as Command;
}

const fmt = (s: number) => `${s.toFixed(2)} s`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      hosts: { type: 'string', default: '1000' },
      'interval-ms': { type: 'string', default: '2000' },
      'dead-after-ms': { type: 'string', default: '30000' },
      'steady-rounds': { type: 'string', default: '10' },
      silence: { type: 'string', default: '10' },
      hang: { type: 'string', default: '10' },
      // Agents older than Agent.Watch: the monitor polls each host with a Health call per round.
      'older-agents': { type: 'boolean', default: false },
    },
  });
  const [hostCount, intervalMs, deadAfterMs, steadyRounds, silenceCount, hangCount] =
    [values.hosts, values['interval-ms'], values['dead-after-ms'], values['steady-rounds'], values.silence, values.hang].map(Number);
  const hosts = hollowHosts(FIRST, hostCount);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kcm-bench-probe-'));
  const silentFile = path.join(dir, 'silent');
  const hungFile = path.join(dir, 'hung');
  console.log(`load average before: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} (${os.cpus().length} cores)`);

  useTls(loadTlsMaterial(testCert('manager', ['127.0.0.1']), 'manager'));
  let t0 = Date.now();
  const fleet = await startHollowFleet(hosts, PORT, { silentFile, hungFile, olderAgents: values['older-agents'] });
  console.log(`hollow fleet: ${hostCount} endpoints listening after ${fmt((Date.now() - t0) / 1000)}`);

  const store = new LocalStore();
  for (const h of hosts) for (const type of ['storage', 'computer'] as const) await store.propose(registered(h, type));

  const pool = new AgentPool(PORT);
  const rounds: Round[] = [];
  let skippedTicks = 0;
  let roundOpen: { startedMs: number; cpu: number; fleetCpu: number } | undefined;
  const monitor = new HealthMonitor({
    store, withAgent: pool.withAgent, logger: silentLogger(), intervalMs, deadAfterMs,
    onRoundStart() {
      roundOpen = { startedMs: Date.now(), cpu: processCpuSeconds(), fleetCpu: cpuSecondsOf(fleet.pid!) };
    },
    onRoundEnd(seconds) {
      if (!roundOpen) return;
      rounds.push({ startedMs: roundOpen.startedMs, seconds, managerCpuS: processCpuSeconds() - roundOpen.cpu, fleetCpuS: cpuSecondsOf(fleet.pid!) - roundOpen.fleetCpu });
      roundOpen = undefined;
    },
    onTickSkipped() {
      skippedTicks++;
    },
  });

  // Spread over the fleet; hosts that answer and were ever seen unreachable, or marked dead, are false verdicts.
  const spread = (count: number, offset: number) => Array.from({ length: count }, (_, i) => hosts[Math.floor((i * hostCount) / count) + offset]);
  const silenced = new Set(spread(silenceCount, 0));
  const hung = new Set(spread(hangCount, 1));
  const stopped = new Set([...silenced, ...hung]);
  const falselyUnreachable = new Set<string>();
  const watch = setInterval(() => {
    for (const h of hosts) if (!stopped.has(h) && monitor.reachability(h)?.reachable === false) falselyUnreachable.add(h);
  }, 100);

  monitor.start();
  const until = async (cond: () => boolean, ms: number) => {
    const end = Date.now() + ms;
    while (!cond()) {
      if (Date.now() > end) return false;
      await new Promise((r) => setTimeout(r, 20));
    }
    return true;
  };
  // The steady rounds' cost to the leader's event loop: its longest block and V8's pauses
  // (the scavenges a round's allocation causes are what the snapshot-block target competes with).
  await until(() => rounds.length >= 1, 600_000);
  const loop = monitorEventLoopDelay({ resolution: 5 });
  const gcPauses: { kind: number; ms: number }[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcPauses.push({ kind: ((e as { detail?: { kind?: number } }).detail?.kind) ?? 0, ms: e.duration });
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  loop.enable();
  const steadyFrom = { ms: Date.now(), cpu: processCpuSeconds(), fleetCpu: cpuSecondsOf(fleet.pid!) };
  await until(() => rounds.length >= 1 + steadyRounds, 600_000);
  const steadyWallS = (Date.now() - steadyFrom.ms) / 1000;
  // Per second of the whole steady phase, not per round: watch beats are handled between rounds.
  const managerCpuPerS = (processCpuSeconds() - steadyFrom.cpu) / steadyWallS;
  const fleetCpuPerS = (cpuSecondsOf(fleet.pid!) - steadyFrom.fleetCpu) / steadyWallS;
  loop.disable();
  gcObserver.disconnect();
  const [first, ...steady] = rounds;
  console.log(`first round (a new TLS connection per host): ${fmt(first.seconds)}; CPU: manager ${fmt(first.managerCpuS)}, fleet ${fmt(first.fleetCpuS)}`);
  const steadyS = steady.map((r) => r.seconds);
  console.log(`steady rounds (${steady.length}): median ${fmt(median(steadyS))}, max ${fmt(Math.max(...steadyS))} (interval ${fmt(intervalMs / 1000)}); ` +
    `CPU per round: manager median ${fmt(median(steady.map((r) => r.managerCpuS)))}, fleet median ${fmt(median(steady.map((r) => r.fleetCpuS)))}`);
  console.log(`rounds: ${steady.map((r) => r.seconds.toFixed(2)).join(' ')}`);
  console.log(`ticks that found a round still running (skipped): ${skippedTicks}`);
  const minor = gcPauses.filter((g) => g.kind === 1).map((g) => g.ms);
  const major = gcPauses.filter((g) => g.kind !== 1).map((g) => g.ms);
  const ms = (xs: number[]) => (xs.length ? `${xs.length}, max ${Math.max(...xs).toFixed(1)} ms, total ${xs.reduce((a, b) => a + b, 0).toFixed(0)} ms` : '0');
  console.log(`CPU over the steady rounds (${steadyWallS.toFixed(1)} s), per second: manager ${managerCpuPerS.toFixed(3)} s/s, fleet ${fleetCpuPerS.toFixed(3)} s/s`);
  console.log(`during the steady rounds: longest event-loop delay ${(loop.max / 1e6).toFixed(1)} ms; GC pauses: scavenges ${ms(minor)}; other ${ms(major)}`);

  writeFileSync(silentFile, `${[...silenced].join('\n')}\n`);
  writeFileSync(hungFile, `${[...hung].join('\n')}\n`);
  const stoppedAt = Date.now();
  fleet.kill('SIGUSR2');
  const deadAt = new Map<string, number>();
  const bound = deadAfterMs + intervalMs;
  await until(() => {
    for (const h of stopped) if (!deadAt.has(h) && store.s.machines[`${h}/storage`]?.nodeStats === 'dead') deadAt.set(h, Date.now());
    return deadAt.size === stopped.size;
  }, bound + 60_000);
  for (const [what, group] of [['silenced (UNAVAILABLE at once)', silenced], ['hung (never answer)', hung]] as const) {
    if (group.size === 0) continue;
    const took = [...group].map((h) => ((deadAt.get(h) ?? Number.NaN) - stoppedAt) / 1000);
    console.log(`${group.size} hosts ${what}: marked dead after ${fmt(Math.min(...took))} .. ${fmt(Math.max(...took))} ` +
      `(bound: machineDeadAfterMs + interval = ${fmt(bound / 1000)}) -> ${took.every((t) => t <= bound / 1000) ? 'WITHIN' : 'OVER'}`);
  }
  const roundsMeanwhile = rounds.filter((r) => r.startedMs >= stoppedAt);
  if (roundsMeanwhile.length > 0) console.log(`rounds meanwhile (${roundsMeanwhile.length}): median ${fmt(median(roundsMeanwhile.map((r) => r.seconds)))}, max ${fmt(Math.max(...roundsMeanwhile.map((r) => r.seconds)))}`);
  const wronglyDead = hosts.filter((h) => !stopped.has(h) && store.s.machines[`${h}/storage`]?.nodeStats === 'dead');
  console.log(`hosts that kept answering but were seen unreachable: ${falselyUnreachable.size}; marked dead: ${wronglyDead.length}`);
  console.log(`load average after: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);

  clearInterval(watch);
  monitor.stop();
  pool.close();
  await new Promise((r) => {
    fleet.once('exit', r);
    fleet.kill('SIGTERM');
  });
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
