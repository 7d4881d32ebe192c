// Shard HA must-show 2, on real engines: the master's host is cut off by iptables (DROP of
// everything sent to its address: from the manager, the standbys, the compute node). The
// master is unreachable from the manager and every standby lost it: shard_failover runs,
// fencing the old master in the metadata (its agent cannot be reached), and writes through
// the compute node resume on the new master. When the rule is removed, the old master,
// which never stopped and was still writable, is made read-only before anything else,
// checked for errant GTIDs and rejoins as a standby (shard_rejoin).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gtidsBeyond } from '@kcm/agent-api';
import { emit } from '../manager/helpers/emit-client';
import { HOSTS, startClusterFixture, waitUntil, type ClusterFixture } from './cluster-fixture';
import { createHaCluster, haJobs, idsOn, InsertLoad, registerMachines, type HaCluster } from './ha-fixture';
import { NetFaults } from './net-faults';

describe('shard failover when the master host is cut off by iptables (real engines)', () => {
  let f: ClusterFixture;
  let ha: HaCluster;
  const net = new NetFaults();

  beforeAll(async () => {
    f = await startClusterFixture();
    await registerMachines(f, [2]);
    ha = await createHaCluster(f, HOSTS[2]);
  }, 300_000);

  afterAll(async () => {
    await net.removeAll();
    ha?.close();
    await f?.close();
  }, 120_000);

  it('fails over, fences the old master by metadata, and takes it back as a standby once reachable', async () => {
    const oldMaster = ha.master();
    expect(oldMaster.hostaddr).not.toBe(ha.comp().host);
    const load = new InsertLoad(ha);
    load.start();
    let cutAt = 0;
    try {
      await waitUntil('inserts flowing', async () => (load.acked.length >= 20 ? true : undefined), 20_000, 50);
      await net.dropTo(oldMaster.hostaddr);
      cutAt = Date.now();
      const ackedBeforeCut = load.acked.filter((a) => a.at < cutAt).map((a) => a.id);
      const job = await waitUntil('shard_failover finished', async () => haJobs(f, 'shard_failover').find((j) => j.status === 'done' || j.status === 'failed'), 60_000);
      expect(job.status, job.result?.errorInfo).toBe('done');
      const resumedAt = await waitUntil('a write through the compute node after the cut', async () => load.firstAckAfter(cutAt + 1), 30_000, 50);
      console.log(`host cut off -> first write through the compute node: ${resumedAt - cutAt} ms; failover: ${JSON.stringify(job.result?.attachment)}`);
      const result = job.result!.attachment as Record<string, any>;
      expect(result.reason).toMatch(/unreachable from the manager .* every standby lost it/);
      expect(result.old_master).toMatchObject({ node_id: oldMaster.id, fenced: 'recorded in metadata (agent unreachable)', rejoin: expect.stringMatching(/^pending: agent unreachable/) });
      expect(ha.master().id).not.toBe(oldMaster.id);
      // While it is away it stays fenced in the metadata.
      expect(ha.nodes().find((n) => n.id === oldMaster.id)!.fenced).toMatchObject({ byJob: job.id });
      // get_cluster_detail shows the new master (measured) and the old one fenced.
      const detail = await emit(f.member, 'get_cluster_detail', { cluster_id: ha.clusterId });
      const listed = (detail.attachment as { list_shard: { list_node: { node_id: string; master: string; fenced: string }[] }[] }).list_shard[0].list_node;
      expect(listed.find((n) => n.node_id === ha.master().id)).toMatchObject({ master: 'true', fenced: '' });
      expect(listed.find((n) => n.node_id === oldMaster.id)!.fenced).toMatch(/^replaced by node \d+ \(unreachable from the manager/);
      const onNewMaster = await idsOn(ha, ha.master());
      expect(ackedBeforeCut.filter((id) => !onNewMaster.has(id))).toEqual([]);
    } finally {
      await net.removeAll();
      await load.stop();
    }

    // Reachable again: shard_rejoin makes it read-only, checks it and re-attaches it.
    const rejoin = await waitUntil('shard_rejoin finished', async () => haJobs(f, 'shard_rejoin').find((j) => j.status === 'done' || j.status === 'failed'), 90_000);
    expect(rejoin.status, rejoin.result?.errorInfo).toBe('done');
    console.log(`rejoin: ${JSON.stringify(rejoin.result?.attachment)}`);
    expect(ha.nodes().filter((n) => n.fenced)).toEqual([]);
    const newMaster = ha.master();
    const statuses = await Promise.all(ha.nodes().map((n) => ha.status(n)));
    expect(statuses.filter((s) => !s.read_only).map((s) => s.port)).toEqual([newMaster.port]);
    const old = statuses[ha.nodes().findIndex((n) => n.id === oldMaster.id)];
    expect(old).toMatchObject({ is_replica: true, io_running: true, sql_running: true, master_host: newMaster.hostaddr, master_port: newMaster.port, read_only: true });
    const masterPos = statuses[ha.nodes().findIndex((n) => n.id === newMaster.id)].gtid_binlog_pos;
    for (const s of statuses) expect(gtidsBeyond(s.gtid_binlog_pos, masterPos)).toEqual([]);
    // And it replicates what is written now.
    const load2 = new InsertLoad(ha, 1_000_000);
    load2.start();
    await waitUntil('more inserts', async () => (load2.acked.length >= 5 ? true : undefined), 20_000, 50);
    await load2.stop();
    const last = load2.acked[load2.acked.length - 1].id;
    await waitUntil('the old master has the newest row', async () => ((await idsOn(ha, oldMaster)).has(last) ? true : undefined), 20_000);
  }, 240_000);
});
