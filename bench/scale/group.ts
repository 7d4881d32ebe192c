// npm run bench:scale [-- --hosts 1000 --clusters 1000 --jobs 100000]
//
// A real 3-member manager group (manager processes, Raft over gRPC, LevelDB) at fleet
// scale: the hosts are HOLLOW (bench/scale/hollow-agents.ts answers health and host facts
// on every host's agent address; no engine runs), the group starts from a metadata backup
// image of 1,000 hosts / 1,000 clusters (3 shards x 3 nodes + 2 compute nodes) / 100,000
// kept jobs with --restore-meta (hollow-group.ts), as a new production group would.
// Run under the system lock: flock /tmp/kcm-system.lock npm run bench:scale
//
// Prints: snapshot size, the longest event-loop block on the leader while it produced a
// snapshot (measured in the member, kcm_meta_image_loop_block_max_seconds), restart-to-
// serving of a follower, leader failover (SIGKILL -> first acknowledged job), p99 of
// get_cluster_summary and get_cluster_detail, the health-probe round, memory per member.

import { execSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { emit, emitRaw } from '../../test/helpers/emit-client';
import { sleep, waitFor } from '../../test/manager/helpers/processes';
import { HollowGroup } from './hollow-group';

const { values } = parseArgs({
  options: {
    hosts: { type: 'string', default: '1000' },
    clusters: { type: 'string', default: '1000' },
    jobs: { type: 'string', default: '100000' },
    queries: { type: 'string', default: '100' },
    'snapshot-entries': { type: 'string', default: '300' },
    keep: { type: 'boolean', default: false },
    // Hollow agents without HostProbeAgent: the manager probes per instance (as before ProbeHost).
    'older-agents': { type: 'boolean', default: false },
    // Only the query and memory figures: no snapshot writes, restart or failover (shorter runs while comparing query paths).
    'only-queries': { type: 'boolean', default: false },
    // Then, after this many seconds without queries (past the agent pool's 60 s idle close), one more summary.
    'idle-summary-s': { type: 'string', default: '0' },
    // Stop every member with SIGTERM right after the snapshots (a clean exit writes the profiles of
    // KCM_TEST_NODE_ARGS='--cpu-prof --cpu-prof-dir=..'; SIGKILL would lose them).
    'stop-after-snapshots': { type: 'boolean', default: false },
    // The leader's health-probe interval (manager default when absent). A long one (60000) shows the
    // snapshot's own blocks without the probe rounds' garbage collections beside them.
    'health-interval-ms': { type: 'string' },
  },
});
const MEMBERS = ['127.0.1.181:18700', '127.0.1.182:18700', '127.0.1.183:18700'];
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const mb = (bytes: number | undefined) => `${((bytes ?? 0) / 1024 / 1024).toFixed(0)} MB`;
const load = () => execSync('uptime').toString().trim().replace(/^.*load/, 'load');
const log = (line: string) => console.log(`${line}    [${load()}]`);

/** A member's /metrics (name{labels} -> value); a member busy with 1,000 TLS handshakes may take seconds to answer. */
async function metrics(member: string, timeoutMs = 30_000): Promise<Map<string, number>> {
  const res = await fetch(`http://${member}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
  const values = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) ([-0-9.e+]+|NaN)$/.exec(line);
    if (m) values.set(m[1], Number(m[2]));
  }
  return values;
}

function p(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

async function timedQueries(member: string, jobType: string, count: number, paras: (i: number) => Record<string, unknown>): Promise<string> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await emit(member, jobType, paras(i), { timeoutMs: 60_000 });
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return `${jobType} x${count}: p50 ${p(times, 0.5).toFixed(0)} ms, p99 ${p(times, 0.99).toFixed(0)} ms, max ${times[times.length - 1].toFixed(0)} ms`;
}

/** A set_machine job (one proposal, no engine) acknowledged by any of `members`; resolves with its ack time. */
async function ackedJob(group: HollowGroup, members: string[], requestId = randomUUID(), deadlineMs = 60_000): Promise<number> {
  const t0 = performance.now();
  const paras = { hostaddr: group.hosts[Math.floor(Math.random() * group.hosts.length)], node_stats: 'running' };
  for (let attempt = 0; performance.now() - t0 < deadlineMs; attempt++) {
    const reply = await emitRaw(members[attempt % members.length], 'set_machine', paras, { requestId, timeoutMs: 3_000 }).catch(() => undefined);
    if (reply?.error_code === '0' && reply.job_id) return performance.now() - t0;
    await sleep(20);
  }
  throw new Error(`no member acknowledged request ${requestId} within ${deadlineMs} ms`);
}

/** RSS, heap used of total, V8 old space and memory outside the heap (Buffers), from a member's /metrics. */
function memoryOf(m: Map<string, number>): string {
  return `RSS ${mb(m.get('process_resident_memory_bytes'))}, heap used ${mb(m.get('nodejs_heap_size_used_bytes'))} of ${mb(m.get('nodejs_heap_size_total_bytes'))}` +
    ` (old space ${mb(m.get('nodejs_heap_space_size_used_bytes{space="old"}'))}, large objects ${mb(m.get('nodejs_heap_space_size_used_bytes{space="large_object"}'))}), external ${mb(m.get('nodejs_external_memory_bytes'))}`;
}

/** The longest block the member traced during its last image, taken apart (meta/snapshot/loop-blocks.ts). */
function tracedBlock(m: Map<string, number>, kind: 'snapshot' | 'restore'): string {
  const ms = (name: string) => `${((m.get(`kcm_meta_image_${name}{kind="${kind}"}`) ?? 0) * 1000).toFixed(0)} ms`;
  return `traced block ${ms('traced_block_seconds')} = pieces ${ms('traced_block_piece_seconds')} + GC ${ms('traced_block_gc_seconds')} (major ${ms('traced_block_major_gc_seconds')}) + other; process CPU over it ${ms('traced_block_cpu_seconds')}; ` +
    `longest piece ${ms('piece_max_seconds')}, all pieces ${ms('piece_total_seconds')}; GC meanwhile: ${m.get(`kcm_meta_image_gc_major_count{kind="${kind}"}`) ?? 0} major, longest ${ms('gc_major_max_seconds')}, any longest ${ms('gc_max_seconds')}, total ${ms('gc_total_seconds')}`;
}

async function leaderOf(members: string[]): Promise<string> {
  return waitFor('a leader', async () => {
    for (const m of members) if ((await metrics(m).catch(() => undefined))?.get('kcm_raft_is_leader') === 1) return m;
    return undefined;
  }, 120_000, 50);
}

async function main(): Promise<void> {
  const [hosts, clusters, jobs] = [Number(values.hosts), Number(values.clusters), Number(values.jobs)];
  const dir = mkdtempSync(path.join(tmpdir(), 'kcm-bench-scale-'));
  const group = new HollowGroup({
    dir, members: MEMBERS, firstHost: '127.56.0.1', hosts, clusters, jobs, agentPort: 18790,
    managerConfig: {
      snapshotEntries: Number(values['snapshot-entries']),
      ...(values['health-interval-ms'] !== undefined ? { healthIntervalMs: Number(values['health-interval-ms']) } : {}),
    }, olderAgents: values['older-agents'], certPerHost: true,
  });
  try {
    log(`bench:scale: ${hosts} hollow hosts${values['older-agents'] ? ' (older agents: no ProbeHost)' : ''}, ${clusters} clusters (3x3+2), ${jobs} kept jobs; managers ${MEMBERS.join(' ')}`);
    let t0 = performance.now();
    const imageBytes = group.writeSeedImage();
    log(`seed image (metadata backup, bench-only loader): ${mb(imageBytes)} in ${secs(performance.now() - t0)}`);
    t0 = performance.now();
    await group.startFleet();
    log(`hollow fleet listening on ${hosts} hosts in ${secs(performance.now() - t0)}`);
    t0 = performance.now();
    let leader = await group.startSeeded(600_000);
    log(`seeded group (--restore-meta on every member) elected ${leader} in ${secs(performance.now() - t0)} from process start`);
    const followers = () => MEMBERS.filter((m) => m !== leader);
    t0 = performance.now();
    const reachable = await waitFor('every hollow host reachable from the leader', async () => {
      const m = await metrics(leader);
      const up = group.hosts.filter((h) => m.get(`kcm_agent_reachable{hostaddr="${h}"}`) === 1).length;
      return up === hosts ? up : undefined;
    }, 600_000, 1_000).catch(() => undefined);
    log(`first health-probe round over every host (leader elected -> all ${hosts} reachable): ${reachable ? secs(performance.now() - t0) : 'not within 10 minutes'}`);
    for (const member of MEMBERS) log(`  memory before the snapshots, ${member}${member === leader ? ' (leader)' : ''}: ${memoryOf(await metrics(member))}`);

    // The leader's longest event-loop block with no snapshot and no writes (health probing only), against the
    // followers' (no probing): prom-client's nodejs_eventloop_lag_max_seconds restarts at every scrape.
    for (const member of MEMBERS) await metrics(member);
    await sleep(10_000);
    for (const member of MEMBERS) {
      const m = await metrics(member);
      log(`  longest event-loop block over 10 s with no snapshot and no writes, ${member}${member === leader ? ' (leader: health probing)' : ''}: ` +
        `${((m.get('nodejs_eventloop_lag_max_seconds') ?? 0) * 1000).toFixed(0)} ms`);
    }

    // Snapshots: writes until the leader has produced two more images.
    if (!values['only-queries']) {
    const before = (await metrics(leader)).get('kcm_meta_images_total{kind="snapshot"}') ?? 0;
    const acks: number[] = [];
    // The member's gauges describe its last image only: read them after each one, so no snapshot's block goes unreported.
    const eachSnapshot: string[] = [];
    let seen = before;
    t0 = performance.now();
    for (;;) {
      const m = await metrics(leader);
      const taken = m.get('kcm_meta_images_total{kind="snapshot"}') ?? 0;
      if (taken > seen) {
        eachSnapshot.push(`${((m.get('kcm_meta_image_loop_block_max_seconds{kind="snapshot"}') ?? 0) * 1000).toFixed(0)} ms` +
          `${taken > seen + 1 ? ` (and ${taken - seen - 1} not seen)` : ''} [${tracedBlock(m, 'snapshot')}]`);
        seen = taken;
      }
      if (taken >= before + 2) break;
      acks.push(...(await Promise.all(Array.from({ length: 8 }, () => ackedJob(group, [leader])))));
      if (performance.now() - t0 > 600_000) throw new Error('no snapshot within 10 minutes of writes');
    }
    await sleep(2_000);
    const lm = await metrics(leader);
    acks.sort((a, b) => a - b);
    log(`snapshot on the leader: ${mb(lm.get('kcm_meta_image_bytes{kind="snapshot"}'))} image, ${secs((lm.get('kcm_meta_image_seconds{kind="snapshot"}') ?? 0) * 1000)} first piece to stored ` +
      `(apply held ${secs((lm.get('kcm_meta_image_apply_held_seconds{kind="snapshot"}') ?? lm.get('kcm_meta_image_seconds{kind="snapshot"}') ?? 0) * 1000)}), ` +
      `longest event-loop block ${((lm.get('kcm_meta_image_loop_block_max_seconds{kind="snapshot"}') ?? 0) * 1000).toFixed(0)} ms (target 50 ms)`);
    log(`  leader's ${tracedBlock(lm, 'snapshot')}`);
    eachSnapshot.forEach((line, i) => log(`  snapshot ${i + 1} of ${eachSnapshot.length}: longest event-loop block ${line}`));
    log(`writes meanwhile (set_machine, 8 at a time): ${acks.length} acknowledged, p50 ${p(acks, 0.5).toFixed(0)} ms, p99 ${p(acks, 0.99).toFixed(0)} ms, max ${acks[acks.length - 1].toFixed(0)} ms`);
    for (const member of MEMBERS) log(`  memory after the snapshots, ${member}${member === leader ? ' (leader)' : ''}: ${memoryOf(await metrics(member))}`);
    if (values['stop-after-snapshots']) {
      log(`stopping every member with SIGTERM (leader ${leader} is pid ${group.manager(leader).pid})`);
      await Promise.all(MEMBERS.map((m) => group.manager(m).signal('SIGTERM')));
      return;
    }
    }

    // Queries (--queries 0: none, e.g. to see memory and the later figures without the summaries' probes).
    const queries = Number(values.queries);
    let list = [{ cluster_id: '1' }];
    if (queries > 0) {
      t0 = performance.now();
      const first = ((await emit(leader, 'get_cluster_summary', {}, { timeoutMs: 60_000 })).attachment as { list_cluster: { cluster_id: string; status: string }[] }).list_cluster;
      // The first summary opens the leader's connections for the probes (unless shared with the health monitor's).
      const statuses = new Map<string, number>();
      for (const c of first) statuses.set(c.status, (statuses.get(c.status) ?? 0) + 1);
      log(`first get_cluster_summary: ${(performance.now() - t0).toFixed(0)} ms; statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
      list = first;
      log(await timedQueries(leader, 'get_cluster_summary', Math.max(3, Math.floor(queries / 20)), () => ({})));
      log(await timedQueries(leader, 'get_cluster_detail', queries, (i) => ({ cluster_id: list[(i * 7919) % list.length].cluster_id })));
    }

    const idleS = Number(values['idle-summary-s']);
    if (idleS > 0) {
      await sleep(idleS * 1000);
      t0 = performance.now();
      await emit(leader, 'get_cluster_summary', {}, { timeoutMs: 60_000 });
      log(`get_cluster_summary after ${idleS} s without queries: ${(performance.now() - t0).toFixed(0)} ms`);
    }

    // Health probing and memory.
    for (const member of MEMBERS) {
      const m = await metrics(member);
      const reachable = group.hosts.filter((h) => m.get(`kcm_agent_reachable{hostaddr="${h}"}`) === 1).length;
      const rounds = m.get('kcm_health_probe_round_seconds_count');
      const probe = rounds === undefined ? 'probe-round metric absent (issue 20 item 4 adds kcm_health_probe_round_seconds)' : `${rounds} probe rounds, mean ${((m.get('kcm_health_probe_round_seconds_sum') ?? 0) / Math.max(1, rounds)).toFixed(2)} s`;
      log(`${member}${member === leader ? ' (leader)' : ''} after the queries: ${memoryOf(m)}` +
        (member === leader ? `; ${reachable}/${hosts} hosts reachable; ${probe}` : ''));
    }

    if (values['only-queries']) return;
    // Restart to serving: a follower is killed, the group moves on, the follower comes back.
    const follower = followers()[0];
    await group.manager(follower).kill();
    for (let i = 0; i < 20; i++) await ackedJob(group, [leader]);
    const target = (await metrics(leader)).get('kcm_raft_commit_index') ?? 0;
    t0 = performance.now();
    group.restart(follower);
    await waitFor(`${follower} to catch up`, async () => {
      const m = await metrics(follower).catch(() => undefined);
      if (!m || (m.get('kcm_raft_applied_index') ?? 0) < target) return undefined;
      return (await emitRaw(follower, 'get_cluster_detail', { cluster_id: list[0].cluster_id }, { timeoutMs: 5_000 })).error_code === '0';
    }, 300_000, 50);
    const restartMs = performance.now() - t0;
    const fm = await metrics(follower);
    log(`restart to serving (SIGKILL a follower, 20 jobs, restart, applied >= ${target} and answering): ${secs(restartMs)}; ` +
      `its restore: ${secs((fm.get('kcm_meta_image_seconds{kind="restore"}') ?? 0) * 1000)}, longest event-loop block ${((fm.get('kcm_meta_image_loop_block_max_seconds{kind="restore"}') ?? 0) * 1000).toFixed(0)} ms`);

    // Failover: SIGKILL the leader, then the first job acknowledged by the new one.
    const old = leader;
    const survivors = followers();
    t0 = performance.now();
    const killedAtMs = Date.now();
    await group.manager(old).kill();
    const ackMs = await ackedJob(group, survivors, randomUUID(), 120_000);
    const killToAck = performance.now() - t0;
    const ackedAtMs = killedAtMs + killToAck;
    leader = await leaderOf(survivors);
    // When the new leader saw itself elected, from its own log: the election's share of the
    // failover (Raft's randomized timeout) apart from the new leader's first acknowledged job.
    const electedAtMs = readFileSync(group.logFile(leader), 'utf8').split('\n').reverse()
      .map((line) => { try { return JSON.parse(line) as { msg?: string; leader?: string; time?: number | string }; } catch { return undefined; } })
      .map((e) => (e?.msg === 'leader changed' && e.leader === leader ? new Date(e.time ?? Number.NaN).getTime() : undefined))
      .find((t) => t !== undefined);
    const split = electedAtMs === undefined ? '' : `; elected ${secs(electedAtMs - killedAtMs)} after the kill, first job acknowledged ${secs(ackedAtMs - electedAtMs)} after that`;
    log(`leader failover: SIGKILL ${old} -> first acknowledged job on ${leader}: ${secs(killToAck)} (target 2 s; submit loop ${secs(ackMs)})${split}`);
  } finally {
    await group.stop();
    if (values.keep) console.log(`kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
