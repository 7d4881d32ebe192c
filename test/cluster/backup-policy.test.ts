// A backup policy on real engines (docs/backup-policies.md): a one-member manager, three
// agents, a cluster of 1 shard x 3 MariaDB nodes, a backup storage directory on host 3. A set
// taken by hand and the binlogs it needs are archived; then a policy keeping one set runs its
// period's backup once (a real manual_backup_cluster through the leader's scheduler), and its
// expiry deletes the older set's files and the binlogs the new set holds from the storage
// directory, keeps the new set's, and get_cluster_detail shows the restorable window that is left.
// The scheduler's rounds are run at once (runDue) instead of waiting for its 30 s tick.

import { access, readdir } from 'node:fs/promises';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterRecord } from '@kcm/manager';
import { emit } from '../helpers/emit-client';
import { HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines } from './machines';
import { openTestAccounts } from '../helpers/secrets';

const AGENT_PORT = 58178;
const MEMBER = '127.0.1.78:58178';
const DB = 'postgres_$$_public';

const exists = (file: string) => access(file).then(() => true, () => false);
/** The files under a directory (none when it is gone): a storage's delete may leave empty directories. */
const filesUnder = (dir: string) => readdir(dir, { recursive: true, withFileTypes: true }).then((es) => es.filter((e) => e.isFile()).map((e) => e.name), () => []);

describe('a backup policy on real engines: one run per period, expiry deletes only what the retention no longer needs', () => {
  let f: ClusterFixture;
  let cluster: ClusterRecord;
  let root = '';
  const state = () => f.manager.store.state();
  const shardId = () => Object.keys(cluster.shards)[0];
  const archive = () => state().binlogArchives[`${cluster.id}/${shardId()}`]?.files ?? [];
  const setsOf = () => Object.values(state().backupSets).filter((s) => s.clusterId === cluster.id).sort((a, b) => a.finishedAt - b.finishedAt);

  async function onMaster<T>(work: (conn: mysql.Connection) => Promise<T>): Promise<T> {
    const shard = state().clusters[cluster.id].shards[shardId()];
    const m = shard.nodes[shard.masterNodeId];
    const accounts = openTestAccounts(cluster.accounts);
    const conn = await mysql.createConnection({ socketPath: path.join(m.datadir, String(m.port), 'run', 'mariadbd.sock'), user: accounts.admin.user, password: accounts.admin.password });
    try {
      return await work(conn);
    } finally {
      await conn.end();
    }
  }
  /** Rows, then a closed binlog, then waits for the archive to hold it. */
  async function writeAndArchive(from: number, to: number): Promise<void> {
    const before = archive().length;
    await onMaster(async (c) => {
      for (let id = from; id < to; id++) await c.query(`INSERT INTO \`${DB}\`.t (id, v) VALUES (?, ?)`, [id, `row-${id}`]);
      await c.query('FLUSH BINARY LOGS');
    });
    await waitUntil('the closed binlog archived', async () => (archive().length > before ? true : undefined), 60_000);
  }

  beforeAll(async () => {
    f = await startClusterFixture({ agentPort: AGENT_PORT, member: MEMBER });
    await registerMachines(f);
    root = path.join(f.tmp, 'backups');
    const storage = await f.runJob('create_backup_storage', { name: 'policy', stype: 'fs', hostaddr: HOSTS[2], port: String(AGENT_PORT), path: root }, 30_000);
    expect(storage.status, storage.error_info).toBe('done');
    const created = await f.runJob('create_cluster', clusterParas({ nick_name: 'policy' }), 300_000);
    expect(created.status, created.error_info).toBe('done');
    cluster = state().clusters[String(created.attachment!.cluster_id)];
    await onMaster(async (c) => {
      await c.query(`CREATE DATABASE IF NOT EXISTS \`${DB}\``);
      await c.query(`CREATE TABLE \`${DB}\`.t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL) ENGINE=InnoDB`);
    });
  }, 400_000);

  afterAll(async () => {
    await f?.close();
  }, 120_000);

  it('a set taken by hand, then rows archived in closed binlogs', async () => {
    await writeAndArchive(1, 11);
    const manual = await f.runJob('manual_backup_cluster', { cluster_id: cluster.id }, 180_000);
    expect(manual.status, manual.error_info).toBe('done');
    await writeAndArchive(11, 21);
    expect(setsOf()).toHaveLength(1);
  }, 300_000);

  it('set_backup_policy keeping one set: its period runs once through the leader, expiry deletes the older set and the binlogs the new one holds', async () => {
    const manualSet = setsOf()[0];
    const policy = await f.runJob('set_backup_policy', { cluster_id: cluster.id, keep_sets: '1' }, 30_000);
    expect(policy.status, policy.error_info).toBe('done');
    await f.manager.backupPolicies.runDue();
    const run = state().backupPolicies.policies[cluster.id].lastRun!;
    expect(run.jobId).not.toBeNull();
    const policySet = await waitUntil('the policy\'s backup set recorded', async () => state().backupSets[run.jobId!], 180_000);
    expect(state().jobs[run.jobId!]).toMatchObject({ jobType: 'manual_backup_cluster', requestId: `backup-policy:${cluster.id}:${run.periodStart}` });

    // Rows after the policy's set, in a closed binlog it does not hold: expiry must keep it.
    await writeAndArchive(21, 26);
    const filesBefore = archive();
    // The next round: the same period does not run again; expiry removes the hand-made set.
    await f.manager.backupPolicies.runDue();
    const jobs = Object.values(state().jobs).filter((j) => j.jobType === 'manual_backup_cluster' && j.paras.cluster_id === cluster.id);
    expect(jobs).toHaveLength(2);
    expect(setsOf().map((s) => s.id)).toEqual([policySet.id]);
    expect(Object.keys(state().backupPolicies.pendingDeletions)).toEqual([]);
    // On the storage directory: the hand-made set's files are gone, the policy set's are there.
    expect(await filesUnder(path.join(root, `cluster_${cluster.id}`, `backup_${manualSet.id}`))).toEqual([]);
    for (const s of policySet.shards) expect(await exists(path.join(root, s.key))).toBe(true);
    // Binlogs: every archived file the new set holds entirely is gone from the state and the disk; the rest stay.
    const kept = new Set(archive().map((b) => b.key));
    const gone = filesBefore.filter((b) => !kept.has(b.key));
    expect(gone.length).toBeGreaterThan(0);
    for (const b of gone) expect(await exists(path.join(root, b.key))).toBe(false);
    expect(archive().length).toBeGreaterThan(0);
    for (const b of archive()) expect(await exists(path.join(root, b.key))).toBe(true);
    console.log(`policy run: job ${run.jobId}, expired set ${manualSet.id} and ${gone.length} of ${filesBefore.length} binlogs; storage holds ${(await readdir(root, { recursive: true })).length} entries`);
  }, 300_000);

  it('get_cluster_detail shows the policy, its last run done, and a restorable window from the kept set to the archive\'s end', async () => {
    await writeAndArchive(26, 31);
    const detail = (await emit(MEMBER, 'get_cluster_detail', { cluster_id: cluster.id })).attachment!;
    const kept = setsOf()[0];
    expect(detail.backup_policy).toMatchObject({ cluster_id: cluster.id, keep_sets: '1', full_every_hours: '24', storage: 'policy' });
    expect(detail.backup_policy_last_run).toMatchObject({ status: 'done', backup_id: kept.id });
    const coveredUntil = Math.max(...archive().map((b) => b.lastEventTime));
    expect(detail.restorable_window).toMatchObject({ earliest: String(Math.ceil(kept.finishedAt / 1000)), latest: String(coveredUntil) });
  }, 120_000);
});
