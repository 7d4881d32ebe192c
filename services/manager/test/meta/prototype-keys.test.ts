// Strings from clients and from the Raft log key the replicated state: request ids, job
// ids, host addresses, cluster, shard and compute node ids. A name Object.prototype also
// has must be an ordinary key, never a hit on the prototype, in apply and after a snapshot.

import { describe, expect, it } from 'vitest';
import { CommandKind, decodeCommand, encodeCommand, type Command, type MachineRegistered } from '../../src/meta/commands';
import { applyCommand } from '../../src/meta/fsm';
import { allocatePorts, releasePorts } from '../../src/meta/ports';
import { restoreMeta, snapshotMeta } from '../../src/meta/snapshot/image';
import { emptyMetaState, type ClusterOptions, type MetaState } from '../../src/meta/state';
import { storedAccount } from '../../../../test/helpers/secrets';

const at = 1_700_000_000_000;
export const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype', '__defineGetter__', 'isPrototypeOf'];

/** Applies through the wire encoding, as a follower would. */
function apply(state: MetaState, cmd: Command) {
  return applyCommand(state, decodeCommand(encodeCommand(cmd)) as Command);
}

function machine(hostaddr: string, portLow = 5000, portHigh = 5009): MachineRegistered {
  return {
    kind: CommandKind.MachineRegistered, at, hostaddr, machineType: 'storage', portLow, portHigh, rackId: 'r1',
    datadir: '/d', logdir: '/l', walLogDir: '/w', compDatadir: '/c', totalMemMb: 1024, totalCpuCores: 2, facts: null,
  };
}

function submit(state: MetaState, requestId: string) {
  return apply(state, { kind: CommandKind.JobSubmitted, at, jobType: 'set_machine', sentJobType: 'set_machine', paras: { hostaddr: '10.0.0.1', node_stats: 'dead' }, requestId, lockKey: null });
}

const options: ClusterOptions = {
  haMode: 'rbr', maxStorageSizeGb: 10, maxConnections: 100, cpuCores: 1, cpuLimitNode: 'quota',
  innodbSizeMb: 64, rocksdbBlockCacheSizeMb: 0, dbcfg: 1, fullsyncLevel: 1,
};
const account = storedAccount({ user: 'u', password: 'p' });

/** A state with one machine and cluster 1 (one shard of one node, no compute node). */
function withCluster(): MetaState {
  const s = emptyMetaState();
  apply(s, machine('10.0.0.1'));
  const created = apply(s, {
    kind: CommandKind.ClusterCreated, at, jobId: '1', nickName: 'shop', options,
    accounts: { admin: account, replication: account, storage: account, computer: account },
    placement: { newShards: [{ hosts: ['10.0.0.1'] }], newNodes: [], newComps: [] },
  });
  expect(created.ok).toBe(true);
  return s;
}

/** Object.prototype as it was before the test: nothing may be added to it. */
function expectPrototypeUntouched(): void {
  expect(Object.getOwnPropertyNames(Object.prototype).filter((k) => !['__proto__', 'constructor', 'toString', 'toLocaleString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', '__defineGetter__', '__defineSetter__', '__lookupGetter__', '__lookupSetter__'].includes(k))).toEqual([]);
}

describe('request ids named like Object.prototype members', () => {
  it.each(PROTOTYPE_NAMES)('request id %s creates its own job, and a retry finds that job, also after a snapshot', (name) => {
    const s = emptyMetaState();
    const first = submit(s, name);
    expect(first).toEqual({ ok: true, value: { jobId: '1', duplicate: false } });
    expect(s.jobs['1'].requestId).toBe(name);
    expect(submit(s, name)).toEqual({ ok: true, value: { jobId: '1', duplicate: true } });
    const restored = restoreMeta(snapshotMeta(s));
    expect(submit(restored, name)).toEqual({ ok: true, value: { jobId: '1', duplicate: true } });
    expect(submit(restored, `${name}-other`)).toEqual({ ok: true, value: { jobId: '2', duplicate: false } });
    expect(Object.keys(restored.requestIds).sort()).toEqual([name, `${name}-other`].sort());
  });

  it('an image written before dicts had no prototype restores a "__proto__" request id as an ordinary key', () => {
    // What JSON.stringify of the old plain-object state wrote for a stored "__proto__" key.
    const image = `{"format":1,"state":{"machines":{},"jobs":{},"requestIds":{"__proto__":"3","toString":"4"},"ports":{},"counters":{"job":4}}}`;
    const restored = restoreMeta(new TextEncoder().encode(image));
    expect(Object.getPrototypeOf(restored.requestIds)).toBeNull();
    expect(restored.requestIds['__proto__']).toBe('3');
    expect(restored.requestIds['toString']).toBe('4');
    expect(restored.requestIds['constructor']).toBeUndefined();
  });
});

describe('directories named like Object.prototype members', () => {
  it('free disk space reported for a directory "__proto__" is an ordinary key after a log entry and a snapshot', () => {
    const s = emptyMetaState();
    apply(s, { ...machine('10.0.0.1'), facts: { cores: 2, memoryMb: 1024, freeDiskBytes: JSON.parse('{"__proto__": 7, "/d": 9}'), mariadbInstalled: true, postgresInstalled: true } });
    for (const state of [s, restoreMeta(snapshotMeta(s))]) {
      const free = state.machines['10.0.0.1/storage'].facts!.freeDiskBytes;
      expect(Object.getPrototypeOf(free)).toBeNull();
      expect([free['__proto__'], free['/d'], free['toString']]).toEqual([7, 9, undefined]);
    }
  });
});

describe('job ids named like Object.prototype members', () => {
  it.each(PROTOTYPE_NAMES)('job %s does not exist for JobStarted, JobStepDone, JobProgress and JobFinished', (jobId) => {
    const s = emptyMetaState();
    const notFound = { ok: false, refusal: 'NOT_FOUND' };
    expect(apply(s, { kind: CommandKind.JobStarted, at, jobId, stepNames: ['a'] })).toMatchObject(notFound);
    expect(apply(s, { kind: CommandKind.JobStepDone, at, jobId, step: 0, output: null })).toMatchObject(notFound);
    expect(apply(s, { kind: CommandKind.JobProgress, at, jobId, step: 0, unitsDone: 1, unitsTotal: 2 })).toMatchObject(notFound);
    expect(apply(s, { kind: CommandKind.JobFinished, at, jobId, outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: null } })).toMatchObject(notFound);
    expect(s).toEqual(emptyMetaState());
  });
});

describe('host addresses named like Object.prototype members', () => {
  it.each(PROTOTYPE_NAMES)('ports of host %s are allocated and released in its own table, never on Object.prototype', (hostaddr) => {
    const s = emptyMetaState();
    expect(apply(s, machine(hostaddr, 7000, 7001)).ok).toBe(true);
    expect(allocatePorts(s, { hostaddr, machineType: 'storage', count: 2, owner: 'job:1' })).toEqual({ ok: true, value: [7000, 7001] });
    expectPrototypeUntouched();
    expect(Object.keys(restoreMeta(snapshotMeta(s)).ports[hostaddr])).toEqual(['7000', '7001']);
    expect(releasePorts(s, hostaddr, [7000, 7001])).toEqual({ released: 2 });
    expect(Object.keys(s.ports)).toEqual([]);
  });

  it('ports released on a host with no allocation named like a prototype member release nothing', () => {
    const s = emptyMetaState();
    expect(releasePorts(s, 'constructor', [1])).toEqual({ released: 0 });
  });
});

describe('cluster, shard and compute node ids named like Object.prototype members', () => {
  it.each(PROTOTYPE_NAMES)('cluster %s does not exist: status, placement and removal refuse, deletion is a no-op', (clusterId) => {
    const s = withCluster();
    const before = JSON.stringify(s);
    expect(apply(s, { kind: CommandKind.ClusterStatusSet, at, clusterId, status: 'ready' })).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
    const placement = { newShards: [], newNodes: [], newComps: [] };
    expect(apply(s, { kind: CommandKind.InstancesPlaced, at, clusterId, jobId: '9', placement })).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
    expect(apply(s, { kind: CommandKind.InstancesRemoved, at, clusterId, nodeIds: [], compIds: [], shardIds: [] })).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
    expect(apply(s, { kind: CommandKind.ClusterDeleted, at, clusterId })).toEqual({ ok: true, value: { releasedPorts: 0, duplicate: true } });
    expect(JSON.stringify(s)).toBe(before);
  });

  it.each(PROTOTYPE_NAMES)('shard and compute node %s are not part of the cluster', (id) => {
    const s = withCluster();
    const before = JSON.stringify(s);
    const placement = { newShards: [], newNodes: [{ shardId: id, hostaddr: '10.0.0.1' }], newComps: [] };
    expect(apply(s, { kind: CommandKind.InstancesPlaced, at, clusterId: '1', jobId: '9', placement })).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
    expect(apply(s, { kind: CommandKind.InstancesRemoved, at, clusterId: '1', nodeIds: [id], compIds: [id], shardIds: [id] })).toEqual({ ok: true, value: { releasedPorts: 0 } });
    expect(JSON.stringify(s)).toBe(before);
  });

  it('every dict of a restored image has no prototype', () => {
    const s = withCluster();
    submit(s, 'r');
    const restored = restoreMeta(snapshotMeta(s));
    const cluster = restored.clusters['1'];
    const dicts = [restored.machines, restored.jobs, restored.jobs['1'].stepOutputs, restored.runQueues, restored.requestIds, restored.ports, restored.ports['10.0.0.1'], restored.clusters, cluster.shards, cluster.shards['1'].nodes, cluster.comps, restored.pendingRollbacks];
    for (const d of dicts) expect(Object.getPrototypeOf(d)).toBeNull();
  });
});
