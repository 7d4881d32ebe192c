// npm run bench:failover -- [--kills 20] [--switches 20] [--keep-going]
//
// Shard high availability figures on real engines (issue 15): a one-member manager, three
// agents on 127.0.2.1-3 (test/cluster/cluster-fixture.ts), a cluster of 1 shard x 3 MariaDB
// nodes + 2 compute nodes, one client inserting rows through the first compute node, one after
// another, the whole time, and beside it 4 patient clients (ClientLoad) inserting and reading
// back by key through both compute nodes: what an application sees of each kill and each
// switchover (its errors, and the latency of its statements during it: docs/ride-through.md).
//
//  1. `--kills` times: SIGKILL the current master's mariadbd and measure kill -> the first
//     insert acknowledged through the compute node after it. Before each kill the shard has
//     three replicating nodes again (the old master rejoined, in its shard_rejoin job: with
//     fullsync_level 1 a master with no standby attached takes no writes). Every other kill
//     comes the moment that is so, most of them inside what used to be the detector's 15 s
//     no-resubmit window after the previous failover; the others wait 1.5 s more. Every kill
//     must be answered by a failover.
//  2. `--switches` times: manual_switch to a standby under the same load; its reported
//     write_stall_ms, and the longest run of failed inserts the client saw.
//  Per kill and per switchover: the ClientLoad clients' errors (a switchover's target is 0; a
//  kill's are the statements in flight at it) and the p50/p99 latency of their statements in
//  flight during it (kill or switch start -> the job done).
//  3. Acknowledged inserts lost: every id the client was told committed, looked up on the
//     final master (must be 0).
//
// Run it under the system lock (it uses the fixed test addresses):
//   flock /tmp/kcm-system.lock npm run bench:failover

import { parseArgs } from 'node:util';
import type { StorageNodeRecord } from '@kcm/manager';
import { startClusterFixture, waitUntil, HOSTS, type ClusterFixture } from '../../test/cluster/cluster-fixture';
import { ClientLoad, clientStall, createHaCluster, haJobs, InsertLoad, mariadbdPid, registerMachines, TABLE, type HaCluster } from '../../test/cluster/ha-fixture';
import { longestGap } from '../../test/cluster/write-gaps';

const { values: flags } = parseArgs({
  options: {
    kills: { type: 'string', default: '20' },
    switches: { type: 'string', default: '20' },
    /** Carry on after a round that did not recover (it is counted and shown). */
    'keep-going': { type: 'boolean', default: false },
  },
});

const percentile = (values: number[], p: number): number => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};
const summary = (values: number[]) =>
  values.length === 0 ? 'no samples' : `p50 ${percentile(values, 50)} ms, p95 ${percentile(values, 95)} ms, p99 ${percentile(values, 99)} ms, max ${Math.max(...values)} ms (n=${values.length})`;
const ipPort = (n: { hostaddr: string; port: number }) => `${n.hostaddr}_${n.port}`;

/** The ClientLoad clients (several sessions over both compute nodes). */
const CLIENTS = 4;

interface ClientFigures {
  errors: number;
  p50: number;
  p99: number;
}

/** What the clients saw of [from, to]: statements sent in it that failed, and the latency of those in flight. */
function clientFigures(clients: ClientLoad, from: number, to: number): ClientFigures & { text: string } {
  const errors = clients.errors().filter((o) => o.sentAt >= from - 1000 && o.sentAt <= to);
  const stall = clientStall(clients.ops, from, to);
  const kinds = [...new Set(errors.map((e) => e.error))].map((e) => e?.slice(0, 120)).join(' | ');
  return { errors: errors.length, p50: stall.p50, p99: stall.p99, text: `clients: ${errors.length} errors${kinds ? ` (${kinds})` : ''}, stall p50 ${stall.p50} ms, p99 ${stall.p99} ms, max ${stall.max} ms` };
}

/**
 * Kill -> the first acknowledged insert that was sent after the kill (the row's `at` is
 * its send time), for each kill; the rows are read from the final master.
 */
function recoveryTimes(kills: { at: number }[], load: InsertLoad, sentAt: Map<number, number>): number[] {
  return kills.flatMap((k) => {
    const first = load.acked.find((a) => (sentAt.get(a.id) ?? 0) > k.at);
    return first ? [first.at - k.at] : [];
  });
}

/** The shard as it should be between rounds: one writable master, every other node replicating from it. */
async function shardHealthy(ha: HaCluster): Promise<true | undefined> {
  const master = ha.master();
  const nodes = ha.nodes();
  if (nodes.some((n) => n.fenced)) return undefined;
  const statuses = await Promise.all(nodes.map((n) => ha.status(n)));
  for (const [i, n] of nodes.entries()) {
    const s = statuses[i];
    if (n.id === master.id) {
      if (!s.answering || s.read_only || s.is_replica) return undefined;
    } else if (!(s.is_replica && s.io_running && s.sql_running && s.master_host === master.hostaddr && s.master_port === master.port)) {
      return undefined;
    }
  }
  return true;
}

/** How long after the shard is healthy a full-health round's kill waits. */
const SETTLE_MS = 1500;
/** A kill the detector has not answered with a failover job within this long counts as "restarted in place". */
const FAILOVER_SUBMIT_WITHIN_MS = 15_000;



async function killRounds(f: ClusterFixture, ha: HaCluster, load: InsertLoad, clients: ClientLoad, rounds: number) {
  const kills: { at: number; failover: boolean }[] = [];
  const seen: ClientFigures[] = [];
  const failures: string[] = [];
  /** The failover job's own 'fence old master' step: a fence that waits out a killed master's crash recovery shows here. */
  const fenceSteps: number[] = [];
  let restartedInPlace = 0;
  /** Seconds from the previous failover's submission to each quick kill. */
  const quickKillAfterMs: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const quick = round % 2 === 0;
    const lastFailover = Math.max(0, ...haJobs(f, 'shard_failover').map((j) => j.submittedAt));
    await waitUntil(`round ${round}: the shard healthy before the kill`, () => shardHealthy(ha), 180_000, quick ? 50 : 250);
    if (quick) {
      await waitUntil(`round ${round}: a write on the new master`, async () => load.firstAckAfter(Date.now()), 30_000, 20);
      quickKillAfterMs.push(Date.now() - lastFailover);
    } else {
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      await waitUntil(`round ${round}: inserts flowing`, async () => (load.acked.length > 0 && Date.now() - load.acked[load.acked.length - 1].at < 500 ? true : undefined), 30_000, 50);
    }
    const failoversBefore = haJobs(f, 'shard_failover').length;
    const victim: StorageNodeRecord = ha.master();
    process.kill(await mariadbdPid(victim), 'SIGKILL');
    const killedAt = Date.now();
    try {
      // Only to wait on: an insert sent before the kill may be acknowledged just after it; the
      // figures (recoveryTimes) count inserts sent after the kill.
      const resumedAt = await waitUntil(`round ${round}: a write after the kill`, async () => load.firstAckAfter(killedAt + 1), 60_000, 20);
      const kill = { at: killedAt, failover: true };
      kills.push(kill);
      const submitted = await waitUntil(`round ${round}: shard_failover submitted`, async () => haJobs(f, 'shard_failover').slice(failoversBefore)[0], FAILOVER_SUBMIT_WITHIN_MS, 100).catch(() => undefined);
      if (!submitted) {
        // The agent's supervisor restarted mariadbd and the detector did not count it as a death.
        restartedInPlace++;
        kill.failover = false;
        console.log(`kill ${round}: ${ipPort(victim)} restarted in place (no failover submitted in ${FAILOVER_SUBMIT_WITHIN_MS} ms), first write after ${resumedAt - killedAt} ms`);
        continue;
      }
      const job = await waitUntil(`round ${round}: shard_failover ended`, async () => {
        const j = f.manager.store.state().jobs[submitted.id];
        return j && (j.status === 'done' || j.status === 'failed') ? j : undefined;
      }, 120_000, 100);
      const attachment = job.result?.attachment as { step_ms?: Record<string, number>; old_master?: { fenced?: string } } | undefined;
      const fenceMs = attachment?.step_ms?.['fence old master'];
      if (typeof fenceMs === 'number') fenceSteps.push(fenceMs);
      const doneAt = Date.now();
      await waitUntil(`round ${round}: every client answered after the failover`, async () => (new Set(clients.ops.filter((o) => !o.error && o.sentAt > doneAt).map((o) => o.client)).size === CLIENTS ? true : undefined), 30_000, 20);
      const figures = clientFigures(clients, killedAt, doneAt);
      seen.push(figures);
      console.log(`kill ${round}${quick ? ` (${quickKillAfterMs.at(-1)} ms after the last failover)` : ''}: ${ipPort(victim)} -> ${ipPort(ha.master())}, first write after ${resumedAt - killedAt} ms, fence ${fenceMs} ms (${attachment?.old_master?.fenced}), steps ${JSON.stringify(attachment?.step_ms ?? {})}, failover ${job.status}${job.status === 'failed' ? `: ${job.result?.errorInfo}` : ''}; ${figures.text}`);
      if (job.status !== 'done') failures.push(`kill ${round}: ${job.result?.errorInfo}`);
    } catch (err) {
      failures.push(`kill ${round}: ${(err as Error).message}`);
      console.log(`kill ${round}: ${(err as Error).message}`);
      if (!flags['keep-going']) break;
    }
  }
  return { kills, failures, restartedInPlace, fenceSteps, quickKillAfterMs, seen };
}

/** The highest sequence number of a GTID position (one domain here): how far a node is. */
function sequenceOf(pos: string): number {
  return Math.max(0, ...pos.split(',').filter(Boolean).map((g) => Number(g.trim().split('-')[2] ?? 0)));
}

async function switchRounds(f: ClusterFixture, ha: HaCluster, load: InsertLoad, clients: ClientLoad, rounds: number) {
  const seen: ClientFigures[] = [];
  const stalls: number[] = [];
  const clientGaps: number[] = [];
  const failures: string[] = [];
  for (let round = 1; round <= rounds; round++) {
    await waitUntil(`switch ${round}: the shard healthy`, () => shardHealthy(ha), 120_000, 250);
    const master = ha.master();
    const standbys = ha.nodes().filter((n) => n.id !== master.id);
    const assign = standbys[round % standbys.length];
    // A standby rebuilt after a kill round may still be catching up: manual_switch refuses one
    // more than manualSwitchMaxBehindTrx behind (by design), so the round waits until it is near.
    await waitUntil(`switch ${round}: ${ipPort(assign)} caught up`, async () => {
      const [m, s] = await Promise.all([ha.status(master), ha.status(assign)]);
      return sequenceOf(m.gtid_binlog_pos) - sequenceOf(s.gtid_current_pos) < 100 ? true : undefined;
    }, 120_000, 100);
    const started = Date.now();
    const reply = await f.runJob('manual_switch', { cluster_id: ha.clusterId, shard_id: Object.keys(ha.cluster().shards)[0], master_hostaddr: ipPort(master), assign_hostaddr: ipPort(assign) }, 60_000);
    const ended = Date.now();
    if (reply.status !== 'done') {
      failures.push(`switch ${round}: ${reply.error_info}`);
      console.log(`switch ${round}: failed: ${reply.error_info}`);
      if (!flags['keep-going']) break;
      continue;
    }
    await waitUntil(`switch ${round}: a write after it`, async () => load.firstAckAfter(ended), 30_000, 20);
    await waitUntil(`switch ${round}: every client answered after it`, async () => (new Set(clients.ops.filter((o) => !o.error && o.sentAt > ended).map((o) => o.client)).size === CLIENTS ? true : undefined), 30_000, 20);
    const result = reply.attachment as { write_stall_ms: string; comps_held?: string; comps_not_held?: string };
    const stall = Number(result.write_stall_ms);
    const gap = longestGap(load, started, ended);
    const figures = clientFigures(clients, started, ended);
    stalls.push(stall);
    clientGaps.push(gap);
    seen.push(figures);
    console.log(`switch ${round}: ${ipPort(master)} -> ${ipPort(assign)}, write_stall_ms ${stall}, longest client gap ${gap} ms, held on ${result.comps_held || 'no compute node'}${result.comps_not_held ? `, not held on ${result.comps_not_held}` : ''}; ${figures.text}`);
  }
  return { stalls, clientGaps, failures, seen };
}

async function main(): Promise<void> {
  const kills = Number(flags.kills);
  const switches = Number(flags.switches);
  const f = await startClusterFixture();
  let ha: HaCluster | undefined;
  // Stopped from outside (timeout, Ctrl-C): the engines it started must not outlive it.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.log(`${signal}: stopping the cluster`);
      ha?.close();
      void f.close().finally(() => process.exit(130));
    });
  }
  try {
    await registerMachines(f, [1, 2]);
    ha = await createHaCluster(f, [HOSTS[1], HOSTS[2]]);
    const load = new InsertLoad(ha);
    const clients = new ClientLoad(ha, CLIENTS, 100_000_000);
    load.start();
    clients.start();
    const killed = await killRounds(f, ha, load, clients, kills);
    const switched = await switchRounds(f, ha, load, clients, switches);
    await Promise.all([load.stop(), clients.stop()]);
    await waitUntil('the shard healthy at the end', () => shardHealthy(ha!), 120_000, 250);
    const rows = await ha.storageQuery<{ id: number; at: number }>(ha.master(), `SELECT id, at FROM ${TABLE}`);
    const sentAt = new Map(rows.map((r) => [Number(r.id), Number(r.at)]));
    const lost = [...load.acked.map((a) => a.id), ...clients.acked()].filter((id) => !sentAt.has(id));
    const byFailover = recoveryTimes(killed.kills.filter((k) => k.failover), load, sentAt);
    const inPlace = recoveryTimes(killed.kills.filter((k) => !k.failover), load, sentAt);

    const sum = (figures: ClientFigures[], key: keyof ClientFigures) => figures.map((x) => x[key]);
    console.log('\n== bench/failover (1 shard x 3 MariaDB nodes + 2 compute nodes, inserts through the compute nodes) ==');
    console.log(`${CLIENTS} clients, per switchover: errors ${sum(switched.seen, 'errors').join(',') || '-'} (total ${sum(switched.seen, 'errors').reduce((a, b) => a + b, 0)}); each switchover's client stall p50: ${summary(sum(switched.seen, 'p50'))}; its p99: ${summary(sum(switched.seen, 'p99'))}`);
    console.log(`${CLIENTS} clients, per failover: errors ${sum(killed.seen, 'errors').join(',') || '-'} (statements in flight at the kill); each failover's client stall p50: ${summary(sum(killed.seen, 'p50'))}; its p99: ${summary(sum(killed.seen, 'p99'))}`);
    console.log(`master SIGKILL -> first successful write through the compute node (insert sent after the kill), all kills: ${summary([...byFailover, ...inPlace])}`);
    console.log(`  kills answered by a failover: ${summary(byFailover)}`);
    console.log(`  kills the detector missed (the agent restarted the master in place): ${summary(inPlace)}`);
    console.log(`  quick kills came this long after the previous failover was submitted: ${summary(killed.quickKillAfterMs)}; inside 15 s: ${killed.quickKillAfterMs.filter((ms) => ms < 15_000).length} of ${killed.quickKillAfterMs.length}`);
    console.log(`kills answered by a failover: ${killed.kills.filter((k) => k.failover).length} of ${killed.kills.length}`);
    console.log(`failover job's 'fence old master' step, ms: ${summary(killed.fenceSteps)}`);
    console.log(`manual_switch write_stall_ms (reported by the job): ${summary(switched.stalls)}`);
    console.log(`manual_switch longest gap between acknowledged inserts at the inserting client: ${summary(switched.clientGaps)}`);
    console.log(`inserts acknowledged: ${load.acked.length}, acknowledged inserts lost: ${lost.length}${lost.length ? ` (ids ${lost.slice(0, 20).join(',')})` : ''}`);
    console.log(`failed inserts (retried with new ids): ${load.failures}`);
    for (const failure of [...killed.failures, ...switched.failures]) console.log(`round that did not complete: ${failure}`);
    process.exitCode = lost.length > 0 || killed.restartedInPlace > 0 || killed.failures.length + switched.failures.length > 0 ? 1 : 0;
  } finally {
    ha?.close();
    await f.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
