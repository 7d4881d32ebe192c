// Shard HA must-show 3, on real engines: the manager (this test process) is cut off from a
// healthy master's host by an iptables rule that matches only this process's packets (a
// cgroup v2 match; the agents run as their own processes, so they and the engines still
// reach it). The manager sees the master unreachable, but its standbys still reach it:
// no failover happens, and writes through the compute node go on all along.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { createHaCluster, haJobs, InsertLoad, registerMachines, type HaCluster } from './ha-fixture';
import { NetFaults } from './net-faults';

describe('a manager cut off from a healthy master does not fail it over (real engines)', () => {
  let f: ClusterFixture;
  let ha: HaCluster;
  const net = new NetFaults();

  beforeAll(async () => {
    // The manager is built in this process: its sockets must be born in the group the rule matches.
    await net.joinOwnGroup();
    f = await startClusterFixture({ processAgentHosts: HOSTS, recordAgentCalls: true });
    for (const agent of f.processAgents.values()) await net.releaseToRoot(agent.pid!);
    await registerMachines(f, [2]);
    ha = await createHaCluster(f, HOSTS[2]);
  }, 300_000);

  afterAll(async () => {
    await net.removeAll();
    ha?.close();
    await f?.close();
  }, 120_000);

  it('the master stays master while the manager cannot reach its host, and writes go on', async () => {
    const master = ha.master();
    expect(master.hostaddr).not.toBe(ha.comp().host); // the compute node's own link is not what is tested
    const load = new InsertLoad(ha);
    load.start();
    try {
      await waitUntil('inserts flowing', async () => (load.acked.length >= 10 ? true : undefined), 20_000, 50);
      const logFrom = f.logLines.length;
      await net.dropFromThisProcessTo(master.hostaddr);
      const cutAt = Date.now();
      let healedAt = cutAt;
      try {
        // The detector sees it unreachable and asks the standbys, who still reach it.
        await waitUntil('the detector to judge the master', async () => (f.logLines.slice(logFrom).some((l) => l.includes('shard master suspect')) ? true : undefined), 15_000);
        // 12 detection rounds (6x the grace period): each asks every standby whether it still reaches the master.
        const standbys = ha.nodes().filter((n) => n.id !== master.id);
        const askedSinceCut = (host: string) => f.agentCalls.filter((c) => c.host === host && c.api === 'mariadbHa' && c.method === 'replicationStatus' && c.at >= cutAt).length;
        await waitUntil('12 detection rounds asking the standbys', async () => (standbys.every((n) => askedSinceCut(n.hostaddr) >= 12) ? true : undefined), 30_000);
      } finally {
        await net.removeAll();
        healedAt = Date.now();
      }
      const suspect = f.logLines.slice(logFrom).filter((l) => l.includes('shard master suspect')).map((l) => JSON.parse(l) as { evidence: string; failed: boolean });
      expect(suspect.length).toBeGreaterThan(0);
      for (const s of suspect) expect(s).toMatchObject({ failed: false, evidence: expect.stringMatching(/unreachable from the manager, but standbys still reach it/) });
      expect(haJobs(f, 'shard_failover')).toEqual([]);
      expect(ha.master().id).toBe(master.id);
      // The master served the whole time: inserts through the compute node were acknowledged during the cut.
      expect(load.acked.filter((a) => a.at > cutAt + 1000 && a.at < healedAt).length).toBeGreaterThan(10);
    } finally {
      await load.stop();
    }
    // Reachable again: nothing changed, and it is still the one writable master. The test's
    // own gRPC channel to the master's agent may still be in its reconnect backoff from the
    // cut: ask until every node answers.
    const statuses = await waitUntil('every node answers its status after the heal', async () => Promise.all(ha.nodes().map((n) => ha.status(n))).catch(() => undefined), 30_000);
    expect(statuses.filter((s) => !s.read_only).map((s) => s.port)).toEqual([master.port]);
  }, 120_000);
});
