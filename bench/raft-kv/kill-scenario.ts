// The real-process kill scenario shared by the kill test (test/raft-kv/kill.test.ts, 50
// kills) and the soak (libs/raft/test/soak/kill-soak.ts, 200 kills).
//
// Three raft-kv members on loopback. Writers put distinct keys continuously and record
// every acknowledged put; register clients put and get a few shared keys, recorded as a
// history for the linearizability checker. A killer SIGKILLs a random member, restarts it
// on the same data dir, waits for it to catch up, and repeats. When the victim was the
// leader, a prober measures how long until a put is acknowledged again (failover time).
// At the end every acknowledged write is read back linearizably.

import { HistoryRecorder, checkOperations, formatReport, kvModel } from '../../libs/raft/test/linearizability/index';
import type { KvInput, KvOutput } from '../../libs/raft/test/linearizability/index';
import { KvCluster, sleep } from './cluster';
import { checkHardStateLogs, TermMonitor } from './kill-checks';
import type { KvReply } from './kv-proto';
import { percentile } from './workload';
// The kill schedule replays from its seed.
import { seededRandom } from '../../libs/raft/test/seeded-random';

export interface KillScenarioOptions {
  kills: number;
  /** Three loopback addresses not used by anything else running at the same time. */
  hosts: string[];
  raftPort: number;
  kvPort: number;
  writers?: number; // default 6
  registerClients?: number; // default 3
  tickMs?: number; // default 30: election timeout 0.3-0.6 s, leaving room for a split vote under the 2 s failover budget on a busy machine
  electionTick?: number; // default 10
  snapshotEntries?: number; // default 2000: restarts and lagging members go through snapshots
  seed?: number;
  log?: (line: string) => void;
}

export interface KillScenarioReport {
  seed: number;
  kills: number;
  leaderKills: number;
  acknowledgedWrites: number;
  /** Acknowledged writes missing (or with another value) when read back at the end. */
  lostWrites: string[];
  failoverMs: number[];
  failoverP50: number;
  failoverP99: number;
  failoverMax: number;
  termViolations: string[];
  voteViolations: string[];
  votesLogged: number;
  restartsLogged: number;
  linearizability: 'ok' | 'illegal' | 'unknown';
  linearizabilityReport: string;
  historyOperations: number;
  finalTerm: number;
}

const WRITE_TIMEOUT_MS = 3_000;

export async function runKillScenario(opts: KillScenarioOptions): Promise<KillScenarioReport> {
  const seed = opts.seed ?? Date.now() % 1_000_000;
  const random = seededRandom(seed);
  const log = opts.log ?? (() => {});
  const cluster = await KvCluster.start({
    hosts: opts.hosts,
    raftPort: opts.raftPort,
    kvPort: opts.kvPort,
    tickMs: opts.tickMs ?? 30,
    electionTick: opts.electionTick ?? 10,
    snapshotEntries: opts.snapshotEntries ?? 2_000,
    warmStandby: true,
  });
  const terms = new TermMonitor(cluster);
  try {
    await cluster.waitForLeader();
    terms.start();
    const acked = new Map<string, string>();
    const history = new HistoryRecorder<KvInput, KvOutput>();
    let running = true;
    const writers = Array.from({ length: opts.writers ?? 6 }, (_, w) => runWriter(cluster, w, acked, () => running));
    const registers = Array.from({ length: opts.registerClients ?? 3 }, (_, c) =>
      runRegisterClient(cluster, c, history, seededRandom(seed + c + 1), () => running),
    );

    const failoverMs: number[] = [];
    for (let k = 1; k <= opts.kills; k++) {
      await sleep(50 + random() * 250);
      const statuses = await cluster.statuses(500);
      const victim = Math.floor(random() * cluster.members.length);
      const wasLeader = statuses[victim]?.role === 'leader';
      const killedAt = performance.now();
      await cluster.kill(victim, 'SIGKILL');
      const failover = wasLeader ? measureFailover(cluster, victim, killedAt) : undefined;
      await sleep(50 + random() * 300);
      const tookMs = failover ? await failover : undefined;
      if (tookMs !== undefined) failoverMs.push(tookMs);
      const restartAt = performance.now();
      await cluster.startMember(victim);
      const caughtUpAt = performance.now();
      await waitCaughtUp(cluster, victim);
      log(
        `kill ${k}/${opts.kills}: ${cluster.members[victim].id}${wasLeader ? ` (leader; writes again after ${tookMs!.toFixed(0)} ms)` : ''}; ` +
          `restart ${(caughtUpAt - restartAt).toFixed(0)} ms, catch-up ${(performance.now() - caughtUpAt).toFixed(0)} ms; acked ${acked.size}`,
      );
    }

    running = false;
    await Promise.all([...writers, ...registers]);
    terms.stop();
    const lostWrites = await readBack(cluster, acked);
    const check = checkOperations(kvModel, history.operations(), { timeoutMs: 60_000 });
    const hardState = checkHardStateLogs(cluster);
    const sorted = [...failoverMs].sort((a, b) => a - b);
    return {
      seed,
      kills: opts.kills,
      leaderKills: failoverMs.length,
      acknowledgedWrites: acked.size,
      lostWrites,
      failoverMs,
      failoverP50: percentile(sorted, 0.5),
      failoverP99: percentile(sorted, 0.99),
      failoverMax: sorted.length > 0 ? sorted[sorted.length - 1] : 0,
      termViolations: [...terms.violations, ...hardState.violations.filter((v) => v.includes('term went back'))],
      voteViolations: hardState.violations.filter((v) => !v.includes('term went back')),
      votesLogged: hardState.votesLogged,
      restartsLogged: hardState.restarts,
      linearizability: check.result,
      linearizabilityReport: formatReport(kvModel, check),
      historyOperations: history.operations().length,
      finalTerm: terms.maxTerm,
    };
  } finally {
    terms.stop();
    await cluster.stop();
  }
}

export function formatKillReport(r: KillScenarioReport): string {
  return [
    `seed ${r.seed}: ${r.kills} kills (${r.leaderKills} of the leader), ${r.restartsLogged} restarts logged, final term ${r.finalTerm}`,
    `acknowledged writes ${r.acknowledgedWrites}, lost ${r.lostWrites.length}${r.lostWrites.length ? `: ${r.lostWrites.slice(0, 5).join(', ')}` : ''}`,
    `failover (leader killed -> next acknowledged put): p50 ${r.failoverP50.toFixed(0)} ms, p99 ${r.failoverP99.toFixed(0)} ms, max ${r.failoverMax.toFixed(0)} ms`,
    `  all (ms): ${[...r.failoverMs].sort((a, b) => a - b).map((ms) => ms.toFixed(0)).join(' ')}`,
    `terms: ${r.termViolations.length} regressions; votes: ${r.votesLogged} logged, ${r.voteViolations.length} double votes`,
    `linearizability of ${r.historyOperations} operations: ${r.linearizability}`,
  ].join('\n');
}

/** Puts distinct keys one at a time, moving to the next member after any error. */
async function runWriter(cluster: KvCluster, w: number, acked: Map<string, string>, running: () => boolean): Promise<void> {
  let member = w % cluster.members.length;
  for (let n = 0; running(); n++) {
    const key = `w${w}/${n}`;
    const value = `v${w}.${n}`;
    const reply = await cluster.members[member].session.put(key, Buffer.from(value), { timeoutMs: WRITE_TIMEOUT_MS });
    if (reply.error === '') acked.set(key, value);
    else {
      member = (member + 1) % cluster.members.length;
      await sleep(20);
    }
  }
}

/** Puts and gets on a few shared keys, recording a history the checker can judge. */
async function runRegisterClient(
  cluster: KvCluster,
  client: number,
  history: HistoryRecorder<KvInput, KvOutput>,
  random: () => number,
  running: () => boolean,
): Promise<void> {
  let member = client % cluster.members.length;
  for (let n = 0; running(); n++) {
    const key = `reg${Math.floor(random() * 3)}`;
    const session = cluster.members[member].session;
    let reply: KvReply;
    if (random() < 0.5) {
      const value = `c${client}.${n}`;
      history.invoke(client, { op: 'put', key, value });
      reply = await session.put(key, Buffer.from(value), { timeoutMs: WRITE_TIMEOUT_MS });
      recordOutcome(history, client, reply, { value: '' });
    } else {
      history.invoke(client, { op: 'get', key, value: '' });
      reply = await session.get(key, { timeoutMs: WRITE_TIMEOUT_MS });
      recordOutcome(history, client, reply, { value: Buffer.from(reply.value).toString() });
    }
    if (reply.error !== '') {
      member = (member + 1) % cluster.members.length;
      await sleep(20);
    }
  }
}

function recordOutcome(history: HistoryRecorder<KvInput, KvOutput>, client: number, reply: KvReply, output: KvOutput): void {
  switch (reply.error) {
    case '':
      return history.ok(client, output);
    case 'NOT_LEADER':
    case 'NO_LEADER':
    case 'DROPPED':
    case 'OVERLOADED':
      return history.fail(client); // never entered a log that can commit
    default:
      return history.info(client); // TIMEOUT, UNAVAILABLE, STOPPED, INTERNAL: may have happened
  }
}

/** From the leader's death until a surviving member acknowledges a put: probes every 50 ms. */
async function measureFailover(cluster: KvCluster, victim: number, killedAt: number): Promise<number> {
  const survivors = cluster.members.filter((m) => m.index !== victim);
  let done: number | undefined;
  for (let n = 0; done === undefined && performance.now() - killedAt < 30_000; n++) {
    for (const m of survivors) {
      void m.session.put(`probe/${Math.round(killedAt)}/${n}/${m.index}`, Buffer.from('p'), { timeoutMs: 2_000 }).then((r) => {
        if (r.error === '' && done === undefined) done = performance.now() - killedAt;
      });
    }
    await sleep(50);
  }
  return done ?? Infinity;
}

/** Waits until the restarted member has applied what the leader had committed when it came back. */
async function waitCaughtUp(cluster: KvCluster, member: number, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let target = 0;
  while (Date.now() < deadline) {
    const statuses = await cluster.statuses(500);
    const leader = statuses.find((s) => s?.role === 'leader');
    if (leader && target === 0) target = leader.commit;
    const me = statuses[member];
    if (target > 0 && me && me.applied >= target) return;
    await sleep(50);
  }
  throw new Error(`${cluster.members[member].id} did not catch up within ${timeoutMs} ms`);
}

/** Reads every acknowledged key back (linearizable gets, retried on errors); returns the missing or wrong ones. */
async function readBack(cluster: KvCluster, acked: Map<string, string>): Promise<string[]> {
  const lost: string[] = [];
  const keys = [...acked.keys()];
  const lanes = 64;
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let i = lane; i < keys.length; i += lanes) {
        const key = keys[i];
        for (let attempt = 0; ; attempt++) {
          const session = cluster.members[(i + attempt) % cluster.members.length].session;
          const reply = await session.get(key, { timeoutMs: WRITE_TIMEOUT_MS });
          if (reply.error === '') {
            const value = Buffer.from(reply.value).toString();
            if (!reply.found || value !== acked.get(key)) lost.push(`${key}=${reply.found ? value : '<missing>'}`);
            break;
          }
          if (attempt >= 50) throw new Error(`could not read ${key} back: ${reply.error} ${reply.message}`);
          await sleep(100);
        }
      }
    }),
  );
  return lost;
}

