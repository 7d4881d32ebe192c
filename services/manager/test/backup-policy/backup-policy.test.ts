// Backup policies (issue 33) on a real one-member manager (grow-harness) with a fake clock:
// the scheduler's rounds are run by hand, so days pass in a line. The backup jobs it submits
// are held (runner stopped): what is checked is that each period's job is made exactly once.
// Real engines and storage: test/backup/backup-policy.test.ts.

import { describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { BackupPolicyScheduler } from '../../src/leader/backup-policy-scheduler';
import { keptSets } from '../../src/backup/retention';
import { policyOfCluster, policyRunRequestId } from '../../src/meta/backup-policies';
import { CommandKind } from '../../src/meta/commands';
import type { BackupStorage } from '../../src/backup/storage';
import type { BackupSetRecord, BackupStorageRecord } from '../../src/meta/state';
import { request, startHarness } from '../jobs/grow-harness';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** A storage that only records what is deleted from it. */
function deletingStorage() {
  const deleted: string[] = [];
  const open = (record: BackupStorageRecord): BackupStorage =>
    ({
      record,
      delete: async (_op: string, prefix: string) => {
        deleted.push(prefix);
        return 1;
      },
      close: () => {},
    }) as unknown as BackupStorage;
  return { open, deleted };
}

async function policyHarness(policy: Record<string, string>) {
  const h = await startHarness();
  const cluster = await h.readyCluster();
  await h.store.propose({ kind: CommandKind.BackupStorageCreated, at: 0, name: 'bk', stype: 'fs', hostaddr: '10.0.0.4', port: 58100, path: '/backups' });
  const set = await h.run('set_backup_policy', { cluster_id: cluster.id, ...policy });
  expect(set.status, set.errorInfo).toBe('done');
  // The backup jobs the policy submits wait in their queue: each one made is counted, none runs.
  await h.runner.stop();
  const storage = deletingStorage();
  let clock = 0;
  const scheduler = (member = 'leader-1') =>
    new BackupPolicyScheduler({ store: h.store, submit: (req) => h.manager.service.submitJob(req), openStorage: storage.open, member, now: () => clock, logger: silentLogger() });
  const backupJobs = () => Object.values(h.store.s.jobs).filter((j) => j.jobType === 'manual_backup_cluster' && j.paras.cluster_id === cluster.id);
  const detail = async () => h.manager.service.runQuery(request('get_cluster_detail', { cluster_id: cluster.id }));
  return { h, cluster, storage, scheduler, backupJobs, detail, setClock: (ms: number) => (clock = ms) };
}

/** Local 03:00 on a day of January 2026 (the policy's window is in the manager's local time). */
const at3 = (day: number) => new Date(2026, 0, day, 3, 0, 0).getTime();

describe('backup policy scheduling', () => {
  it('a policy whose window opens now runs once; a second round, and a new leader, do not double it; the next period runs again', async () => {
    const p = await policyHarness({ window: '02:00:00-04:00:00', keep_sets: '3' });
    p.setClock(at3(10));
    const first = p.scheduler('leader-1');
    await first.runDue();
    await first.runDue();
    expect(p.backupJobs()).toHaveLength(1);
    const job = p.backupJobs()[0];
    const run = policyOfCluster(p.h.store.s, p.cluster.id)!.lastRun!;
    expect(job.requestId).toBe(policyRunRequestId(p.cluster.id, run.periodStart));
    expect(run.jobId).toBe(job.id);
    // A new leader (another scheduler, same replicated state) finds the period done.
    await p.scheduler('leader-2').runDue();
    expect(p.backupJobs()).toHaveLength(1);
    // get_cluster_detail shows the policy and its last run (the job waits: its status is measured from it).
    const d = await p.detail();
    expect(d.backup_policy).toMatchObject({ cluster_id: p.cluster.id, full_every_hours: '24', window: '02:00:00-04:00:00', keep_sets: '3', storage: 'bk' });
    expect(d.backup_policy_last_run).toMatchObject({ job_id: job.id, status: p.h.store.s.jobs[job.id].status });
    // Outside the window the next day: nothing; inside it: the next period's run.
    p.setClock(at3(11) + 2 * HOUR);
    await first.runDue();
    expect(p.backupJobs()).toHaveLength(1);
    p.setClock(at3(12));
    await first.runDue();
    expect(p.backupJobs()).toHaveLength(2);
  });

  it('a run claimed by a leader that died before (or right after) submitting its job is submitted once by the next leader', async () => {
    const p = await policyHarness({ window: '02:00:00-04:00:00', keep_days: '7' });
    p.setClock(at3(10));
    const periodStart = Math.floor(at3(10) / DAY) * DAY;
    // The old leader claimed the period and died before submitting.
    await p.h.store.propose({ kind: CommandKind.BackupPolicyRunClaimed, at: at3(10), clusterId: p.cluster.id, periodStart, claimedBy: 'leader-1' });
    await p.scheduler('leader-2').runDue();
    expect(p.backupJobs()).toHaveLength(1);

    // Next period: the old leader claimed and submitted, but died before recording the job id.
    p.setClock(at3(11));
    const next = periodStart + DAY;
    await p.h.store.propose({ kind: CommandKind.BackupPolicyRunClaimed, at: at3(11), clusterId: p.cluster.id, periodStart: next, claimedBy: 'leader-1' });
    const made = await p.h.manager.service.submitJob(
      Object.assign(request('manual_backup_cluster', { cluster_id: p.cluster.id }), { envelope: { version: '1.0', job_type: 'manual_backup_cluster', timestamp: '1', user_name: 'backup-policy', request_id: policyRunRequestId(p.cluster.id, next), paras: { cluster_id: p.cluster.id } } }),
    );
    await p.scheduler('leader-2').runDue();
    expect(p.backupJobs()).toHaveLength(2);
    expect(policyOfCluster(p.h.store.s, p.cluster.id)!.lastRun!.jobId).toBe(made.jobId);
  });
});

describe('backup policy retention', () => {
  it('expiry removes only the sets and binlogs outside the retention, and the restorable window shown is what remains', async () => {
    const p = await policyHarness({ window: '02:00:00-04:00:00', keep_days: '3' });
    const now = at3(20) + 6 * HOUR; // outside the window: no new backup in this test
    p.setClock(now);
    const shards = Object.values(p.cluster.shards).map((s) => s.id);
    // Sets finished 10, 8, 5, 2 and 1 days ago; shard positions grow with the days (seq = 100 per day back).
    const ages = [10, 8, 5, 2, 1];
    const seqAt = (daysAgo: number) => 2000 - daysAgo * 100;
    for (const age of ages) {
      const set: BackupSetRecord = {
        id: `9${age}`, clusterId: p.cluster.id, storageName: 'bk', startedAt: now - age * DAY - 60_000, finishedAt: now - age * DAY, catalog: [],
        shards: shards.map((shardId) => ({ shardId, shardName: `s${shardId}`, key: `cluster_${p.cluster.id}/backup_9${age}/shard_${shardId}.mbstream`, bytes: 1, sha256: 'x', gtidPos: `0-1-${seqAt(age)}`, sourceHostaddr: '10.0.0.1', sourcePort: 5000, sourceWasMaster: false, transferMs: 1, storedAt: now - age * DAY })),
      };
      await p.h.store.propose({ kind: CommandKind.BackupSetRecorded, at: now, set });
    }
    // One binlog per half day per shard, 11 days back to 1 hour ago: file i covers seq (start, end].
    for (const shardId of shards) {
      for (let halfDays = 22; halfDays >= 0; halfDays--) {
        const endMs = halfDays === 0 ? now - HOUR : now - halfDays * 12 * HOUR;
        const endSeq = halfDays === 0 ? 2000 : 2000 - halfDays * 50;
        await p.h.store.propose({
          kind: CommandKind.BinlogArchived, at: now, clusterId: p.cluster.id, shardId,
          file: { key: `binlogs/${p.cluster.id}/${shardId}/b.${String(100 - halfDays).padStart(6, '0')}`, storageName: 'bk', name: `b.${100 - halfDays}`, serverId: 1, hostaddr: '10.0.0.1', port: 5000, bytes: 1, sha256: 'x',
            startGtidState: `0-1-${endSeq - 50}`, endGtidState: `0-1-${endSeq}`, firstEventTime: Math.floor((endMs - 12 * HOUR) / 1000) + 1, lastEventTime: Math.floor(endMs / 1000), archivedAt: now },
        });
      }
    }
    const before = await p.detail();
    expect(before.restorable_window).toMatchObject({ earliest: String(Math.ceil((now - 10 * DAY) / 1000)), latest: String(Math.floor((now - HOUR) / 1000)) });

    await p.scheduler().runDue();
    const s = p.h.store.s;
    // Kept: the sets of the last 3 days (2 and 1 days ago) and the newest before them (5 days ago).
    expect(Object.values(s.backupSets).filter((b) => b.clusterId === p.cluster.id).map((b) => b.id).sort()).toEqual(['91', '92', '95']);
    // Binlogs: those the 5-day-old set holds entirely (end seq <= 1500) are gone, every later one stays.
    for (const shardId of shards) {
      const files = s.binlogArchives[`${p.cluster.id}/${shardId}`].files;
      expect(Math.min(...files.map((f) => Number(f.endGtidState.split('-')[2])))).toBe(1550);
      expect(files).toHaveLength(10);
    }
    // Their objects were deleted from the storage, and nothing is left queued.
    expect(p.storage.deleted).toEqual(expect.arrayContaining([`cluster_${p.cluster.id}/backup_910/`, `cluster_${p.cluster.id}/backup_98/`]));
    expect(p.storage.deleted).toHaveLength(2 + 13 * shards.length);
    expect(Object.keys(s.backupPolicies.pendingDeletions)).toHaveLength(0);
    // The restorable window now starts at the kept 5-day-old set, which is before the retention's start.
    const after = await p.detail();
    expect(after.restorable_window).toMatchObject({ earliest: String(Math.ceil((now - 5 * DAY) / 1000)), latest: String(Math.floor((now - HOUR) / 1000)) });
    expect(Number((after.restorable_window as { earliest: string }).earliest)).toBeLessThanOrEqual((now - 3 * DAY) / 1000);

    // A second round expires nothing more.
    await p.scheduler().runDue();
    expect(p.storage.deleted).toHaveLength(2 + 13 * shards.length);
  });
});

describe('set_backup_policy and delete_backup_policy', () => {
  it('refuse what they cannot do with an error naming the field, and change nothing', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    // No storage registered yet: a policy would have nowhere to put its backups.
    expect(await h.refusal('set_backup_policy', { cluster_id: cluster.id, keep_days: '7' })).toEqual(['CONFLICT', expect.stringMatching(/^paras\.storage_name: no backup storage is registered/)]);
    await h.store.propose({ kind: CommandKind.BackupStorageCreated, at: 0, name: 'bk', stype: 'fs', hostaddr: '10.0.0.4', port: 58100, path: '/backups' });
    expect(await h.refusal('set_backup_policy', { cluster_id: cluster.id, keep_days: '7', storage_name: 'nope' })).toEqual(['NOT_FOUND', expect.stringMatching(/^paras\.storage_name: backup storage nope does not exist/)]);
    expect(await h.refusal('set_backup_policy', { cluster_id: '999', keep_days: '7' })).toEqual(['NOT_FOUND', expect.stringMatching(/paras\.cluster_id/)]);
    // A policy without a retention is refused by its paras schema (libs/protocol/test/invalid-variants.ts).
    expect(await h.refusal('delete_backup_policy', { cluster_id: cluster.id })).toEqual(['NOT_FOUND', `paras.cluster_id: cluster ${cluster.id} has no backup policy`]);
    expect(policyOfCluster(h.store.s, cluster.id)).toBeUndefined();

    const set = await h.run('set_backup_policy', { cluster_id: cluster.id, keep_days: '7', keep_sets: '2', full_every_hours: '6', window: '22:00:00-02:00:00' });
    expect(set.status, set.errorInfo).toBe('done');
    expect(set.attachment).toEqual({ cluster_id: cluster.id, full_every_hours: '6', window: '22:00:00-02:00:00', keep_days: '7', keep_sets: '2', storage: 'bk' });
    expect(policyOfCluster(h.store.s, cluster.id)).toMatchObject({ fullEveryHours: 6, startSecond: 22 * 3600, endSecond: 2 * 3600, keepDays: 7, keepSets: 2, storageName: null });
    const removed = await h.run('delete_backup_policy', { cluster_id: cluster.id });
    expect(removed.status, removed.errorInfo).toBe('done');
    expect(policyOfCluster(h.store.s, cluster.id)).toBeUndefined();
  });
});

describe('keptSets', () => {
  const set = (id: string, daysAgo: number, now: number) => ({ id, finishedAt: now - daysAgo * DAY }) as BackupSetRecord;
  const now = Date.UTC(2026, 0, 20);
  const sets = [set('a', 30, now), set('b', 20, now), set('c', 9, now), set('d', 6, now), set('e', 1, now)];
  const ids = (kept: BackupSetRecord[]) => kept.map((s) => s.id);
  it('keep_days keeps the sets inside it and the newest before it; keep_sets the newest n; both keep the union', () => {
    expect(ids(keptSets(sets, { keepDays: 7, keepSets: null }, now))).toEqual(['c', 'd', 'e']);
    expect(ids(keptSets(sets, { keepDays: null, keepSets: 1 }, now))).toEqual(['e']);
    expect(ids(keptSets(sets, { keepDays: 7, keepSets: 4 }, now))).toEqual(['b', 'c', 'd', 'e']);
    // Every set older than the retention: the newest of them is still kept (restore to its first moment).
    expect(ids(keptSets(sets.slice(0, 2), { keepDays: 7, keepSets: null }, now))).toEqual(['b']);
  });
});
