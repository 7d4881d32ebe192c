// Restore drills (issue 33 item 4, docs/restore-drills.md) apart from the engines: what a
// drill is refused for, which set it restores and checks, its verdict, RTO and RPO, what the
// state keeps of it, and the policy's drill schedule on a real one-member manager with a fake
// clock (the drill jobs it submits are held: what is checked is that each period's drill is
// made exactly once). Real engines: test/cluster/restore-drill-job.test.ts.

import { describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { parseRequest } from '@kcm/protocol';
import { BackupPolicyScheduler, dueDrillPeriod } from '../../src/leader/backup-policy-scheduler';
import { RollbackFinisher } from '../../src/leader/rollback-finisher';
import { policyOfCluster } from '../../src/meta/backup-policies';
import { CommandKind } from '../../src/meta/commands';
import { applyCommand } from '../../src/meta/fsm';
import { drillRunRequestId, drillsOfCluster, type RestoreDrillOutcome } from '../../src/meta/restore-drills';
import { emptyMetaState, type ArchivedBinlogRecord, type BackupSetRecord, type BackupStorageRecord, type ClusterRecord } from '../../src/meta/state';
import { chooseDrillSets, scratchClusterParas } from '../../src/jobs/restore-drill/plan';
import { dataAgeRpoS, drillVerdict, restoreRtoMs } from '../../src/jobs/restore-drill/measure';
import type { BackupStorage } from '../../src/backup/storage';
import { HOSTS, request, startHarness } from '../jobs/grow-harness';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const table = (t: string, rows: number, checksum: string) => ({ database: 'postgres_$$_public', table: t, rows, checksum });

/** A set of the cluster's shards finished at `finishedAt`, with figures recorded (or not). */
function setOf(cluster: Pick<ClusterRecord, 'id' | 'shards'>, id: string, finishedAt: number, figures = true): BackupSetRecord {
  return {
    id, clusterId: cluster.id, storageName: 'bk', startedAt: finishedAt - 60_000, finishedAt, catalog: [],
    shards: Object.values(cluster.shards).map((s) => ({
      shardId: s.id, shardName: s.name, key: `cluster_${cluster.id}/backup_${id}/shard_${s.id}.mbstream`, bytes: 1, sha256: 'x', gtidPos: '0-1-10',
      sourceHostaddr: '10.0.0.2', sourcePort: 5001, sourceWasMaster: !figures, transferMs: 1, storedAt: finishedAt,
      ...(figures ? { tableChecksums: [table(`t${s.id}`, 20, '123')] } : {}),
    })),
  };
}

async function drillHarness() {
  const h = await startHarness();
  const cluster = await h.readyCluster();
  await h.store.propose({ kind: CommandKind.BackupStorageCreated, at: 0, name: 'bk', stype: 'fs', hostaddr: '10.0.0.4', port: 58100, path: '/backups' });
  return { h, cluster };
}

describe('run_restore_drill is refused before anything is committed, naming the field', () => {
  it('no set, no set with figures, an unknown set, a set that is the oldest for a point-in-time drill, machines not registered', async () => {
    const { h, cluster } = await drillHarness();
    const machines = { storage_iplists: HOSTS.slice(0, 3), computer_iplists: [HOSTS[3]] };
    const jobsBefore = h.jobCount();
    expect(await h.refusal('run_restore_drill', { cluster_id: '99', ...machines })).toEqual(['NOT_FOUND', 'paras.cluster_id: cluster 99 does not exist']);
    expect(await h.refusal('run_restore_drill', { cluster_id: cluster.id, ...machines })).toEqual(['NOT_FOUND', `paras.cluster_id: cluster ${cluster.id} has no backup set; run manual_backup_cluster first`]);
    await h.store.propose({ kind: CommandKind.BackupSetRecorded, at: 0, set: setOf(cluster, '501', 1_000 * DAY, false) });
    expect((await h.refusal('run_restore_drill', { cluster_id: cluster.id, ...machines }))?.[1]).toMatch(/^paras\.cluster_id: no backup set of cluster \d+ recorded table checksums \(shard shard_\d+ recorded no table checksums \(it was backed up from its master\)\)/);
    await h.store.propose({ kind: CommandKind.BackupSetRecorded, at: 0, set: setOf(cluster, '502', 1_001 * DAY) });
    expect(await h.refusal('run_restore_drill', { cluster_id: cluster.id, backup_id: '777', ...machines })).toEqual(['NOT_FOUND', `paras.backup_id: cluster ${cluster.id} has no backup set 777`]);
    expect((await h.refusal('run_restore_drill', { cluster_id: cluster.id, backup_id: '501', ...machines }))?.[1]).toMatch(/^paras\.backup_id: set 501 cannot be drilled/);
    expect((await h.refusal('run_restore_drill', { cluster_id: cluster.id, backup_id: '501', point_in_time: '1', ...machines }))?.[0]).toBe('CONFLICT');
    expect(await h.refusal('run_restore_drill', { cluster_id: cluster.id, storage_iplists: ['10.9.9.9'], computer_iplists: [HOSTS[3]] })).toEqual(['NOT_FOUND', 'paras.storage_iplists[0]: 10.9.9.9 is not registered as a storage machine']);
    // A bad paras shape never reaches the job: the protocol names the field.
    const parsed = parseRequest({ version: '1.0', job_type: 'run_restore_drill', timestamp: '1', user_name: 't', paras: { cluster_id: cluster.id, storage_iplists: [], computer_iplists: [HOSTS[3]] } });
    expect(parsed.ok ? undefined : [parsed.error.errorName, parsed.error.field, parsed.error.message]).toEqual(['INVALID_PARAS', 'paras.storage_iplists', 'paras.storage_iplists: must name at least one machine for the scratch cluster, got []']);
    expect(h.jobCount()).toBe(jobsBefore);
  });
});

describe('the scratch cluster is deleted whatever happens', () => {
  it('a drill failing while its scratch cluster is built deletes it; what a dead host holds is a recorded rollback that outlives the job and is finished when the host answers', async () => {
    const { h, cluster } = await drillHarness();
    await h.store.propose({ kind: CommandKind.BackupSetRecorded, at: 0, set: setOf(cluster, '700', Date.now() - HOUR) });
    const portsBefore = JSON.stringify(h.store.s.ports);
    // The scratch compute node's host dies while it installs it.
    h.failOn({ method: 'pg.install', host: HOSTS[3], kill: true });
    const status = await h.run('run_restore_drill', { cluster_id: cluster.id, storage_iplists: HOSTS.slice(0, 3), computer_iplists: [HOSTS[3]] });
    expect(status.status).toBe('failed');
    expect(status.errorInfo).toMatch(/\(install compute nodes\) failed: .*rollback incomplete: agent 10\.0\.0\.4 unreachable; compute node \d+ at 10\.0\.0\.4:6\d{3} will be removed when it answers$/);
    const scratch = Object.values(h.store.s.clusters).find((c) => c.scratchOfDrill)!;
    expect(scratch.scratchOfDrill).toEqual({ drillJobId: status.jobId, sourceClusterId: cluster.id });
    // Shown as the drill's, never taken for a user's cluster.
    const listed = (await h.manager.service.runQuery(request('get_cluster_summary', {}))).list_cluster as Record<string, unknown>[];
    expect(listed.find((c) => c.cluster_id === scratch.id)).toMatchObject({ nick_name: `restore_drill_of_cluster_${cluster.id}_set_700`, scratch_of_drill: { drill_job_id: status.jobId, source_cluster_id: cluster.id } });
    expect(listed.find((c) => c.cluster_id === cluster.id)).not.toHaveProperty('scratch_of_drill');
    // The record is the drill's own (not the job's: a finished job drops its own), and the failed drill says the scratch is pending.
    expect(Object.keys(h.store.s.pendingRollbacks)).toEqual([`drill-scratch-${status.jobId}`]);
    expect(drillsOfCluster(h.store.s, cluster.id)!.last).toMatchObject({ jobId: status.jobId, passed: false, scratchClusterId: scratch.id, scratchDeleted: false, rtoMs: null });
    expect(drillsOfCluster(h.store.s, cluster.id)!.last.error).toMatch(/^step install compute nodes failed: /);

    h.down.delete(HOSTS[3]);
    await new RollbackFinisher({ store: h.store, agents: h.agents, withAgent: h.withAgent, logger: silentLogger(), intervalMs: 60_000 }).finishAll();
    expect(h.store.s.clusters[scratch.id]).toBeUndefined();
    expect(h.store.s.pendingRollbacks).toEqual({});
    expect(JSON.stringify(h.store.s.ports)).toBe(portsBefore);
  });
});

describe('which set a drill restores and checks', () => {
  const state = emptyMetaState();
  const cluster = { id: '7', shards: { 1: { id: '1', name: 'shard_1' }, 2: { id: '2', name: 'shard_2' } } } as unknown as ClusterRecord;
  state.clusters['7'] = { ...cluster, options: { haMode: 'rbr', maxStorageSizeGb: 5, maxConnections: 300, cpuCores: 2, cpuLimitNode: 'quota', innodbSizeMb: 128, rocksdbBlockCacheSizeMb: 0, dbcfg: 1, fullsyncLevel: 2, storageVersion: '10.11.19' } } as ClusterRecord;
  for (const [id, day, figures] of [['10', 1, true], ['11', 2, true], ['12', 3, false]] as const) state.backupSets[id] = setOf(cluster, id, day * DAY, figures);
  const machines = { storage_iplists: ['10.0.0.5'], computer_iplists: ['10.0.0.6'], point_in_time: '0' as const };

  it('by default the newest set with figures, as taken; a point-in-time drill restores the set before it, once the archive reaches its point', () => {
    expect(chooseDrillSets(state, { cluster_id: '7', ...machines })).toEqual({ mode: 'set', checkedBackupId: '11', restoredBackupId: '11' });
    expect(() => chooseDrillSets(state, { cluster_id: '7', ...machines, point_in_time: '1' })).toThrow('paras.point_in_time: the archived binlogs of shard shard_1 reach nothing, short of set 11\'s 0-1-10; wait for archiving to catch up');
    for (const shardId of ['1', '2']) state.binlogArchives[`7/${shardId}`] = { clusterId: '7', shardId, files: [{ endGtidState: '0-1-12' } as ArchivedBinlogRecord] };
    expect(chooseDrillSets(state, { cluster_id: '7', ...machines, point_in_time: '1' })).toEqual({ mode: 'point_in_time', checkedBackupId: '11', restoredBackupId: '10' });
    expect(chooseDrillSets(state, { cluster_id: '7', ...machines, backup_id: '10' })).toEqual({ mode: 'set', checkedBackupId: '10', restoredBackupId: '10' });
  });

  it('the scratch cluster has the set\'s shards and the source\'s options on the named machines', () => {
    const p = { cluster_id: '7', ...machines, nodes: 3 };
    expect(scratchClusterParas(state, p, chooseDrillSets(state, p))).toMatchObject({
      nick_name: 'restore_drill_of_cluster_7_set_11', shards: 2, nodes: 3, comps: 1, max_storage_size: 5, max_connections: 300, cpu_cores: 2, cpu_limit_node: 'quota',
      innodb_size: 128, fullsync_level: 2, storage_iplists: ['10.0.0.5'], computer_iplists: ['10.0.0.6'], storage_version: '10.11.19',
    });
  });
});

describe('a drill\'s verdict, RTO and RPO', () => {
  it('passes only when every recorded table came back with its rows and checksum, and no other table did', () => {
    const recorded = [table('a', 20, '1'), table('b', 5, '2')];
    expect(drillVerdict([{ recorded, restored: recorded }, { recorded: [table('c', 1, '3')], restored: [table('c', 1, '3')] }])).toEqual({ tablesChecked: 3, mismatches: [] });
    expect(drillVerdict([{ recorded, restored: [table('a', 20, '9'), table('x', 1, '1')] }])).toEqual({
      tablesChecked: 2,
      mismatches: [
        { table: 'postgres_$$_public.a', what: 'checksum 9 restored, 1 recorded' },
        { table: 'postgres_$$_public.b', what: 'missing from the restored copy' },
        { table: 'postgres_$$_public.x', what: 'in the restored copy, not recorded at backup time' },
      ],
    });
  });

  it('RTO counts from the restore\'s start to verified; RPO is the restored point\'s age when the drill started', () => {
    expect(restoreRtoMs(10_000, 52_500)).toBe(42_500);
    expect(restoreRtoMs(10_000, 9_000)).toBe(0); // a clock that went back
    expect(dataAgeRpoS(Date.UTC(2026, 0, 2, 3), Date.UTC(2026, 0, 2, 1, 30))).toBe(5400);
    expect(dataAgeRpoS(1_000, 2_000)).toBe(0);
  });
});

describe('what the state keeps of drills', () => {
  const outcome = (jobId: string, passed: boolean, finishedAt: number): RestoreDrillOutcome => ({
    clusterId: '3', jobId, passed, backupId: '9', restoredBackupId: '9', mode: 'set', pointAt: 1_000, rtoMs: passed ? 40_000 : null, rpoS: 60,
    tablesChecked: 2, mismatches: passed ? [] : [{ table: 'd.t', what: 'missing from the restored copy' }], scratchClusterId: '4', scratchDeleted: true, finishedAt,
  });

  it('the last drill, and the last that passed: a failed drill does not erase the earlier pass', () => {
    const state = emptyMetaState();
    const record = (o: RestoreDrillOutcome) => expect(applyCommand(state, { kind: CommandKind.RestoreDrillRecorded, at: o.finishedAt, outcome: o }).ok).toBe(true);
    record(outcome('20', true, 5_000));
    record(outcome('21', false, 9_000));
    expect(drillsOfCluster(state, '3')).toMatchObject({ last: { jobId: '21', passed: false }, lastPassed: { jobId: '20', finishedAt: 5_000 } });
    record(outcome('21', false, 9_000)); // recorded again (a resumed job): the same
    expect(drillsOfCluster(state, '3')!.lastPassed!.jobId).toBe('20');
  });
});

describe('a backup policy\'s drill schedule (fake clock)', () => {
  const at3 = (day: number) => new Date(2026, 0, day, 3, 0, 0).getTime();
  const drillSchedule = { everyDays: 7, storageIplists: ['10.0.0.1'], computerIplists: ['10.0.0.4'] };

  it('a period is due once, inside the window; the next comes every drill_every_days days', () => {
    const policy = { drill: drillSchedule, lastDrill: null, startSecond: 2 * 3600, endSecond: 4 * 3600 };
    const start = dueDrillPeriod(policy, at3(10));
    expect(start).toBe(Math.floor(at3(10) / (7 * DAY)) * 7 * DAY);
    expect(dueDrillPeriod(policy, at3(10) + 3 * HOUR)).toBeUndefined(); // outside the window
    const ran = { ...policy, lastDrill: { periodStart: start!, claimedAt: 0, claimedBy: 'm', jobId: '5' } };
    expect(dueDrillPeriod(ran, at3(10))).toBeUndefined();
    expect(dueDrillPeriod(ran, start! + 7 * DAY + 3 * HOUR)).toBe(start! + 7 * DAY);
    expect(dueDrillPeriod({ ...policy, drill: null }, at3(10))).toBeUndefined();
  });

  it('the scheduler submits each period\'s drill once, also across a new leader and a leader that died after claiming it', async () => {
    const { h, cluster } = await drillHarness();
    const set = await h.run('set_backup_policy', {
      cluster_id: cluster.id, window: '02:00:00-04:00:00', keep_sets: '3', full_every_hours: '168',
      drill_every_days: '7', drill_storage_iplists: HOSTS.slice(0, 3), drill_computer_iplists: [HOSTS[3]],
    });
    expect(set.status, set.errorInfo).toBe('done');
    expect(set.attachment).toMatchObject({ drill_every_days: '7', drill_storage_iplists: HOSTS.slice(0, 3), drill_computer_iplists: [HOSTS[3]] });
    await h.runner.stop(); // the jobs it submits wait: each one made is counted, none runs
    let clock = at3(10);
    const scheduler = (member: string) =>
      new BackupPolicyScheduler({ store: h.store, submit: (req) => h.manager.service.submitJob(req), openStorage: (r: BackupStorageRecord) => ({ record: r, close() {} }) as unknown as BackupStorage, member, now: () => clock, logger: silentLogger() });
    const drills = () => Object.values(h.store.s.jobs).filter((j) => j.jobType === 'run_restore_drill');

    // No set recorded figures yet: the period is not even claimed.
    await scheduler('leader-1').runDue();
    expect(drills()).toHaveLength(0);
    expect(policyOfCluster(h.store.s, cluster.id)!.lastDrill ?? null).toBeNull();

    await h.store.propose({ kind: CommandKind.BackupSetRecorded, at: clock, set: setOf(cluster, '600', clock - HOUR) });
    const first = scheduler('leader-1');
    await first.runDue();
    await first.runDue();
    await scheduler('leader-2').runDue();
    expect(drills()).toHaveLength(1);
    const run = policyOfCluster(h.store.s, cluster.id)!.lastDrill!;
    expect(drills()[0]).toMatchObject({ id: run.jobId, requestId: drillRunRequestId(cluster.id, run.periodStart) });
    expect(drills()[0].paras).toMatchObject({ cluster_id: cluster.id, storage_iplists: HOSTS.slice(0, 3), computer_iplists: [HOSTS[3]], choice: { checkedBackupId: '600' } });

    // Days later, same period: nothing. The next period, a leader claims it and dies before submitting: the next leader submits it, once.
    clock = at3(12);
    await first.runDue();
    expect(drills()).toHaveLength(1);
    const next = run.periodStart + 7 * DAY;
    clock = new Date(new Date(next + DAY).setHours(3, 0, 0, 0)).getTime();
    expect(dueDrillPeriod(policyOfCluster(h.store.s, cluster.id)!, clock)).toBe(next);
    await h.store.propose({ kind: CommandKind.RestoreDrillRunClaimed, at: clock, clusterId: cluster.id, periodStart: next, claimedBy: 'leader-1' });
    await scheduler('leader-2').runDue();
    await scheduler('leader-3').runDue();
    expect(drills()).toHaveLength(2);
    expect(policyOfCluster(h.store.s, cluster.id)!.lastDrill).toMatchObject({ periodStart: next, claimedBy: 'leader-1', jobId: drills()[1].id });
  });
});
