// A real 3-member manager group (real processes, Raft over gRPC, LevelDB) holding the
// metadata of 200 SIMULATED ("hollow") hosts: bench/scale/hollow-agents.ts serves their
// agent endpoints (health probes and host facts are real gRPC over mutual TLS; no engine
// runs, so no job here touches an instance). The group starts from a seeded metadata
// image (--restore-meta), then takes snapshots every 20 entries while writes and reads
// go on: it keeps its one leader, and every request is answered within its deadline.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HollowGroup } from '../../bench/scale/hollow-group';
import { emit, metrics } from '../helpers/emit-client';
import { STARTUP_TIMEOUT_MS } from '../manager/helpers/group';
import { waitFor } from '../manager/helpers/processes';

const MEMBERS = ['127.0.1.184:18710', '127.0.1.185:18710', '127.0.1.186:18710'];
const SNAPSHOT_EVERY = 20;
const WRITE_DEADLINE_MS = 5_000;
const READ_DEADLINE_MS = 3_000;

const dir = mkdtempSync(path.join(tmpdir(), 'kcm-hollow-group-'));
const group = new HollowGroup({
  dir, members: MEMBERS, firstHost: '127.57.0.1', hosts: 200, clusters: 50, jobs: 5_000, agentPort: 18791,
  managerConfig: { snapshotEntries: SNAPSHOT_EVERY, healthIntervalMs: 1_000 },
});
let leader: string;
let clusterIds: string[] = [];

beforeAll(async () => {
  group.writeSeedImage();
  await group.startFleet();
  leader = await group.startSeeded(STARTUP_TIMEOUT_MS * 2);
}, 180_000);

afterAll(async () => {
  await group.stop();
  if (!process.env.KCM_TEST_KEEP_DIR) rmSync(dir, { recursive: true, force: true });
});

const snapshotsTaken = async (member: string) => (await metrics(member)).get('kcm_meta_images_total{kind="snapshot"}') ?? 0;

describe('a manager group over 200 simulated hosts', () => {
  it('holds the seeded fleet and probes every simulated host for real', async () => {
    const summary = (await emit(leader, 'get_cluster_summary', {}, { timeoutMs: 30_000 })).attachment as { list_cluster: { cluster_id: string }[] };
    expect(summary.list_cluster).toHaveLength(50);
    clusterIds = summary.list_cluster.map((c) => c.cluster_id);
    // Each host answered the leader's Health probe (through the simulator, over mutual TLS).
    const reachable = await waitFor('every simulated host reachable', async () => {
      const m = await metrics(leader);
      const up = group.hosts.filter((h) => m.get(`kcm_agent_reachable{hostaddr="${h}"}`) === 1).length;
      return up === group.hosts.length ? up : undefined;
    }, 30_000, 500);
    expect(reachable).toBe(200);
  }, 60_000);

  it('keeps its leader and answers within deadlines while snapshots are taken', async () => {
    const termBefore = (await metrics(leader)).get('kcm_raft_term');
    const snapshotsBefore = await Promise.all(MEMBERS.map(snapshotsTaken));
    const slowest = { write: 0, read: 0 };
    const failures: string[] = [];
    const until = Date.now() + 12_000;
    const timed = async (kind: 'write' | 'read', deadlineMs: number, call: () => Promise<unknown>) => {
      const t0 = Date.now();
      try {
        await call();
      } catch (err) {
        failures.push(`${kind}: ${err instanceof Error ? err.message : String(err)}`);
      }
      const ms = Date.now() - t0;
      slowest[kind] = Math.max(slowest[kind], ms);
      if (ms > deadlineMs) failures.push(`${kind} took ${ms} ms (deadline ${deadlineMs} ms)`);
    };
    // Writers: set_machine jobs (one proposal each, no engine), each a new request, on every member.
    const writer = async (w: number) => {
      for (let i = 0; Date.now() < until; i++) {
        const member = MEMBERS[(w + i) % MEMBERS.length];
        const paras = { hostaddr: group.hosts[(w * 37 + i) % group.hosts.length], node_stats: 'running' };
        await timed('write', WRITE_DEADLINE_MS, () => emit(member, 'set_machine', paras, { requestId: randomUUID(), timeoutMs: WRITE_DEADLINE_MS }));
      }
    };
    const reader = async (r: number) => {
      for (let i = 0; Date.now() < until; i++) {
        const member = MEMBERS[(r + i) % MEMBERS.length];
        const [jobType, paras] = i % 2 ? ['get_cluster_detail', { cluster_id: clusterIds[i % clusterIds.length] }] : ['get_meta_mode', {}];
        await timed('read', READ_DEADLINE_MS, () => emit(member, jobType, paras, { timeoutMs: READ_DEADLINE_MS }));
      }
    };
    await Promise.all([writer(0), writer(1), writer(2), reader(0), reader(1)]);

    const snapshotsAfter = await Promise.all(MEMBERS.map(snapshotsTaken));
    const taken = snapshotsAfter.map((n, i) => n - snapshotsBefore[i]);
    const m = await metrics(leader);
    console.log(`snapshots per member during the load: ${taken.join(', ')}; slowest write ${slowest.write} ms, read ${slowest.read} ms; ` +
      `longest loop block in the leader's last snapshot ${((m.get('kcm_meta_image_loop_block_max_seconds{kind="snapshot"}') ?? 0) * 1000).toFixed(0)} ms`);
    expect(failures).toEqual([]);
    for (const n of taken) expect(n).toBeGreaterThanOrEqual(3);
    expect(m.get('kcm_raft_is_leader')).toBe(1);
    expect(m.get('kcm_raft_term')).toBe(termBefore);
  }, 60_000);
});
