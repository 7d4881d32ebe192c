// kcm_shard_master_up: the leader's failure detector measures each shard master every round,
// and /metrics shows that measurement (not a stored status word): 1 while the master
// answers, 0 from the first round that finds it dead.

import { silentLogger } from '@kcm/common';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createManagerMetrics } from '../src/metrics';
import { ShardFailureDetector } from '../src/leader/shard-failure-detector';
import { cluster } from './helpers/cluster-state';
import { LocalStore } from './helpers/local-store';
import { testSecretBox } from '../../../test/helpers/secrets';

function watchedShard() {
  const store = new LocalStore();
  store.s.clusters['7'] = cluster('7', 'ready', [['1', '127.0.0.1', 1], ['2', '127.0.0.2', 1], ['3', '127.0.0.3', 1]], []);
  const master = { running: true };
  const agents = {
    mariadbHa: () => ({
      replicationStatus: async () => ({ installed: true, running: master.running, answering: master.running, reason: master.running ? '' : 'no process', supervisor_restarts: 0 }),
    }),
  };
  const detector = new ShardFailureDetector({ store, agents: agents as never, secrets: testSecretBox(), logger: silentLogger(), probeTimeoutMs: 50 });
  const registry = new Registry();
  createManagerMetrics(registry, { raft: () => undefined, state: () => store.s, health: () => undefined, shardMasters: () => detector.masterHealth() });
  const gauge = async () => (await registry.getSingleMetricAsString('kcm_shard_master_up')).split('\n').filter((l) => !l.startsWith('#'));
  return { detector, master, gauge };
}

describe('kcm_shard_master_up', () => {
  it('is 1 for an answering master and 0 from the round that finds it dead', async () => {
    const s = watchedShard();
    expect(await s.gauge()).toEqual([]); // nothing measured yet: no sample, not a guess
    await s.detector.checkAll();
    expect(await s.gauge()).toEqual(['kcm_shard_master_up{cluster_id="7",shard_id="71"} 1']);
    s.master.running = false;
    await s.detector.checkAll();
    expect(await s.gauge()).toEqual(['kcm_shard_master_up{cluster_id="7",shard_id="71"} 0']);
  });

  it('is empty once the member stops leading (a follower measures nothing)', async () => {
    const s = watchedShard();
    await s.detector.checkAll();
    await s.detector.stop();
    expect(await s.gauge()).toEqual([]);
  });
});
