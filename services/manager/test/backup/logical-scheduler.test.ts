// The daily logical backup scheduler, on a fake clock and fake agents: it runs inside the
// entry's window, once per window, and a leader change neither loses nor doubles a run
// (DESIGN 9: "exactly once per day across leader changes").

import { beforeEach, describe, expect, it } from 'vitest';
import { dueRun, LogicalBackupScheduler, MAX_ATTEMPTS } from '../../src/leader/logical-backup-scheduler';
import { CommandKind } from '../../src/meta/commands';
import type { LogicalBackupSchedule } from '../../src/meta/logical-backup-records';
import { cluster } from '../helpers/cluster-state';
import { LocalStore, until } from '../helpers/local-store';
import { fakeLogicalAgents, type FakeLogicalAgents } from './logical-fakes';

const at = (day: number, h: number, m = 0, s = 0) => new Date(2026, 10, day, h, m, s).getTime();
const KEY = '1/table/shop_$$_public.orders';

let store: LocalStore;
let f: FakeLogicalAgents;
let clock: number;

function scheduler(member = 'm1') {
  return new LogicalBackupScheduler({ ...f.deps, store, member, now: () => clock, intervalMs: 3_600_000 });
}

async function schedule(window: string, startSecond: number, endSecond: number) {
  const outcome = await store.propose({
    kind: CommandKind.LogicalBackupScheduled,
    at: clock,
    clusterId: '1',
    jobId: '7',
    objectType: 'table',
    entries: [{ dbTable: 'shop_$$_public.orders', window, startSecond, endSecond }],
  });
  expect(outcome.ok).toBe(true);
}

const sched = () => store.state().logicalBackups.schedules[KEY];
const sets = () => Object.values(store.state().logicalBackups.sets);

beforeEach(() => {
  store = new LocalStore();
  store.s.clusters['1'] = cluster('1', 'ready', [['1', '127.0.2.1', 55100]], []);
  f = fakeLogicalAgents();
  f.tablesOf.set('127.0.2.1', ['shop_$$_public.orders', 'shop_$$_public.items']);
  clock = at(24, 0, 30);
});

describe('when a schedule is due', () => {
  const base = { key: KEY, clusterId: '1', objectType: 'table', dbTable: 'x', window: '', scheduledByJob: '1', scheduledAt: 0 } as const;
  const run = (windowDay: string, finished: boolean, attempts = 1) => ({ runId: '1', windowDay, claimedAt: 0, claimedBy: 'm1', attempts, finishedAt: finished ? 1 : null, ok: finished ? true : null, error: null });
  const s = (startSecond: number, endSecond: number, lastRun: LogicalBackupSchedule['lastRun'] = null): LogicalBackupSchedule => ({ ...base, startSecond, endSecond, lastRun });

  it('inside its window, not before it opens nor after it closes', () => {
    expect(dueRun(s(3600, 7200), at(24, 1, 0))).toEqual({ windowDay: '2026-11-24', takeOver: false });
    expect(dueRun(s(3600, 7200), at(24, 0, 59, 59))).toBeUndefined();
    expect(dueRun(s(3600, 7200), at(24, 2, 0))).toBeUndefined();
  });

  it('a window across midnight is named by the day it opened', () => {
    expect(dueRun(s(23 * 3600, 3600), at(24, 0, 30))).toEqual({ windowDay: '2026-11-23', takeOver: false });
    expect(dueRun(s(23 * 3600, 3600), at(24, 23, 30))).toEqual({ windowDay: '2026-11-24', takeOver: false });
    expect(dueRun(s(23 * 3600, 3600), at(24, 12, 0))).toBeUndefined();
  });

  it('never twice in one window; an unfinished run is taken over, even after its window closed, until the next opens', () => {
    expect(dueRun(s(3600, 7200, run('2026-11-24', true)), at(24, 1, 30))).toBeUndefined();
    expect(dueRun(s(3600, 7200, run('2026-11-24', false)), at(24, 5, 0))).toEqual({ windowDay: '2026-11-24', takeOver: true });
    expect(dueRun(s(3600, 7200, run('2026-11-24', false, MAX_ATTEMPTS)), at(24, 1, 30))).toBeUndefined();
    expect(dueRun(s(3600, 7200, run('2026-11-24', true)), at(25, 1, 0))).toEqual({ windowDay: '2026-11-25', takeOver: false });
  });
});

describe('the logical backup scheduler', () => {
  it('runs a schedule whose window opens now, once: one dump, one backup set with the tables it holds', async () => {
    clock = at(24, 1, 0);
    await schedule('01:00:00-02:00:00', 3600, 7200);
    const s = scheduler();
    await s.runDue();
    clock = at(24, 1, 30);
    await s.runDue();
    expect(f.dumps).toEqual([{ host: '127.0.2.1', params: { port: 55100, databases: ['shop_$$_public'], tables: ['orders'] } }]);
    expect(sets()).toEqual([
      expect.objectContaining({ id: '1', clusterId: '1', dbTable: 'shop_$$_public.orders', windowDay: '2026-11-24', takenAt: at(24, 1, 0), parts: [expect.objectContaining({ shardId: '11', storage: 'mem', tables: ['shop_$$_public.orders'] })] }),
    ]);
    expect(sched().lastRun).toMatchObject({ runId: '1', attempts: 1, ok: true });
  });

  it('does nothing before the window, and runs again in the next day\'s window', async () => {
    await schedule('01:00:00-02:00:00', 3600, 7200);
    const s = scheduler();
    await s.runDue(); // 00:30
    expect(f.dumps).toHaveLength(0);
    clock = at(24, 1, 5);
    await s.runDue();
    clock = at(25, 1, 5);
    await s.runDue();
    expect(sets().map((x) => x.windowDay)).toEqual(['2026-11-24', '2026-11-25']);
  });

  it('a leader that loses leadership mid-dump leaves its run claimed; the next leader takes it over under the same run id: one set', async () => {
    clock = at(24, 1, 0);
    await schedule('01:00:00-02:00:00', 3600, 7200);
    let release!: () => void;
    f.hold = new Promise((r) => (release = r));
    const old = scheduler('m1');
    const round = old.runDue();
    await until(() => f.dumps.length === 1); // the dump has started (and waits at f.hold)
    expect(sched().lastRun).toMatchObject({ runId: '1', finishedAt: null, claimedBy: 'm1' });
    await old.stop(); // leadership revoked: the dump is cancelled, nothing is finished
    release();
    await round;
    expect(sets()).toHaveLength(0);
    f.hold = undefined;
    clock = at(24, 1, 20);
    await scheduler('m2').runDue();
    expect(sched().lastRun).toMatchObject({ runId: '1', attempts: 2, claimedBy: 'm2', ok: true });
    expect(sets()).toHaveLength(1);
    expect(f.storage.objects.size).toBe(1); // the same location, overwritten
  });

  it('a crash between the dump and its record: the next leader dumps again to the same place and records the run once', async () => {
    clock = at(24, 1, 0);
    await schedule('01:00:00-02:00:00', 3600, 7200);
    const s = scheduler('m1');
    const realPropose = store.propose.bind(store);
    store.propose = async (cmd) => {
      if (cmd.kind === CommandKind.LogicalBackupRunFinished) throw new Error('not leader'); // died before the record
      return realPropose(cmd);
    };
    await s.runDue();
    store.propose = realPropose;
    expect(f.storage.puts).toBe(1);
    expect(sets()).toHaveLength(0);
    await scheduler('m2').runDue();
    expect(f.storage.puts).toBe(2);
    expect([...f.storage.objects.keys()]).toEqual(['logical/cluster_1/run_1/shard_11.sql']);
    expect(sets()).toHaveLength(1);
    await scheduler('m3').runDue();
    expect(f.dumps).toHaveLength(2);
  });

  it('a second finish of the same run is refused: a stale leader cannot record a second set', async () => {
    clock = at(24, 1, 0);
    await schedule('01:00:00-02:00:00', 3600, 7200);
    await scheduler().runDue();
    const again = await store.propose({ kind: CommandKind.LogicalBackupRunFinished, at: clock, scheduleKey: KEY, runId: '1', ok: true, set: { takenAt: clock, parts: [] } });
    expect(again).toMatchObject({ ok: false, refusal: 'CONFLICT' });
    const reclaim = await store.propose({ kind: CommandKind.LogicalBackupRunClaimed, at: clock, scheduleKey: KEY, windowDay: '2026-11-24', claimedBy: 'm2' });
    expect(reclaim).toMatchObject({ ok: false, refusal: 'CONFLICT' });
    expect(sets()).toHaveLength(1);
  });

  it('a failing dump is retried in later rounds, and recorded as failed after the last attempt', async () => {
    clock = at(24, 1, 0);
    await schedule('01:00:00-02:00:00', 3600, 7200);
    f.failDumps = 100;
    const s = scheduler();
    for (let i = 0; i < MAX_ATTEMPTS + 2; i++) await s.runDue();
    expect(f.dumps).toHaveLength(MAX_ATTEMPTS);
    expect(sched().lastRun).toMatchObject({ attempts: MAX_ATTEMPTS, ok: false, error: expect.stringContaining('mariadb-dump exited 2') });
    expect(sets()).toHaveLength(0);
  });

  it('a partitioned parent is dumped from every shard holding some of its partitions: one part each, naming them', async () => {
    clock = at(24, 1, 0);
    store.s.clusters['1'].shards['12'] = { id: '12', name: 'shard_12', masterNodeId: '2', nodes: { 2: { id: '2', hostaddr: '127.0.2.2', port: 55101, serverId: 2, datadir: '/d', logdir: '/l', walLogDir: '/w' } } };
    f.tablesOf.set('127.0.2.1', ['shop_$$_public.acct_01', 'shop_$$_public.orders']);
    f.tablesOf.set('127.0.2.2', ['shop_$$_public.acct_02']);
    f.partitionOf.set('shop_$$_public.acct_01', 'shop_$$_public.acct');
    f.partitionOf.set('shop_$$_public.acct_02', 'shop_$$_public.acct');
    await store.propose({ kind: CommandKind.LogicalBackupScheduled, at: clock, clusterId: '1', jobId: '7', objectType: 'table', entries: [{ dbTable: 'shop_$$_public.acct', window: '01:00:00-02:00:00', startSecond: 3600, endSecond: 7200 }] });
    await scheduler().runDue();
    expect(sets()).toEqual([
      expect.objectContaining({
        dbTable: 'shop_$$_public.acct',
        parts: [expect.objectContaining({ shardId: '11', tables: ['shop_$$_public.acct_01'] }), expect.objectContaining({ shardId: '12', tables: ['shop_$$_public.acct_02'] })],
      }),
    ]);
  });

  it('an object no shard holds fails the run with NOT_FOUND, and a cluster not ready is skipped', async () => {
    clock = at(24, 1, 0);
    f.tablesOf.set('127.0.2.1', []);
    await schedule('01:00:00-02:00:00', 3600, 7200);
    store.s.clusters['1'].status = 'deleting';
    await scheduler().runDue();
    expect(sched().lastRun).toBeNull();
    store.s.clusters['1'].status = 'ready';
    for (let i = 0; i < MAX_ATTEMPTS; i++) await scheduler().runDue();
    expect(sched().lastRun).toMatchObject({ ok: false, error: expect.stringMatching(/^NOT_FOUND: no shard of cluster 1 holds table shop_\$\$_public.orders/) });
  });
});
