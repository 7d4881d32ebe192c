import { describe, expect, it } from 'vitest';
import { CommandKind, decodeCommand, encodeCommand, type ClusterCreated, type Command, type InstancePlacement } from '../../src/meta/commands';
import { applyCommand } from '../../src/meta/fsm';
import { allocatePorts } from '../../src/meta/ports';
import { restoreMeta, snapshotMeta } from '../../src/meta/snapshot/image';
import { emptyMetaState, type ClusterOptions, type MachineType, type MetaState } from '../../src/meta/state';
import { storedAccount } from '../../../../test/helpers/secrets';

const AT = 1_700_000_000_123;

const options: ClusterOptions = {
  haMode: 'rbr', maxStorageSizeGb: 10, maxConnections: 100, cpuCores: 1, cpuLimitNode: 'quota',
  innodbSizeMb: 64, rocksdbBlockCacheSizeMb: 0, dbcfg: 1, fullsyncLevel: 1,
};
const accounts = {
  admin: storedAccount({ user: 'kcm_admin_1', password: 'admin-secret' }),
  replication: storedAccount({ user: 'kcm_repl_1', password: 'repl-secret' }),
  storage: storedAccount({ user: 'storage_1', password: 'storage-secret' }),
  computer: storedAccount({ user: 'computer_1', password: 'computer-secret' }),
};

/** Applies through the wire encoding, as every member does. */
function apply(s: MetaState, cmd: Command) {
  return applyCommand(s, decodeCommand(encodeCommand(cmd)) as Command);
}

function register(s: MetaState, hostaddr: string, machineType: MachineType, portLow: number, portHigh: number): void {
  const outcome = apply(s, {
    kind: CommandKind.MachineRegistered, at: AT, hostaddr, machineType, portLow, portHigh, rackId: 'r1',
    datadir: `/d/${hostaddr}`, logdir: `/l/${hostaddr}`, walLogDir: `/w/${hostaddr}`, compDatadir: `/c/${hostaddr}`,
    totalMemMb: 1024, totalCpuCores: 2, facts: null,
  });
  expect(outcome.ok).toBe(true);
}

function threeHosts(): MetaState {
  const s = emptyMetaState();
  for (const h of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) {
    register(s, h, 'storage', 5000, 5009);
    register(s, h, 'computer', 6000, 6004);
  }
  return s;
}

const placement = (p: Partial<InstancePlacement>): InstancePlacement => ({ newShards: [], newNodes: [], newComps: [], ...p });
const created = (jobId: string, p: InstancePlacement): ClusterCreated => ({ kind: CommandKind.ClusterCreated, at: AT, jobId, nickName: 'shop', options, accounts, placement: p });

describe('cluster domain of the metadata state machine', () => {
  it('ClusterCreated assigns ids, names, ports and server ids from the replicated state; the first node of a shard is its master', () => {
    const s = threeHosts();
    const outcome = apply(s, created('7', placement({ newShards: [{ hosts: ['10.0.0.1', '10.0.0.2', '10.0.0.3'] }, { hosts: ['10.0.0.2', '10.0.0.3', '10.0.0.1'] }], newComps: ['10.0.0.1', '10.0.0.2'] })));
    expect(outcome).toEqual({ ok: true, value: { clusterId: '1', shardIds: ['1', '2'], nodeIds: ['1', '2', '3', '4', '5', '6'], compIds: ['1', '2'], duplicate: false } });
    const c = s.clusters['1'];
    expect(c).toMatchObject({ id: '1', name: 'cluster_1700000000_000001', nickName: 'shop', status: 'creating', createdByJob: '7' });
    expect(c.shards['1']).toMatchObject({ name: 'shard_1', masterNodeId: '1' });
    expect(c.shards['2']).toMatchObject({ name: 'shard_2', masterNodeId: '4' });
    expect(c.shards['1'].nodes['1']).toEqual({ id: '1', hostaddr: '10.0.0.1', port: 5000, serverId: 1, datadir: '/d/10.0.0.1', logdir: '/l/10.0.0.1', walLogDir: '/w/10.0.0.1' });
    // 10.0.0.1 hosts node 1 (shard 1) and node 6 (shard 2): consecutive ports of its storage range.
    expect(c.shards['2'].nodes['6']).toMatchObject({ hostaddr: '10.0.0.1', port: 5001 });
    expect(c.comps['1']).toEqual({ id: '1', name: 'comp_1', hostaddr: '10.0.0.1', port: 6000, compDatadir: '/c/10.0.0.1' });
    expect(s.ports['10.0.0.1']).toEqual({
      5000: { owner: 'cluster:1/node:1', machineType: 'storage' },
      5001: { owner: 'cluster:1/node:6', machineType: 'storage' },
      6000: { owner: 'cluster:1/comp:1', machineType: 'computer' },
    });
  });

  it('the same job creating twice gets its first cluster back, not a second one', () => {
    const s = threeHosts();
    const p = placement({ newShards: [{ hosts: ['10.0.0.1', '10.0.0.2', '10.0.0.3'] }], newComps: ['10.0.0.1'] });
    apply(s, created('7', p));
    const again = apply(s, created('7', p));
    expect(again).toMatchObject({ ok: true, value: { clusterId: '1', duplicate: true } });
    expect(Object.keys(s.clusters)).toEqual(['1']);
    expect(Object.keys(s.ports['10.0.0.1'])).toHaveLength(2);
  });

  it('a placement that does not fit anywhere is refused whole: no cluster, no port, no id taken', () => {
    const s = threeHosts();
    const before = JSON.stringify(s);
    const tooMany = apply(s, created('8', placement({ newShards: [{ hosts: Array(11).fill('10.0.0.1') }] })));
    expect(tooMany).toEqual({ ok: false, refusal: 'NO_RESOURCES', message: 'machine 10.0.0.1 (storage) has 10 free ports in 5000-5009, 11 needed' });
    const unknownHost = apply(s, created('8', placement({ newShards: [{ hosts: ['10.0.0.1'] }], newComps: ['10.0.0.9'] })));
    expect(unknownHost).toMatchObject({ ok: false, refusal: 'NOT_FOUND', message: 'machine 10.0.0.9 is not registered as computer' });
    apply(s, { kind: CommandKind.MachineStatusSet, at: AT, hostaddr: '10.0.0.3', nodeStats: 'dead', reason: 'operator' });
    const afterDead = JSON.stringify(s);
    const dead = apply(s, created('8', placement({ newShards: [{ hosts: ['10.0.0.3'] }] })));
    expect(dead).toMatchObject({ ok: false, refusal: 'NO_RESOURCES', message: 'machine 10.0.0.3 (storage) is dead, not running' });
    expect(JSON.stringify(s)).toBe(afterDead);
    expect(JSON.parse(before).clusterCounters).toEqual(s.clusterCounters);
  });

  it('ports taken by another owner are skipped, so two clusters never share a port', () => {
    const s = threeHosts();
    allocatePorts(s, { hostaddr: '10.0.0.1', machineType: 'storage', count: 2, owner: 'other' });
    apply(s, created('9', placement({ newShards: [{ hosts: ['10.0.0.1'] }] })));
    apply(s, created('10', placement({ newShards: [{ hosts: ['10.0.0.1'] }] })));
    expect(s.clusters['1'].shards['1'].nodes['1'].port).toBe(5002);
    expect(s.clusters['2'].shards['2'].nodes['2'].port).toBe(5003);
    expect(s.clusters['2'].name).toBe('cluster_1700000000_000002');
  });

  it('InstancesPlaced adds shards, nodes and compute nodes to an existing cluster with fresh ids', () => {
    const s = threeHosts();
    apply(s, created('7', placement({ newShards: [{ hosts: ['10.0.0.1', '10.0.0.2', '10.0.0.3'] }], newComps: ['10.0.0.1'] })));
    const added = apply(s, { kind: CommandKind.InstancesPlaced, at: AT, clusterId: '1', jobId: '11', placement: placement({ newShards: [{ hosts: ['10.0.0.3', '10.0.0.2', '10.0.0.1'] }], newNodes: [{ shardId: '1', hostaddr: '10.0.0.2' }], newComps: ['10.0.0.3'] }) });
    expect(added).toEqual({ ok: true, value: { clusterId: '1', shardIds: ['2'], nodeIds: ['4', '5', '6', '7'], compIds: ['2'] } });
    expect(s.clusters['1'].shards['2'].masterNodeId).toBe('4');
    expect(s.clusters['1'].shards['1'].nodes['7']).toMatchObject({ hostaddr: '10.0.0.2', port: 5002, serverId: 7 });
    const badShard = apply(s, { kind: CommandKind.InstancesPlaced, at: AT, clusterId: '1', jobId: '12', placement: placement({ newNodes: [{ shardId: '99', hostaddr: '10.0.0.2' }] }) });
    expect(badShard).toMatchObject({ ok: false, message: 'shard 99 is not part of the cluster' });
  });

  it('InstancesRemoved forgets nodes, shards and compute nodes and returns their ports; repeating it is harmless', () => {
    const s = threeHosts();
    apply(s, created('7', placement({ newShards: [{ hosts: ['10.0.0.1', '10.0.0.2'] }, { hosts: ['10.0.0.3'] }], newComps: ['10.0.0.1'] })));
    const cmd: Command = { kind: CommandKind.InstancesRemoved, at: AT, clusterId: '1', nodeIds: ['2'], compIds: ['1'], shardIds: ['2'] };
    expect(apply(s, cmd)).toEqual({ ok: true, value: { releasedPorts: 3 } });
    expect(apply(s, cmd)).toEqual({ ok: true, value: { releasedPorts: 0 } });
    expect(Object.keys(s.clusters['1'].shards)).toEqual(['1']);
    expect(Object.keys(s.clusters['1'].shards['1'].nodes)).toEqual(['1']);
    expect(s.clusters['1'].comps).toEqual({});
    expect(s.ports).toEqual({ '10.0.0.1': { 5000: { owner: 'cluster:1/node:1', machineType: 'storage' } } });
  });

  it('ClusterDeleted returns every port of the cluster and forgets it; ids are never reused', () => {
    const s = threeHosts();
    apply(s, created('7', placement({ newShards: [{ hosts: ['10.0.0.1', '10.0.0.2', '10.0.0.3'] }], newComps: ['10.0.0.1', '10.0.0.2'] })));
    expect(apply(s, { kind: CommandKind.ClusterStatusSet, at: AT, clusterId: '1', status: 'deleting' })).toEqual({ ok: true, value: null });
    expect(apply(s, { kind: CommandKind.ClusterDeleted, at: AT, clusterId: '1' })).toEqual({ ok: true, value: { releasedPorts: 5, duplicate: false } });
    expect(s.clusters).toEqual({});
    expect(s.ports).toEqual({});
    expect(apply(s, { kind: CommandKind.ClusterDeleted, at: AT, clusterId: '1' })).toEqual({ ok: true, value: { releasedPorts: 0, duplicate: true } });
    apply(s, created('8', placement({ newShards: [{ hosts: ['10.0.0.1'] }] })));
    expect(Object.keys(s.clusters)).toEqual(['2']);
    expect(s.clusters['2'].shards['2'].nodes['4'].port).toBe(5000);
  });

  it('a machine with cluster instances cannot be removed until they are gone', () => {
    const s = threeHosts();
    apply(s, created('7', placement({ newShards: [{ hosts: ['10.0.0.1'] }] })));
    expect(apply(s, { kind: CommandKind.MachineRemoved, at: AT, hostaddr: '10.0.0.1', machineType: 'storage' })).toMatchObject({ ok: false, refusal: 'CONFLICT' });
    apply(s, { kind: CommandKind.ClusterDeleted, at: AT, clusterId: '1' });
    expect(apply(s, { kind: CommandKind.MachineRemoved, at: AT, hostaddr: '10.0.0.1', machineType: 'storage' })).toMatchObject({ ok: true });
  });

  it('clusters survive a snapshot round trip, and a snapshot from before clusters existed still loads', () => {
    const s = threeHosts();
    apply(s, created('7', placement({ newShards: [{ hosts: ['10.0.0.1'] }] })));
    expect(restoreMeta(snapshotMeta(s))).toEqual(s);
    const old = { format: 1, state: { machines: {}, jobs: {}, requestIds: {}, ports: {}, counters: { job: 4 } } };
    const restored = restoreMeta(new TextEncoder().encode(JSON.stringify(old)));
    expect(restored.clusters).toEqual({});
    expect(restored.clusterCounters).toEqual({ cluster: 0, shard: 0, node: 0, comp: 0 });
    expect(apply(restored, created('5', placement({}))).ok).toBe(true);
  });
});
