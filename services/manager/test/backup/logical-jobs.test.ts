// logical_backup and logical_restore job logic against fake agents and in-memory storage
// (real engines: test/cluster/logical-backup-restore.test.ts).

import { beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { KcmError, parseRequest } from '@kcm/protocol';
import { logicalBackupJob, logicalRestoreJob } from '../../src/jobs/logical';
import type { JobDefinition, StepContext } from '../../src/jobs/framework/workflow';
import { CommandKind } from '../../src/meta/commands';
import type { LogicalBackupPart } from '../../src/meta/logical-backup-records';
import { cluster } from '../helpers/cluster-state';
import { LocalStore, until } from '../helpers/local-store';
import { fakeLogicalAgents, type FakeLogicalAgents } from './logical-fakes';
import { storedAccount, testSecretBox } from '../../../../test/helpers/secrets';

let store: LocalStore;
let f: FakeLogicalAgents;

function paras(jobType: 'logical_backup' | 'logical_restore', p: Record<string, unknown>) {
  const parsed = parseRequest({ version: '1.0', job_type: jobType, timestamp: '1', user_name: 't', paras: p });
  if (!parsed.ok) throw parsed.error;
  return parsed.request.paras as never;
}

/** Validates, then runs every step in order, as the runner would on one leader. */
async function run<R>(def: JobDefinition<any, any, R>, p: unknown, now = () => 1_800_000_000_000): Promise<R> {
  def.validate?.(p, store.state());
  const outputs: Record<string, unknown> = {};
  for (const step of def.steps(p)) {
    const ctx = {
      propose: (cmd) => store.propose(cmd),
      agents: f.deps.agents,
      withAgent: () => Promise.reject(new Error('none')),
      logger: silentLogger(),
      now,
      secrets: testSecretBox(),
      jobId: '9',
      paras: p,
      outputs,
      state: () => store.state(),
      progress: async () => {},
      placeInTurn: (place) => place(),
      signal: new AbortController().signal,
    } as StepContext<any, any>;
    outputs[step.name] = await step.run(ctx);
  }
  return def.result(outputs, p);
}

const backupJob = () => logicalBackupJob({ openStorage: () => f.storage });
const restoreJob = () => logicalRestoreJob({ openStorage: () => f.storage });

/** A finished backup set of `dbTable` taken at takenAt (seconds), one part per [shardId, tables]. */
async function recordSet(type: 'table' | 'schema', dbTable: string, takenAtSeconds: number, parts: [string, string[]][]) {
  const key = `1/${type}/${dbTable}`;
  if (!store.s.logicalBackups.schedules[key]) {
    await store.propose({ kind: CommandKind.LogicalBackupScheduled, at: 0, clusterId: '1', jobId: '1', objectType: type, entries: [{ dbTable, window: '01:00:00-02:00:00', startSecond: 3600, endSecond: 7200 }] });
  }
  const day = new Date(takenAtSeconds * 1000).toISOString().slice(0, 10);
  const claim = await store.propose({ kind: CommandKind.LogicalBackupRunClaimed, at: 0, scheduleKey: key, windowDay: day, claimedBy: 'm' });
  const runId = (claim as { value: { runId: string } }).value.runId;
  const stored: LogicalBackupPart[] = [];
  for (const [shardId, tables] of parts) {
    const location = `logical/cluster_1/run_${runId}/shard_${shardId}.sql`;
    const put = await f.storage.put(location, (async function* () { yield Buffer.from(`-- set ${runId} shard ${shardId}\n`); })());
    stored.push({ shardId, storage: 'mem', location, tables, ...put });
  }
  await store.propose({ kind: CommandKind.LogicalBackupRunFinished, at: 0, scheduleKey: key, runId, ok: true, set: { takenAt: takenAtSeconds * 1000, parts: stored } });
  return runId;
}

const withAccounts = (c: ReturnType<typeof cluster>) => ({ ...c, accounts: { storage: storedAccount({ user: 'kcm_storage', password: 'pw-12345678' }) } as typeof c.accounts });

beforeEach(() => {
  store = new LocalStore();
  store.s.clusters['1'] = withAccounts(cluster('1', 'ready', [['1', '127.0.2.1', 55100]], [['1', '127.0.2.3', 55200]]));
  f = fakeLogicalAgents();
});

/** Local time `h:00` of the day of 1_800_000_000_000 (the window checks use the manager's local time). */
const localHour = (h: number) => {
  const d = new Date(1_800_000_000_000);
  return new Date(d.getFullYear(), d.getMonth(), d.getDate(), h).getTime();
};

describe('logical_backup', () => {
  it('records one daily schedule per entry, with the inferred type, and answers what it scheduled', async () => {
    f.tablesOf.set('127.0.2.1', ['shop_$$_public.orders']);
    const result = await run(backupJob(), paras('logical_backup', { cluster_id: '1', backup: [{ db_table: 'shop_$$_public', backup_time: '23:00:00-01:00:00' }] }), () => localHour(12));
    expect(result).toEqual({ backup_type: 'schema', backup: [{ db_table: 'shop_$$_public', backup_time: '23:00:00-01:00:00' }] });
    expect(store.s.logicalBackups.schedules['1/schema/shop_$$_public']).toMatchObject({ startSecond: 23 * 3600, endSecond: 3600, lastRun: null, scheduledByJob: '9' });
  });

  it('refuses a cluster that does not exist before committing anything', () => {
    expect(() => backupJob().validate!(paras('logical_backup', { cluster_id: '5', backup: [{ db_table: 'shop', backup_time: '01:00:00-02:00:00' }] }), store.state())).toThrow(/paras.cluster_id: cluster 5 does not exist/);
  });

  it('an object no shard holds is refused naming the entry before any schedule is recorded: nothing would ever be stored', async () => {
    f.tablesOf.set('127.0.2.1', ['shop_$$_public.orders']);
    const p = paras('logical_backup', { cluster_id: '1', backup: [{ db_table: 'shop_$$_public.orders', backup_time: '01:00:00-02:00:00' }, { db_table: 'shop_$$_public.gone', backup_time: '01:00:00-02:00:00' }] });
    await expect(run(backupJob(), p, () => localHour(12))).rejects.toMatchObject({
      errorName: 'NOT_FOUND',
      field: 'paras.backup[1].db_table',
      message: 'paras.backup[1].db_table: no shard of cluster 1 holds table shop_$$_public.gone (nor any partition of a partitioned table of that name); nothing is stored',
    });
    expect(Object.keys(store.s.logicalBackups.schedules)).toEqual([]);
  });

  it('a partitioned parent (on the compute nodes only) is found by its partitions on the shards', async () => {
    f.tablesOf.set('127.0.2.1', ['shop_$$_public.acct_01']);
    f.partitionOf.set('shop_$$_public.acct_01', 'shop_$$_public.acct');
    await run(backupJob(), paras('logical_backup', { cluster_id: '1', backup: [{ db_table: 'shop_$$_public.acct', backup_time: '01:00:00-02:00:00' }] }), () => localHour(12));
    expect(Object.keys(store.s.logicalBackups.schedules)).toEqual(['1/table/shop_$$_public.acct']);
  });

  it("with its window open now, answers done only once the window's run stored its set, and fails with the run's error when it stored nothing", async () => {
    f.tablesOf.set('127.0.2.1', ['shop_$$_public.orders']);
    const p = paras('logical_backup', { cluster_id: '1', backup: [{ db_table: 'shop_$$_public.orders', backup_time: '01:00:00-02:00:00' }] });
    const now = () => localHour(1) + 60_000;
    const dayOf = (ms: number) => new Date(ms).toLocaleDateString('sv'); // YYYY-MM-DD, local
    let answered = false;
    const job = run(backupJob(), p, now).then((r) => ((answered = true), r));
    await until(() => store.s.logicalBackups.schedules['1/table/shop_$$_public.orders'] !== undefined);
    await new Promise((r) => setTimeout(r, 600));
    expect(answered).toBe(false);
    // The scheduler's run: claimed, then finished with its set.
    const key = '1/table/shop_$$_public.orders';
    await store.propose({ kind: CommandKind.LogicalBackupRunClaimed, at: now(), scheduleKey: key, windowDay: dayOf(now()), claimedBy: 'm' });
    await store.propose({ kind: CommandKind.LogicalBackupRunFinished, at: now(), scheduleKey: key, runId: '1', ok: true, set: { takenAt: now(), parts: [] } });
    await job;

    // The next day's window: its run fails for good (the table went away after the check).
    const tomorrow = () => now() + 24 * 3600_000;
    const failing = run(backupJob(), p, tomorrow);
    await until(() => store.s.logicalBackups.schedules[key].scheduledAt === tomorrow());
    const claim = await store.propose({ kind: CommandKind.LogicalBackupRunClaimed, at: tomorrow(), scheduleKey: key, windowDay: dayOf(tomorrow()), claimedBy: 'm' });
    expect(claim.ok).toBe(true);
    await store.propose({ kind: CommandKind.LogicalBackupRunFinished, at: tomorrow(), scheduleKey: key, runId: '2', ok: false, error: 'NOT_FOUND: no shard of cluster 1 holds table shop_$$_public.orders' });
    await expect(failing).rejects.toMatchObject({ errorName: 'NOT_FOUND', message: expect.stringContaining('stored nothing (1 attempts): NOT_FOUND: no shard of cluster 1 holds table shop_$$_public.orders') });
  });
});

describe('logical_restore', () => {
  it('loads the newest set taken before restore_time back into the shard it came from, then syncs the compute nodes; done_dts as the spec shows', async () => {
    await recordSet('table', 'shop_$$_public.orders', 1_700_000_000, [['11', ['shop_$$_public.orders']]]);
    const newer = await recordSet('table', 'shop_$$_public.orders', 1_700_086_400, [['11', ['shop_$$_public.orders']]]);
    await recordSet('table', 'shop_$$_public.orders', 1_700_200_000, [['11', ['shop_$$_public.orders']]]);
    const result = await run(restoreJob(), paras('logical_restore', { src_cluster_id: '1', dst_cluster_id: '1', restore_type: 'table', restore: [{ db_table: 'shop_$$_public.orders', restore_time: '1700100000' }] }));
    expect(result).toEqual({ done_dts: 'shop_$$_public.orders,' });
    expect(f.loads).toEqual([{ host: '127.0.2.1', opId: `job:9:logical-load:${newer}-11`, port: 55100, text: `-- set ${newer} shard 11\n` }]);
  });

  it('the older flat form without a type restores a schema; done_dts names each table of it, a comma after each', async () => {
    await recordSet('schema', 'shop_$$_public', 1_700_000_000, [['11', ['shop_$$_public.items', 'shop_$$_public.orders']]]);
    const result = await run(restoreJob(), paras('logical_restore', { src_cluster_id: '1', dst_cluster_id: '1', db_table: 'shop_$$_public', restore_time: '1700000001' }));
    expect(result).toEqual({ done_dts: 'shop_$$_public.items,shop_$$_public.orders,' });
  });

  it('into another cluster, each part goes to the shard at its place in shard order', async () => {
    await recordSet('schema', 'shop_$$_public', 1_700_000_000, [['11', ['shop_$$_public.a']], ['12', ['shop_$$_public.b']]]);
    const dst = withAccounts(cluster('2', 'ready', [['5', '127.0.2.2', 55300]], []));
    dst.shards['22'] = { id: '22', name: 'shard_22', masterNodeId: '6', nodes: { 6: { id: '6', hostaddr: '127.0.2.3', port: 55301, serverId: 6, datadir: '/d', logdir: '/l', walLogDir: '/w' } } };
    store.s.clusters['2'] = dst;
    await run(restoreJob(), paras('logical_restore', { src_cluster_id: '1', dst_cluster_id: '2', restore: [{ db_table: 'shop_$$_public', restore_time: '1700000001' }] }));
    expect(f.loads.map((l) => [l.host, l.port])).toEqual([
      ['127.0.2.2', 55300],
      ['127.0.2.3', 55301],
    ]);
  });

  it('refuses an entry with no backup before its restore_time, naming the entry, before committing anything', async () => {
    await recordSet('table', 'shop_$$_public.orders', 1_700_000_000, [['11', ['shop_$$_public.orders']]]);
    const p = paras('logical_restore', { src_cluster_id: '1', dst_cluster_id: '1', restore: [{ db_table: 'shop_$$_public.orders', restore_time: '1700000000' }] });
    let refusal: unknown;
    try {
      restoreJob().validate!(p, store.state());
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(KcmError);
    expect(refusal).toMatchObject({
      errorName: 'NOT_FOUND',
      field: 'paras.restore[0].restore_time',
      message: 'paras.restore[0].restore_time: cluster 1 has no logical backup of table shop_$$_public.orders taken before 1700000000',
    });
  });

  it("a partitioned parent's set restores every partition to the shard it came from; done_dts names the parent, then each partition", async () => {
    await recordSet('table', 'shop_$$_public.acct', 1_700_000_000, [['11', ['shop_$$_public.acct_01', 'shop_$$_public.acct_03']], ['12', ['shop_$$_public.acct_02']]]);
    store.s.clusters['1'].shards['12'] = { id: '12', name: 'shard_12', masterNodeId: '6', nodes: { 6: { id: '6', hostaddr: '127.0.2.2', port: 55101, serverId: 6, datadir: '/d', logdir: '/l', walLogDir: '/w' } } };
    const result = await run(restoreJob(), paras('logical_restore', { src_cluster_id: '1', dst_cluster_id: '1', restore: [{ db_table: 'shop_$$_public.acct', restore_time: '1700000001' }] }));
    expect(result).toEqual({ done_dts: 'shop_$$_public.acct,shop_$$_public.acct_01,shop_$$_public.acct_03,shop_$$_public.acct_02,' });
    expect(f.loads.map((l) => [l.host, l.port])).toEqual([
      ['127.0.2.1', 55100],
      ['127.0.2.2', 55101],
    ]);
  });

  it('a compute node whose sync could not attach a restored partition to its parent fails the restore, naming the node, the table and why', async () => {
    await recordSet('table', 'shop_$$_public.acct', 1_700_000_000, [['11', ['shop_$$_public.acct_01']]]);
    f.syncChanges = [
      { database: 'shop', schema: 'public', table: 'other', action: 'skipped', shard_id: '11', reason: 'not ours' },
      { database: 'shop', schema: 'public', table: 'acct_01', action: 'skipped', shard_id: '11', reason: 'not attached to public.acct: kcm: public.acct is not a partitioned table' },
    ];
    const p = paras('logical_restore', { src_cluster_id: '1', dst_cluster_id: '1', restore: [{ db_table: 'shop_$$_public.acct', restore_time: '1700000001' }] });
    await expect(run(restoreJob(), p)).rejects.toMatchObject({
      errorName: 'INSTANCE_FAILED',
      message: 'the tables were restored on the shards, but compute node comp_1 (shop_$$_public.acct_01: not attached to public.acct: kcm: public.acct is not a partitioned table) did not take them',
    });
  });

  it('a backup file that no longer matches its checksum is refused before anything is loaded', async () => {
    const runId = await recordSet('table', 'shop_$$_public.orders', 1_700_000_000, [['11', ['shop_$$_public.orders']]]);
    f.storage.objects.delete(`logical/cluster_1/run_${runId}/shard_11.sql`);
    const p = paras('logical_restore', { src_cluster_id: '1', dst_cluster_id: '1', restore: [{ db_table: 'shop_$$_public.orders', restore_time: '1700000001' }] });
    await expect(run(restoreJob(), p)).rejects.toMatchObject({ errorName: 'DATA_CHECK_FAILED' });
    expect(f.loads).toEqual([]);
  });
});
