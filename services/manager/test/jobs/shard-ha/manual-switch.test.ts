// manual_switch against fake agents: its refusals (at submission, and by measurement before
// any write is held), the order of the switch, and giving writes back when the standby does
// not catch up. The real-engine run is test/cluster/manual-switch.test.ts.

import { describe, expect, it } from 'vitest';
import type { MariaDbHaStatusReply } from '@kcm/agent-api';
import { manualSwitchJob } from '../../../src/jobs/shard-ha/manual-switch';
import type { StorageNodeRecord } from '../../../src/meta/state';
import { startHarness, type Call } from '../grow-harness';

const ipPort = (n: { hostaddr: string; port: number }) => `${n.hostaddr}_${n.port}`;

/** A switch harness: a ready cluster whose shard 1 replicates healthily, and fake HA agents that record what they are asked. */
async function switchHarness(options: { behind?: number; caughtUp?: boolean; repointFails?: (host: string, port: number) => boolean } = {}) {
  const h = await startHarness({ jobs: { manualSwitch: { maxBehindTrx: 100, catchUpMs: 2000 } } });
  const cluster = await h.readyCluster();
  const shard = cluster.shards['1'];
  const master = shard.nodes[shard.masterNodeId];
  const [assign, other] = Object.values(shard.nodes).filter((n) => n.id !== master.id);
  const masterSeq = 500;
  const status = (n: StorageNodeRecord): Partial<MariaDbHaStatusReply> => {
    const current = ipPort(n) === ipPort(cluster.shards['1'].nodes[cluster.shards['1'].masterNodeId]);
    if (current) return { answering: true, running: true, is_replica: false, read_only: false, gtid_binlog_pos: `0-1-${masterSeq}`, gtid_current_pos: `0-1-${masterSeq}` };
    const seq = n.id === assign.id ? masterSeq - (options.behind ?? 0) : masterSeq;
    return {
      answering: true, running: true, is_replica: true, read_only: true, io_running: true, sql_running: true,
      master_host: master.hostaddr, master_port: master.port, gtid_current_pos: `0-1-${seq}`, last_io_error: '', last_sql_error: '',
    };
  };
  const nodeAt = (host: string, port: number) => Object.values(shard.nodes).find((n) => n.hostaddr === host && n.port === port)!;
  const record = (host: string, method: string, request: any, reply: unknown) => {
    h.calls.push({ host, method, request });
    return Promise.resolve(reply);
  };
  (h.agents as any).mariadbHa = (host: string) => ({
    replicationStatus: (port: number) => record(host, 'ha.status', { port }, status(nodeAt(host, port))),
    fence: (op: string, port: number, stop: boolean) => record(host, 'ha.fence', { op, port, stop }, { was_running: true, made_read_only: true, stopped: false, gtid_binlog_pos: `0-1-${masterSeq}` }),
    waitForGtid: (port: number, gtid: string, timeoutMs: number) =>
      record(host, 'ha.wait', { port, gtid, timeoutMs }, { reached: options.caughtUp ?? true, gtid_slave_pos: gtid, gtid_current_pos: gtid }),
    promote: (r: any) => record(host, 'ha.promote', r, { gtid_current_pos: `0-1-${masterSeq}`, semi_sync_master: true, read_only: false, already_master: false, relay_applied: true }),
    repointStandby: (r: any) =>
      options.repointFails?.(host, r.port)
        ? record(host, 'ha.repoint', r, null).then(() => Promise.reject(new Error('CHANGE MASTER failed')))
        : record(host, 'ha.repoint', r, { gtid_slave_pos: `0-1-${masterSeq}`, io_running: true, sql_running: true }),
  });
  const paras = (change: Record<string, string> = {}) => ({ cluster_id: cluster.id, shard_id: '1', master_hostaddr: ipPort(master), assign_hostaddr: ipPort(assign), ...change });
  return { ...h, cluster, shard, master, assign, other, paras };
}

const steps = (calls: Call[]) => calls.map((c) => `${c.method} ${c.host}:${c.request.port}`);
const where = (n: { hostaddr: string; port: number }) => `${n.hostaddr}:${n.port}`;

describe('manual_switch', () => {
  it('holds writes on the old master, waits for the standby, promotes it, commits, then re-points the standbys and the compute nodes', async () => {
    const h = await switchHarness();
    const status = await h.run('manual_switch', h.paras());
    await h.runner.stop();
    expect(status.status, status.errorInfo).toBe('done');
    const comps = Object.values(h.cluster.comps);
    expect(steps(h.calls)).toEqual([
      `ha.status ${where(h.master)}`, `ha.status ${where(h.assign)}`, // step 1: measured, nothing changed
      `ha.status ${where(h.assign)}`, // step 2: not promoted by an earlier run
      `ha.fence ${where(h.master)}`,
      `ha.wait ${where(h.assign)}`,
      `ha.promote ${where(h.assign)}`,
      expect.stringMatching(/^ha\.repoint /), expect.stringMatching(/^ha\.repoint /),
      ...comps.map(() => expect.stringMatching(/^pg\.sync /)),
    ]);
    expect(h.calls.find((c) => c.method === 'ha.fence')!.request.stop).toBe(false); // read-only, not stopped
    expect(h.calls.find((c) => c.method === 'ha.wait')!.request).toMatchObject({ gtid: '0-1-500', timeoutMs: 2000 });
    const repointed = h.calls.filter((c) => c.method === 'ha.repoint');
    expect(repointed.map((c) => where({ hostaddr: c.host, port: c.request.port })).sort()).toEqual([where(h.master), where(h.other)].sort());
    for (const c of repointed) expect(c.request).toMatchObject({ master_host: h.assign.hostaddr, master_port: h.assign.port });
    // Compute nodes were pointed at the shard's new master, which the metadata names now.
    for (const c of h.calls.filter((c) => c.method === 'pg.sync')) {
      expect(c.request.shards.find((s: { shard_id: string }) => s.shard_id === '1')).toMatchObject({ host: h.assign.hostaddr, port: h.assign.port });
    }
    expect(h.store.s.clusters[h.cluster.id].shards['1'].masterNodeId).toBe(h.assign.id);
    expect(h.store.s.clusters[h.cluster.id].shards['1'].nodes[h.master.id].fenced).toBeUndefined();
    expect(status.attachment).toMatchObject({
      cluster_id: h.cluster.id, shard_id: '1', old_master: ipPort(h.master), new_master: ipPort(h.assign), gtid_pos: '0-1-500', standbys_failed: '',
      comps_repointed: comps.map((c) => c.name).join(','),
    });
    const result = status.attachment as { write_stall_ms: string; list_step: { step: string; ms: string }[]; comps_held: string; comps_not_held: string };
    expect(Number(result.write_stall_ms)).toBeGreaterThanOrEqual(0);
    // These agents answer HoldShard UNIMPLEMENTED, as an older kcm does: the switch went on without the holds and says so.
    expect(result.comps_held).toBe('');
    expect(result.comps_not_held.split('; ').sort()).toEqual(comps.map((c) => `${c.name} (its agent does not know HoldShard (an older kcm))`).sort());
    expect(result.list_step.map((s) => s.step)).toEqual([
      'hold the shard on the compute nodes', 'hold writes on the old master', 'standby caught up', 'promote the standby', 'commit the topology', 're-point the standbys and the compute nodes',
    ]);
  });

  it('an old master that cannot be re-pointed stays read-only and is recorded fenced; the switch is done', async () => {
    let oldMaster = { hostaddr: '', port: 0 };
    const h = await switchHarness({ repointFails: (host, port) => host === oldMaster.hostaddr && port === oldMaster.port });
    oldMaster = h.master;
    const status = await h.run('manual_switch', h.paras());
    await h.runner.stop();
    expect(status.status, status.errorInfo).toBe('done');
    const shard = h.store.s.clusters[h.cluster.id].shards['1'];
    expect(shard.masterNodeId).toBe(h.assign.id);
    expect(shard.nodes[h.master.id].fenced).toMatchObject({ reason: 'manual_switch: could not be re-pointed as a standby' });
    expect(status.attachment).toMatchObject({ standbys_repointed: ipPort(h.other), standbys_failed: expect.stringContaining('CHANGE MASTER failed') });
  });

  it('refuses an unknown node, a node of another shard, and a master_hostaddr that is not the master, before committing anything', async () => {
    const h = await switchHarness();
    const jobs = h.jobCount();
    const shard2Node = Object.values(h.cluster.shards['2'].nodes)[1];
    expect(await h.refusal('manual_switch', h.paras({ assign_hostaddr: '10.0.0.9_5000' }))).toEqual([
      'NOT_FOUND', 'paras.assign_hostaddr: 10.0.0.9_5000 is not a storage node kcm manages',
    ]);
    expect(await h.refusal('manual_switch', h.paras({ assign_hostaddr: ipPort(shard2Node) }))).toEqual([
      'CONFLICT', `paras.assign_hostaddr: ${ipPort(shard2Node)} is a node of shard 2 of cluster ${h.cluster.id}, not of shard 1 of cluster ${h.cluster.id}`,
    ]);
    expect(await h.refusal('manual_switch', h.paras({ master_hostaddr: ipPort(h.other) }))).toEqual([
      'CONFLICT', `paras.master_hostaddr: ${ipPort(h.other)} is not the master of shard 1; its master is ${ipPort(h.master)}`,
    ]);
    expect(await h.refusal('manual_switch', h.paras({ shard_id: '9' }))).toEqual(['NOT_FOUND', `paras.shard_id: shard 9 is not part of cluster ${h.cluster.id}`]);
    await h.runner.stop();
    expect(h.jobCount()).toBe(jobs);
    expect(h.calls).toEqual([]);
  });

  it('refuses a standby further behind than the limit, measured before any write is held', async () => {
    const h = await switchHarness({ behind: 101 });
    const status = await h.run('manual_switch', h.paras());
    await h.runner.stop();
    expect(status.status).toBe('failed');
    expect(status.errorCode).toBe(1006); // CONFLICT
    expect(status.errorInfo).toContain(
      `paras.assign_hostaddr: ${ipPort(h.assign)} cannot take over shard 1: it is 101 transactions behind the master (0-1-399 vs 0-1-500), more than manualSwitchMaxBehindTrx 100; nothing was changed`,
    );
    expect(h.calls.map((c) => c.method)).toEqual(['ha.status', 'ha.status']);
    expect(h.store.s.clusters[h.cluster.id].shards['1'].masterNodeId).toBe(h.master.id);
  });

  it('a standby that does not catch up in time: the old master gets its writes back and nothing moves', async () => {
    const h = await switchHarness({ caughtUp: false });
    const status = await h.run('manual_switch', h.paras());
    await h.runner.stop();
    expect(status.status).toBe('failed');
    expect(status.errorInfo).toMatch(new RegExp(`did not reach 0-1-500 within 2000 ms.*writes were given back to ${h.master.hostaddr.replace(/\./g, '\\.')}:${h.master.port}`));
    expect(steps(h.calls).slice(2)).toEqual([`ha.status ${where(h.assign)}`, `ha.fence ${where(h.master)}`, `ha.wait ${where(h.assign)}`, `ha.promote ${where(h.master)}`]);
    expect(h.store.s.clusters[h.cluster.id].shards['1'].masterNodeId).toBe(h.master.id);
  });
});

