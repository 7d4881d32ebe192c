// shard_failover's first step against fake agents: an old master is fenced only when a
// standby can take over; with none, the master is left to its agent's supervisor (a shard
// with a crashed master and no standby is better restarted than fenced for good). An old
// master whose agent cannot be reached is fenced in the metadata, and the step ends only
// once its lease has run out (its agent has fenced it by then).

import { AgentUnreachableError, type Agents, type MariaDbHaStatusReply, type WithAgent } from '@kcm/agent-api';
import { describe, expect, it } from 'vitest';
import { shardFailoverJob, type ShardFailoverParas } from '../../src/jobs/shard-ha/failover-job';
import type { StepContext } from '../../src/jobs/framework/workflow';
import { cluster } from '../helpers/cluster-state';
import { LocalStore } from '../helpers/local-store';
import { stepServices } from '../helpers/step-services';

function setUp(standbysAnswer: boolean, opts: { masterAgentUnreachable?: boolean; leaseLeftMs?: number } = {}) {
  const store = new LocalStore();
  store.s.clusters['1'] = cluster('1', 'ready', [['11', 'h1', 57001], ['12', 'h2', 57002], ['13', 'h3', 57003]], []);
  const fences: string[] = [];
  const agents = {
    mariadbHa: (host: string) => ({
      async replicationStatus() {
        if (host === 'h1' && opts.masterAgentUnreachable) throw new AgentUnreachableError(`${host}:58100`, new Error('timed out'));
        if (host === 'h1') return { installed: true, running: false, answering: false } as MariaDbHaStatusReply;
        if (!standbysAnswer) throw new AgentUnreachableError(`${host}:58100`, new Error('refused'));
        return { installed: true, running: true, answering: true, gtid_slave_pos: '0-11-5', gtid_current_pos: '0-11-5', gtid_io_pos: '0-11-5' } as MariaDbHaStatusReply;
      },
      async fence(op: string, port: number, stop: boolean) {
        fences.push(`${host}:${port} stop=${stop}`);
        return { was_running: false, made_read_only: false, stopped: stop, gtid_binlog_pos: '' };
      },
    }),
  } as unknown as Agents;
  const paras: ShardFailoverParas = { cluster_id: '1', shard_id: '11', failed_node_id: '11', reason: 'test' };
  const withAgent = (async (host: string, use: (a: { health(): Promise<unknown> }) => Promise<unknown>) => {
    if (host === 'h1' && opts.masterAgentUnreachable) throw new AgentUnreachableError(`${host}:58100`, new Error('timed out'));
    return use({ health: async () => ({}) });
  }) as unknown as WithAgent;
  const ctx = { ...stepServices(store, { agents, withAgent }), jobId: '9', paras, outputs: {}, state: () => store.s, progress: async () => {}, signal: new AbortController().signal } as unknown as StepContext<ShardFailoverParas, any>;
  const leaseAsked: string[] = [];
  const leases = {
    msUntilLeaseEnds(nodeId: string) {
      // Asked only after the fence is in the metadata: from then on no leader renews the lease.
      leaseAsked.push(`${nodeId} fenced=${store.s.clusters['1'].shards['11'].nodes[nodeId].fenced !== undefined}`);
      return opts.leaseLeftMs ?? 0;
    },
  };
  const fenceStep = shardFailoverJob({ leases }).steps(paras)[0];
  return { store, fences, leaseAsked, run: () => fenceStep.run(ctx) };
}

describe('shard_failover: fencing the old master', () => {
  it('fences it (metadata first, then its agent stops it) when a standby can be promoted', async () => {
    const { store, fences, run } = setUp(true);
    const out = await run();
    expect(out).toMatchObject({ node_id: '11', how: 'stopped by its agent' });
    expect(fences).toEqual(['h1:57001 stop=true']);
    expect(store.s.clusters['1'].shards['11'].nodes['11'].fenced).toMatchObject({ byJob: '9' });
  });

  it('waits for the lease of an old master whose agent cannot be reached, after fencing it in the metadata', async () => {
    const { store, fences, leaseAsked, run } = setUp(true, { masterAgentUnreachable: true, leaseLeftMs: 120 });
    const t0 = performance.now();
    const out = await run();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(115);
    expect(out).toMatchObject({ node_id: '11', how: 'recorded in metadata (agent unreachable); its lease ran out', lease_wait_ms: 120 });
    expect(leaseAsked).toEqual(['11 fenced=true']);
    expect(fences).toEqual([]);
    expect(store.s.clusters['1'].shards['11'].nodes['11'].fenced).toMatchObject({ byJob: '9' });
  });

  it('does not wait for a lease when its agent killed the old master', async () => {
    const { leaseAsked, run } = setUp(true, { leaseLeftMs: 60_000 });
    expect(await run()).toMatchObject({ how: 'stopped by its agent', lease_wait_ms: 0 });
    expect(leaseAsked).toEqual([]);
  });

  it('does not fence it when no standby can be promoted: NO_RESOURCES, the master left as it is', async () => {
    const { store, fences, run } = setUp(false);
    await expect(run()).rejects.toThrow(/no standby can be promoted/);
    expect(fences).toEqual([]);
    expect(store.s.clusters['1'].shards['11'].nodes['11'].fenced).toBeUndefined();
  });
});
