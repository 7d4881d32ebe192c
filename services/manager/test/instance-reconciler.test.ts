// The leader's reconciler against fake agents: it starts what the metadata places in a
// live cluster and is not running, and leaves alone what it must not touch.

import { silentLogger } from '@kcm/common';
import { AgentUnreachableError } from '@kcm/agent-api';
import { describe, expect, it } from 'vitest';
import { InstanceReconciler, type ReconcileAgents } from '../src/leader/instance-reconciler';
import { cluster, stateWith } from './helpers/cluster-state';

/** Agents whose instances are up or down as listed; records every start asked. */
function fakeAgents(down: Set<string>, opts: { unreachable?: Set<string>; missing?: Set<string> } = {}) {
  const starts: string[] = [];
  const reach = (host: string) => {
    if (opts.unreachable?.has(host)) throw new AgentUnreachableError(`${host}:58100`, new Error('connection refused'));
  };
  const agents: ReconcileAgents = {
    mariadb: (host) => ({
      async probe(port) {
        reach(host);
        if (opts.missing?.has(`${host}:${port}`)) return { state: 'unknown', pid: 0, reason: 'no instance on this port is installed by this agent' };
        return down.has(`${host}:${port}`) ? { state: 'offline', pid: 0, reason: 'no mariadbd process' } : { state: 'online', pid: 42, reason: '' };
      },
      async start(opId, port) {
        starts.push(`mariadb ${host}:${port} ${opId}`);
        down.delete(`${host}:${port}`);
        return { pid: 43 };
      },
    }),
    postgresProbe: (host) => ({
      async probe(port) {
        reach(host);
        return { installed: true, running: !down.has(`${host}:${port}`), problem: down.has(`${host}:${port}`) ? 'not running' : '' };
      },
    }),
    postgres: (host) => ({
      async start(opId, port) {
        starts.push(`postgres ${host}:${port} ${opId}`);
        down.delete(`${host}:${port}`);
        return { pid: 44 };
      },
    }),
  };
  return { agents, starts };
}

describe('instance reconciler', () => {
  it('asks the agent to start every storage and compute node of a ready cluster that is not running, and only those', async () => {
    const state = stateWith(cluster('1', 'ready', [['11', 'h1', 57001], ['12', 'h2', 57002]], [['21', 'h3', 57010]]));
    const { agents, starts } = fakeAgents(new Set(['h1:57001', 'h3:57010']));
    const r = new InstanceReconciler({ store: { state: () => state }, agents, logger: silentLogger() });
    await r.reconcileAll();
    expect(starts.map((s) => s.split(' ').slice(0, 2).join(' ')).sort()).toEqual(['mariadb h1:57001', 'postgres h3:57010']);
    expect(starts.every((s) => /reconcile:1:(node-11|comp-21):[0-9a-f-]{36}$/.test(s))).toBe(true);
    await r.reconcileAll(); // now running: nothing more to do
    expect(starts.length).toBe(2);
  });

  it('leaves alone clusters being created or deleted and clusters a job is working on', async () => {
    const state = stateWith(
      cluster('1', 'creating', [['11', 'h1', 57001]], []),
      cluster('2', 'deleting', [['12', 'h1', 57002]], []),
      cluster('3', 'ready', [['13', 'h1', 57003]], []),
    );
    state.runQueues['cluster:3'] = ['99']; // e.g. a rebuild_node that stops the instance on purpose
    const { agents, starts } = fakeAgents(new Set(['h1:57001', 'h1:57002', 'h1:57003']));
    await new InstanceReconciler({ store: { state: () => state }, agents, logger: silentLogger() }).reconcileAll();
    expect(starts).toEqual([]);
  });

  it("never starts an instance that a failed job's recorded rollback is still to remove", async () => {
    const state = stateWith(cluster('1', 'ready', [['11', 'h1', 57001], ['12', 'h2', 57002]], [['21', 'h3', 57010]]));
    state.pendingRollbacks['7'] = {
      jobId: '7',
      jobType: 'add_comps',
      clusterId: '1',
      instances: [{ kind: 'compute node', id: '21', hostaddr: 'h3', port: 57010 }],
      shardIds: [],
      deleteCluster: false,
      reason: 'agent h3 unreachable',
      recordedAt: 0,
    };
    const { agents, starts } = fakeAgents(new Set(['h1:57001', 'h3:57010']));
    await new InstanceReconciler({ store: { state: () => state }, agents, logger: silentLogger() }).reconcileAll();
    expect(starts.map((s) => s.split(' ').slice(0, 2).join(' '))).toEqual(['mariadb h1:57001']);
  });

  it('does nothing for an unreachable agent or an instance its agent does not have, and the round still ends', async () => {
    const state = stateWith(cluster('1', 'ready', [['11', 'h1', 57001], ['12', 'h2', 57002]], []));
    const { agents, starts } = fakeAgents(new Set(['h1:57001', 'h2:57002']), { unreachable: new Set(['h1']), missing: new Set(['h2:57002']) });
    await new InstanceReconciler({ store: { state: () => state }, agents, logger: silentLogger() }).reconcileAll();
    expect(starts).toEqual([]);
  });

  it('never starts a fenced old master: it would come back with no one replicating it or from it', async () => {
    const state = stateWith(cluster('1', 'ready', [['11', 'h1', 57001], ['12', 'h2', 57002]], []));
    state.clusters['1'].shards['11'].masterNodeId = '12';
    state.clusters['1'].shards['11'].nodes['11'].fenced = { since: 0, byJob: '7', reason: 'failed master' };
    const { agents, starts } = fakeAgents(new Set(['h1:57001']));
    await new InstanceReconciler({ store: { state: () => state }, agents, logger: silentLogger() }).reconcileAll();
    expect(starts).toEqual([]);
  });
});
