// run_restore_drill on real engines (issue 33 item 4, docs/restore-drills.md). One source
// cluster (1 shard x 3 nodes, the smallest create_cluster takes) with a table, two full
// backups taken from a held standby (each records the table's rows and CHECKSUM TABLE at its
// own GTID point), rows written after each. Then:
//  (a) a drill of the newest set builds a scratch cluster on the named machines, restores the
//      set into it, finds the table as recorded, reports RTO and RPO, and the scratch cluster
//      is gone afterwards: its instances' processes and directories, and from the cluster list;
//  (b) a point-in-time drill restores the older set and replays the archived binlogs up to the
//      newest set's exact position: the same figures, none of the rows written after it;
//  (c) a flipped byte in the newest set's stored object fails the drill, the scratch cluster is
//      deleted all the same, and the metric KcmRestoreDrillFailed fires on shows it: scraped
//      from /metrics and evaluated by promtool against deploy/prometheus/kcm-alerts.yml.
// The scratch clusters share the fixture's three loopback machines with the source (other
// ports and directories): the fixture has three hosts.

import { access, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterRecord } from '@kcm/manager';
import { emitRaw, metrics, waitForJobEnd } from '../helpers/emit-client';
import { sleep } from '../manager/helpers/processes';
import { openTestAccounts } from '../helpers/secrets';
import { enginePidsUnder, HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { gtidCovers } from '@kcm/agent-api';
import { archivedUpTo, shardArchive } from '../../services/manager/src/meta/binlog-archive';
import { alertFiresForCluster } from '../../services/manager/test/helpers/alert-rules';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './machines';

const AGENT_PORT = 58288;
const MEMBER = '127.0.1.88:58288';
const DB = 'postgres_$$_public';
/** The scratch clusters' machines, as an operator names them. */
const SCRATCH = { storage_iplists: [...HOSTS], computer_iplists: [HOSTS[1]] };

type Reply = Awaited<ReturnType<typeof waitForJobEnd>>;
type Instance = { hostaddr: string; port: number; dir: string };

describe('run_restore_drill: a backup set restored into a scratch cluster, checked, measured and deleted (real engines)', () => {
  let f: ClusterFixture;
  let src: ClusterRecord;
  const setIds: string[] = [];

  const state = () => f.manager.store.state();
  const masterOf = (c: ClusterRecord) => {
    const shard = Object.values(c.shards)[0];
    return shard.nodes[shard.masterNodeId];
  };
  async function onMaster<T>(work: (conn: mysql.Connection) => Promise<T>): Promise<T> {
    const m = masterOf(src);
    const conn = await mysql.createConnection({ host: m.hostaddr, port: m.port, ...openTestAccounts(src.accounts).storage, connectTimeout: 5000 });
    try {
      return await work(conn);
    } finally {
      await conn.end();
    }
  }
  const insertRows = (from: number, to: number) =>
    onMaster(async (c) => {
      for (let id = from; id < to; id++) await c.query(`INSERT INTO \`${DB}\`.drilled (id, v) VALUES (?, ?)`, [id, `row-${id}`]);
    });
  async function backUp(): Promise<string> {
    const reply = await f.runJob('manual_backup_cluster', { cluster_id: src.id }, 180_000);
    expect(reply.status, reply.error_info).toBe('done');
    const id = String(reply.attachment!.backup_id);
    expect(state().backupSets[id].shards[0].tableChecksums, state().backupSets[id].shards[0].checksumsOmitted).toHaveLength(1);
    return id;
  }
  /** Submits a drill (again while the archive has not reached the set's point yet) and waits for its end. */
  async function drill(paras: Record<string, unknown>): Promise<{ reply: Reply; jobId: string; ms: number }> {
    const started = Date.now();
    for (;;) {
      const ack = await emitRaw(MEMBER, 'run_restore_drill', { cluster_id: src.id, ...SCRATCH, ...paras });
      if (ack.error_code === '0') return { reply: await waitForJobEnd([MEMBER], ack.job_id, 600_000), jobId: ack.job_id, ms: Date.now() - started };
      if (!/wait for archiving to catch up/.test(ack.error_info) || Date.now() - started > 60_000) throw new Error(`run_restore_drill refused: ${ack.error_info}`);
      await sleep(500);
    }
  }
  /** The scratch cluster's instances, from its create step's output kept in the drill's job record. */
  function scratchInstances(jobId: string): { clusterId: string; instances: Instance[] } {
    const outputs = Object.values(state().jobs[jobId].stepOutputs) as { list_shard?: { list_node: { hostaddr: string; port: string }[] }[]; list_comp?: { hostaddr: string; port: string }[]; cluster_id?: string }[];
    const created = outputs.find((o) => o && Array.isArray(o.list_shard) && Array.isArray(o.list_comp))!;
    const dirOf = (hostaddr: string, kind: 'datadir' | 'comp_datadir') => f.dirs(HOSTS.indexOf(hostaddr as (typeof HOSTS)[number]))[kind];
    return {
      clusterId: created.cluster_id!,
      instances: [
        ...created.list_shard!.flatMap((s) => s.list_node.map((n) => ({ hostaddr: n.hostaddr, port: Number(n.port), dir: path.join(dirOf(n.hostaddr, 'datadir'), n.port) }))),
        ...created.list_comp!.map((c) => ({ hostaddr: c.hostaddr, port: Number(c.port), dir: path.join(dirOf(c.hostaddr, 'comp_datadir'), c.port) })),
      ],
    };
  }
  /** The scratch cluster is gone: not in the state nor the cluster list, none of its processes runs, none of its directories is left. */
  async function expectScratchGone(jobId: string): Promise<void> {
    const { clusterId, instances } = scratchInstances(jobId);
    expect(instances.length).toBe(4); // 3 storage nodes, 1 compute node
    expect(state().clusters[clusterId]).toBeUndefined();
    expect(Object.keys(state().pendingRollbacks)).toEqual([]);
    const list = await emitRaw(MEMBER, 'get_cluster_summary', {});
    expect((list.attachment as { list_cluster: { cluster_id: string }[] }).list_cluster.map((c) => c.cluster_id)).toEqual([src.id]);
    for (const i of instances) {
      expect(await enginePidsUnder(i.dir), `processes of ${i.hostaddr}:${i.port}`).toEqual([]);
      expect(await access(i.dir).then(() => 'still there', () => 'gone'), i.dir).toBe('gone');
    }
  }

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER });
    await registerMachines(f);
    const storage = await f.runJob('create_backup_storage', { name: 'drills', stype: 'fs', hostaddr: HOSTS[2], port: String(AGENT_PORT), path: path.join(f.tmp, 'backups') }, 30_000);
    expect(storage.status, storage.error_info).toBe('done');
  }, 120_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  it('a source cluster with a table, backed up twice from a held standby, with rows written after each set', async () => {
    const created = await f.runJob('create_cluster', clusterParas({ nick_name: 'drilled', computer_iplists: [HOSTS[0]] }), 300_000);
    expect(created.status, created.error_info).toBe('done');
    src = state().clusters[String(created.attachment!.cluster_id)];
    await onMaster(async (c) => {
      await c.query(`CREATE DATABASE IF NOT EXISTS \`${DB}\``);
      await c.query(`CREATE TABLE \`${DB}\`.drilled (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL) ENGINE=InnoDB`);
    });
    await insertRows(1, 21);
    setIds.push(await backUp());
    await insertRows(21, 31);
    setIds.push(await backUp());
    await insertRows(31, 36); // after the newest set: no drill may bring these back
    const [older, newer] = setIds.map((id) => state().backupSets[id].shards[0].tableChecksums![0]);
    expect([older.rows, newer.rows]).toEqual([20, 30]);
  }, 600_000);

  it('(a) a drill of the newest set passes, reports RTO and RPO, and leaves no scratch cluster behind', async () => {
    const { reply, jobId, ms } = await drill({});
    expect(reply.status, reply.error_info).toBe('done');
    const result = reply.attachment as Record<string, unknown>;
    console.log(`restore drill of set ${setIds[1]} (1 shard x 3 nodes): RTO ${result.rto_ms} ms, RPO ${result.rpo_s} s; the whole job ${(ms / 1000).toFixed(1)} s`);
    expect(result).toMatchObject({ cluster_id: src.id, passed: 'true', backup_id: setIds[1], restored_backup_id: setIds[1], mode: 'set', tables_checked: '1', list_mismatch: [], scratch_deleted: 'true' });
    expect(Number(result.rto_ms)).toBeGreaterThan(0);
    expect(Number(result.rpo_s)).toBeGreaterThanOrEqual(0);
    expect(result.point_time).toBe(String(Math.floor(state().backupSets[setIds[1]].finishedAt / 1000)));
    await expectScratchGone(jobId);
    // get_cluster_detail shows the last drill, measured from the state.
    const detail = await emitRaw(MEMBER, 'get_cluster_detail', { cluster_id: src.id });
    expect(detail.attachment).toMatchObject({ restore_drill_last: result, restore_drill_last_passed: result });
  }, 660_000);

  it('(b) a point-in-time drill restores the older set and replays the archive up to the newest set\'s exact point', async () => {
    // The archive holds the rows written after the newest set too: the replay has them at hand and must stop before them.
    const written = await onMaster(async (c) => String(((await c.query('SELECT @@gtid_binlog_pos AS pos')) as unknown as [{ pos: string }[]])[0][0].pos));
    const shardId = Object.keys(src.shards)[0];
    await waitUntil('the archive holds the rows written after the newest set', async () => (gtidCovers(archivedUpTo(shardArchive(state(), src.id, shardId)), written) ? true : undefined), 60_000);
    expect(gtidCovers(state().backupSets[setIds[1]].shards[0].gtidPos, written)).toBe(false);
    const { reply, jobId } = await drill({ backup_id: setIds[1], point_in_time: '1' });
    expect(reply.status, reply.error_info).toBe('done');
    const result = reply.attachment as Record<string, unknown>;
    console.log(`point-in-time restore drill (set ${setIds[0]} + binlogs to set ${setIds[1]}'s point): RTO ${result.rto_ms} ms, RPO ${result.rpo_s} s`);
    expect(result).toMatchObject({ passed: 'true', backup_id: setIds[1], restored_backup_id: setIds[0], mode: 'point_in_time', tables_checked: '1', list_mismatch: [] });
    await expectScratchGone(jobId);
  }, 660_000);

  it('(c) a flipped byte in the newest set fails the drill, the scratch cluster goes all the same, and KcmRestoreDrillFailed fires on the scraped metric', async () => {
    const file = path.join(f.tmp, 'backups', state().backupSets[setIds[1]].shards[0].key);
    const original = await readFile(file);
    const altered = Buffer.from(original);
    altered[Math.floor(altered.length / 2)] ^= 0x01;
    await writeFile(file, altered);
    const { reply, jobId } = await drill({});
    await writeFile(file, original);
    expect(reply.status).toBe('failed');
    expect(reply.error_info).toMatch(/\(verify the backup set and the empty destination\) failed: .*backup set refused, its files do not match their checksums/);
    await expectScratchGone(jobId);
    const detail = await emitRaw(MEMBER, 'get_cluster_detail', { cluster_id: src.id });
    const { restore_drill_last: last, restore_drill_last_passed: lastPassed } = detail.attachment as Record<string, Record<string, string>>;
    expect(last).toMatchObject({ job_id: jobId, passed: 'false', backup_id: setIds[1], scratch_deleted: 'true', rto_ms: '' });
    expect(last.error).toMatch(/backup set refused/);
    expect(lastPassed.passed).toBe('true'); // the earlier pass stays the last passing drill

    const scraped = await metrics(MEMBER);
    const sample = (name: string) => scraped.get(`${name}{cluster_id="${src.id}"}`);
    expect(sample('kcm_restore_drill_last_failed')).toBe(1);
    expect(sample('kcm_restore_drill_last_success_timestamp_seconds')).toBe(state().restoreDrills![src.id].lastPassed!.finishedAt / 1000);
    expect(alertFiresForCluster('KcmRestoreDrillFailed', new Map([['kcm_restore_drill_last_failed', sample('kcm_restore_drill_last_failed')!]]), src.id)).toBe(true);
  }, 660_000);
});
