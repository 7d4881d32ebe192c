// The failure detector and set_noswitch windows (meta/noswitch.ts), against a fake agent:
// no failover is submitted while a shard's window is open, and a master restarted for
// maintenance inside the window is not failed over when the window ends.

import { silentLogger } from '@kcm/common';
import { describe, expect, it } from 'vitest';
import { CommandKind } from '../src/meta/commands';
import { noSwitchUntil } from '../src/meta/noswitch';
import { ShardFailureDetector } from '../src/leader/shard-failure-detector';
import { cluster } from './helpers/cluster-state';
import { LocalStore } from './helpers/local-store';
import { testSecretBox } from '../../../test/helpers/secrets';

/** A ready cluster whose shard's master (127.0.0.1:1: nothing answers SQL there) is watched through a fake agent. */
async function detectorWith(master: { running: boolean; restarts: number }) {
  const store = new LocalStore();
  store.s.clusters['7'] = cluster('7', 'ready', [['1', '127.0.0.1', 1], ['2', '127.0.0.2', 1], ['3', '127.0.0.3', 1]], []);
  let nowMs = 1_000_000;
  const agents = {
    mariadbHa: () => ({
      replicationStatus: async () => ({ installed: true, running: master.running, answering: master.running, reason: master.running ? '' : 'no process', supervisor_restarts: master.restarts }),
    }),
  };
  const detector = new ShardFailureDetector({
    store, agents: agents as never, secrets: testSecretBox(), logger: silentLogger(), probeTimeoutMs: 50, now: () => nowMs,
    switchSuppressed: (state, clusterId, shardId) => noSwitchUntil(state, clusterId, shardId, nowMs) !== null,
  });
  const openWindow = (ms: number) => store.propose({ kind: CommandKind.NoSwitchSet, at: nowMs, clusterId: '7', shardIds: ['71'], untilMs: nowMs + ms });
  const advance = (ms: number) => void (nowMs += ms);
  const submitted = () => Object.values(store.s.jobs).filter((j) => j.jobType === 'shard_failover').length;
  return { detector, openWindow, advance, submitted };
}

describe('failure detector and no-switch windows', () => {
  it('submits no failover for a dead master while the shard\'s window is open, and does once it has passed', async () => {
    const master = { running: true, restarts: 0 };
    const d = await detectorWith(master);
    await d.detector.checkAll();
    await d.openWindow(60_000);
    master.running = false;
    await d.detector.checkAll();
    expect(d.submitted()).toBe(0);
    d.advance(60_000);
    await d.detector.checkAll();
    expect(d.submitted()).toBe(1);
  });

  it('a master restarted for maintenance inside the window is not failed over when the window ends', async () => {
    const master = { running: true, restarts: 0 };
    const d = await detectorWith(master);
    await d.detector.checkAll(); // baseline: 0 restarts
    await d.openWindow(60_000);
    master.restarts = 1; // restarted inside the window, healthy again
    await d.detector.checkAll();
    d.advance(60_000);
    await d.detector.checkAll();
    await d.detector.checkAll();
    expect(d.submitted()).toBe(0);
  });
});
