// Compute nodes ride through a shard master change (issue 31; docs/ride-through.md), on real
// engines: a one-member manager, three agents on 127.0.2.1-3, a cluster of 1 shard x 3
// MariaDB nodes and TWO compute nodes, and several patient clients inserting rows and
// reading them back by key through both compute nodes.
//
//  - manual_switch under that load: no client sees an error, only latency (printed).
//  - a transaction open across a switchover: one that ends within the drain commits (on the
//    old master, and is on the new one); one still open at the drain's bound is rolled back,
//    and its next statement says so.
//  - SIGKILL of the master's mariadbd under the load: only statements in flight at the kill
//    fail, each saying its outcome is unknown; statements sent after it wait for the new
//    master; every acknowledged insert is on the new master.

import { readdirSync, readFileSync } from 'node:fs';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { ClientLoad, clientStall, createHaCluster, haJobs, idsOn, mariadbdPid, pgClient, registerMachines, type HaCluster } from './ha-fixture';

const MEMBER = '127.0.1.83:58183';
const AGENT_PORT = 58183;
/** Long enough that a test's transaction is surely seen open by the hold, then seen to end inside the drain. */
const DRAIN_MS = 3000;
const CLIENTS = 4;
const HOLD_SESSION = 'kcm-agent-shard-hold';

const ipPort = (n: { hostaddr: string; port: number }) => `${n.hostaddr}_${n.port}`;

describe('compute nodes ride through a shard master change (1 shard x 3 nodes, 2 compute nodes, real engines)', () => {
  let f: ClusterFixture;
  let ha: HaCluster;

  const shardId = () => Object.keys(ha.cluster().shards)[0];
  const standby = () => ha.nodes().find((n) => n.id !== ha.master().id && !n.fenced)!;
  const switchTo = (assign: { hostaddr: string; port: number }) =>
    f.runJob('manual_switch', { cluster_id: ha.clusterId, shard_id: shardId(), master_hostaddr: ipPort(ha.master()), assign_hostaddr: ipPort(assign) }, 60_000);

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER, managerConfig: { switchDrainMs: DRAIN_MS } });
    await registerMachines(f, [1, 2]);
    ha = await createHaCluster(f, [HOSTS[1], HOSTS[2]]);
  }, 300_000);

  afterAll(async () => {
    ha?.close();
    await f?.close();
  }, 120_000);

  it('manual_switch under load through both compute nodes: no client error, only latency', async () => {
    expect(ha.comps()).toHaveLength(2);
    const load = new ClientLoad(ha, CLIENTS);
    load.start();
    await waitUntil('statements flowing through both compute nodes', async () => (new Set(load.ops.filter((o) => !o.error).map((o) => o.client)).size === CLIENTS && load.acked().length >= 40 ? true : undefined), 30_000, 50);
    const old = ha.master();
    const assign = standby();
    const started = Date.now();
    const reply = await switchTo(assign);
    const ended = Date.now();
    await waitUntil('statements answered after the switch by every client', async () => {
      const after = new Set(load.ops.filter((o) => !o.error && o.sentAt > ended).map((o) => o.client));
      return after.size === CLIENTS ? true : undefined;
    }, 30_000, 50);
    await load.stop();

    expect(reply.status, reply.error_info).toBe('done');
    const result = reply.attachment as { write_stall_ms: string; comps_held: string; comps_not_held: string; list_step: { step: string; ms: string }[] };
    const stall = clientStall(load.ops, started, ended);
    console.log(`manual_switch under ${CLIENTS} clients: job ${JSON.stringify(result)}; clients: ${stall.n} statements in flight during it, p50 ${stall.p50} ms, p99 ${stall.p99} ms, max ${stall.max} ms, longest per client ${stall.longestPerClient.join('/')} ms`);
    // The fault landed: the master moved, and both compute nodes held the shard through it.
    expect(ha.master().id).toBe(assign.id);
    expect(ha.master().id).not.toBe(old.id);
    expect(result.comps_held.split(',').sort()).toEqual(Object.values(ha.cluster().comps).map((c) => c.name).sort());
    expect(result.comps_not_held).toBe('');
    expect(result.list_step[0].step).toBe('hold the shard on the compute nodes');
    // No client error at all: only latency.
    expect(load.errors()).toEqual([]);
    // Every acknowledged insert is on the new master.
    const onNew = await idsOn(ha, ha.master());
    expect(load.acked().filter((id) => !onNew.has(id))).toEqual([]);
  }, 180_000);

  it('a transaction open across a switchover: one that ends within the drain commits; one still open at its bound is rolled back and says so', async () => {
    const [first, second] = ha.comps();
    const lingering = await pgClient(ha, { comp: first, patient: true });
    const finishing = await pgClient(ha, { comp: second, patient: true });
    const watcher = await pgClient(ha, { comp: second });
    try {
      await lingering.query('BEGIN');
      await lingering.query('INSERT INTO public.ha_orders (id, at) VALUES (3000001, 1)');
      await finishing.query('BEGIN');
      await finishing.query('INSERT INTO public.ha_orders (id, at) VALUES (3000002, 1)');
      const assign = standby();
      const switching = switchTo(assign);
      // The hold's drain is under way on the second compute node (its session shows while it waits for open transactions).
      await waitUntil('the hold draining on the second compute node', async () => {
        const { rows } = await watcher.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1`, [HOLD_SESSION]);
        return rows.length > 0 ? true : undefined;
      }, 30_000, 10);
      // Open work of a transaction already on the shard goes on through the drain; then it commits.
      await finishing.query('INSERT INTO public.ha_orders (id, at) VALUES (3000003, 1)');
      await finishing.query('COMMIT');
      const reply = await switching;
      expect(reply.status, reply.error_info).toBe('done');
      expect(ha.master().id).toBe(assign.id);
      const result = reply.attachment as { transactions_open_at_hold: number; transactions_ended: number; sessions_cut: Record<string, string> };
      console.log(`switch with two open transactions: ${JSON.stringify(result)}`);
      expect(result.transactions_ended).toBe(1);
      expect(result.sessions_cut[first.host]).toMatch(/^\d+ closed$/);

      // The lingering transaction's next statement fails, saying why; its row is nowhere.
      const err = await lingering.query('INSERT INTO public.ha_orders (id, at) VALUES (3000004, 1)').then(() => undefined, (e: Error) => e);
      expect(err?.message).toMatch(/^kcm: the transaction is rolled back: shard \d+ switched its master while the transaction was open on it$/);
      expect((err as pg.DatabaseError).code).toBe('40000');
      await lingering.query('ROLLBACK');
      const onNew = await idsOn(ha, ha.master());
      expect([3000001, 3000004].filter((id) => onNew.has(id))).toEqual([]);
      expect([3000002, 3000003].filter((id) => onNew.has(id))).toEqual([3000002, 3000003]);
      // The same session goes on, on the new master.
      await lingering.query('INSERT INTO public.ha_orders (id, at) VALUES (3000005, 1)');
      expect((await idsOn(ha, ha.master())).has(3000005)).toBe(true);
    } finally {
      for (const c of [lingering, finishing, watcher]) await c.end().catch(() => {});
    }
  }, 120_000);

  it('SIGKILL of the master under load: only statements in flight fail, each saying its outcome is unknown; nothing sent after the kill fails', async () => {
    await waitUntil('the shard healthy', async () => {
      const statuses = await Promise.all(ha.nodes().filter((n) => n.id !== ha.master().id).map((n) => ha.status(n)));
      return statuses.every((s) => s.is_replica && s.io_running && s.sql_running) && !ha.nodes().some((n) => n.fenced) ? true : undefined;
    }, 60_000, 250);
    const load = new ClientLoad(ha, CLIENTS, 10_000_000);
    load.start();
    await waitUntil('statements flowing', async () => (load.acked().length >= 40 ? true : undefined), 30_000, 50);
    const old = ha.master();
    const failoversBefore = haJobs(f, 'shard_failover').length;
    const pid = await mariadbdPid(old);
    const killSent = Date.now();
    process.kill(pid, 'SIGKILL');
    // Dead once it has exited with every thread: its sockets are closed then (the kernel closed them as it exited).
    await waitUntil('the old master process gone', async () => (processGone(pid) ? true : undefined), 10_000, 5);
    const killedAt = Date.now();
    const job = await waitUntil('shard_failover done', async () => haJobs(f, 'shard_failover').slice(failoversBefore).find((j) => j.status === 'done' || j.status === 'failed'), 90_000);
    const failedOverAt = Date.now();
    await waitUntil('statements answered after the failover by every client', async () => {
      const after = new Set(load.ops.filter((o) => !o.error && o.sentAt > failedOverAt).map((o) => o.client));
      return after.size === CLIENTS ? true : undefined;
    }, 30_000, 50);
    await load.stop();

    expect(job.status, job.result?.errorInfo).toBe('done');
    const result = job.result?.attachment as { comps_held: string; comps_not_held: string };
    const newMaster = ha.master();
    const errors = load.errors();
    const stall = clientStall(load.ops, killSent, failedOverAt);
    console.log(`SIGKILL under ${CLIENTS} clients: ${errors.length} client errors (${JSON.stringify(errors.map((e) => ({ kind: e.kind, sent: e.sentAt - killSent, error: e.error })))}); clients during kill -> failover done (${failedOverAt - killSent} ms): ${stall.n} statements, p50 ${stall.p50} ms, p99 ${stall.p99} ms, max ${stall.max} ms; failover: comps_held ${result.comps_held}, not held ${result.comps_not_held || '-'}`);
    // The fault landed: the old master's process is gone and the master changed.
    expect(processGone(pid)).toBe(true);
    expect(newMaster.id).not.toBe(old.id);
    expect(result.comps_held.split(',').sort()).toEqual(Object.values(ha.cluster().comps).map((c) => c.name).sort());
    // Only statements in flight at the kill failed, at most one per client, each saying its outcome is unknown.
    expect(errors.length).toBeLessThanOrEqual(CLIENTS);
    for (const e of errors) {
      expect(e.sentAt, `${e.kind} ${e.id}: ${e.error}`).toBeLessThanOrEqual(killedAt);
      expect(e.error).toMatch(/^kcm: shard \d+: the connection to its master was lost while the statement ran; whether it committed is unknown$/);
    }
    expect(errors.filter((e) => e.sentAt > killedAt)).toEqual([]);
    // Every acknowledged insert is on the new master.
    const onNew = await idsOn(ha, newMaster);
    expect(load.acked().filter((id) => !onNew.has(id))).toEqual([]);
  }, 180_000);
});

/**
 * The process has exited and closed its files: reaped, or a zombie with no other thread
 * left. A multi-threaded process's leader turns zombie while its other threads still exit,
 * and its files (its sockets) are closed by the last of them.
 */
function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    return readdirSync(`/proc/${pid}/task`).length <= 1 && /\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}
