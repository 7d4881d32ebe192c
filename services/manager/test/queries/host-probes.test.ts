// The cluster queries measure one host's instances in one agent call (HostProbeAgent.ProbeHost),
// fall back to the per-instance probes on an agent that answers UNIMPLEMENTED (older than
// the manager, during an upgrade), and show what the per-instance probes would show. Fake
// agents count the calls; no engine is involved (test/cluster/host-probe.test.ts runs the
// real agent against real engines).

import * as grpc from '@grpc/grpc-js';
import { AgentCallError, AgentUnreachableError, type ProbeHostRequest, type Agents } from '@kcm/agent-api';
import type { ValidRequest } from '@kcm/protocol';
import { describe, expect, it } from 'vitest';
import { clusterQueries, clusterSummary } from '../../src/queries/clusters';
import { HostProbes } from '../../src/queries/host-probes';
import { InstanceMeasurements } from '../../src/queries/instance-measurements';
import type { MetaState } from '../../src/meta/state';
import { cluster, stateWith } from '../helpers/cluster-state';

const mariadbOnline = (port: number) => ({ port, state: 'online', pid: 7, reason: '', is_replica: false, read_only: false, master_host: '', master_port: 0, last_error: '', supervisor_restarts: 2 });
const pgOnline = { installed: true, running: true, accepting: true, pid: 0, version: '', problem: '', supervisor_restarts: 1 };

interface FakeOptions {
  /** Hosts whose agent has no ProbeHost. */
  older?: Set<string>;
  /** Hosts whose agent does not answer at all. */
  down?: Set<string>;
  /** host:port of instances whose probe fails on the agent. */
  failing?: Set<string>;
  delayMs?: number;
}

/** Agents counting ProbeHost calls per host and per-instance probes, and the most calls open at once. */
function fakeAgents(opts: FakeOptions = {}) {
  const hostCalls = new Map<string, ProbeHostRequest[]>();
  const instanceCalls: string[] = [];
  let open = 0;
  let maxOpen = 0;
  const call = async <T>(host: string, answer: () => T): Promise<T> => {
    maxOpen = Math.max(maxOpen, ++open);
    await new Promise((r) => setTimeout(r, opts.delayMs ?? 2));
    open--;
    if (opts.down?.has(host)) throw new AgentUnreachableError(`${host}:1`, new Error('connect ECONNREFUSED'));
    return answer();
  };
  const failing = (host: string, port: number) => opts.failing?.has(`${host}:${port}`);
  const agents = {
    hostProbe: (host: string) => ({
      probeHost: (req: ProbeHostRequest) =>
        call(host, () => {
          hostCalls.set(host, [...(hostCalls.get(host) ?? []), req]);
          if (opts.older?.has(host)) throw new AgentCallError(`${host}:1`, grpc.status.UNIMPLEMENTED, 'unknown service kcm.agent.HostProbeAgent');
          return {
            mariadb: req.mariadb_ports.map((port) => (failing(host, port) ? { port, probe: null, error: 'boom' } : { port, probe: mariadbOnline(port), error: '' })),
            postgres: req.postgres_ports.map((port) => (failing(host, port) ? { port, probe: null, error: 'boom' } : { port, probe: pgOnline, error: '' })),
          };
        }),
    }),
    mariadb: (host: string) => ({
      probe: (port: number) =>
        call(host, () => {
          instanceCalls.push(`${host}:${port}`);
          if (failing(host, port)) throw new AgentCallError(`${host}:1`, grpc.status.INTERNAL, 'boom');
          return mariadbOnline(port);
        }),
    }),
    postgresProbe: (host: string) => ({
      probe: (port: number) =>
        call(host, () => {
          instanceCalls.push(`${host}:${port}`);
          if (failing(host, port)) throw new AgentCallError(`${host}:1`, grpc.status.INTERNAL, 'boom');
          return pgOnline;
        }),
    }),
  } as unknown as Agents;
  const hostCallCount = () => [...hostCalls.values()].reduce((n, calls) => n + calls.length, 0);
  return { agents, hostCalls, instanceCalls, hostCallCount, maxOpen: () => maxOpen };
}

/**
 * `count` clusters of 3 storage nodes (one per host) and 1 compute node, over `hosts` hosts:
 * cluster i's instances on hosts i, i+1, i+2 (mod hosts), ports unique per cluster.
 */
function fleet(count: number, hosts: number): MetaState {
  return stateWith(
    ...Array.from({ length: count }, (_, i) => {
      const id = String(i + 1);
      const h = (k: number) => `h${(i + k) % hosts}`;
      return cluster(id, 'ready', [[`${id}a`, h(0), 50000 + i], [`${id}b`, h(1), 50000 + i], [`${id}c`, h(2), 50000 + i]], [[`${id}d`, h(0), 60000 + i]]);
    }),
  );
}

const req = (paras: Record<string, unknown>) => ({ paras }) as unknown as ValidRequest;
type Summary = { list_cluster: { cluster_id: string; status: string; nodes_online: string; comps_online: string; measured_age_ms: string }[] };
type Detail = { status: string; list_shard: { list_node: { status: string; restarts: string }[] }[]; list_comp: { status: string; restarts: string }[] };

describe('cluster queries measure one host in one call', () => {
  it('a summary makes one ProbeHost per host naming every instance there, and no per-instance probe', async () => {
    const fake = fakeAgents();
    const reply = (await clusterSummary(fleet(12, 5), { agents: fake.agents })) as Summary;
    expect(fake.hostCallCount()).toBe(5);
    expect(fake.instanceCalls).toEqual([]);
    // 12 clusters x 4 instances, each named once, on the host it lives on.
    const named = [...fake.hostCalls.values()].flat().reduce((n, r) => n + r.mariadb_ports.length + r.postgres_ports.length, 0);
    expect(named).toBe(48);
    expect(fake.hostCalls.get('h0')![0].postgres_ports.sort()).toEqual([60000, 60005, 60010]);
    expect(reply.list_cluster.every((c) => c.status === 'online' && c.nodes_online === '3/3' && c.comps_online === '1/1')).toBe(true);
  });

  it('a summary and a detail asked together share the host calls', async () => {
    const fake = fakeAgents({ delayMs: 10 });
    const h = new Map(clusterQueries({ agents: fake.agents }));
    const state = fleet(6, 4);
    const [, detail] = await Promise.all([h.get('get_cluster_summary')!(req({}), state), h.get('get_cluster_detail')!(req({ cluster_id: '3' }), state)]);
    expect(fake.hostCallCount()).toBe(4);
    expect((detail as Detail).status).toBe('online');
    expect((detail as Detail).list_comp[0]).toMatchObject({ status: 'online', restarts: '1' });
    expect((detail as Detail).list_shard[0].list_node.map((n) => n.restarts)).toEqual(['2', '2', '2']);
  });

  it('an agent without ProbeHost (UNIMPLEMENTED) is probed per instance, shows the same statuses, and is not asked again at once', async () => {
    const fake = fakeAgents({ older: new Set(['h1']) });
    const h = new Map(clusterQueries({ agents: fake.agents }));
    const state = fleet(4, 4);
    const first = (await h.get('get_cluster_summary')!(req({}), state)) as Summary;
    const onH1 = fake.instanceCalls.length;
    expect(onH1).toBe(4); // h1 holds a storage node of clusters 1, 2 and 4, and cluster 2's compute node
    expect(fake.instanceCalls.every((i) => i.startsWith('h1:'))).toBe(true);
    expect(first.list_cluster.every((c) => c.status === 'online')).toBe(true);
    await h.get('get_cluster_summary')!(req({}), state);
    expect(fake.hostCalls.get('h1')).toHaveLength(1); // remembered as older for a while
    expect(fake.instanceCalls.length).toBe(2 * onH1);
    expect(fake.hostCalls.get('h0')).toHaveLength(2);
  });

  it('an older agent is asked for ProbeHost again once the recheck window has passed (it may have been upgraded)', async () => {
    let clock = 0;
    const older = new Set(['h0']);
    const fake = fakeAgents({ older });
    const hostProbes = new HostProbes(fake.agents, () => clock);
    const state = fleet(1, 3);
    await clusterSummary(state, { agents: fake.agents, hostProbes });
    older.clear();
    clock += 30_000;
    await clusterSummary(state, { agents: fake.agents, hostProbes });
    expect(fake.hostCalls.get('h0')).toHaveLength(1);
    clock += 31_000;
    await clusterSummary(state, { agents: fake.agents, hostProbes });
    expect(fake.hostCalls.get('h0')).toHaveLength(2);
  });

  it('an instance whose probe failed on the agent, or a host that does not answer, shows unknown as a failed per-instance probe would', async () => {
    const state = fleet(2, 3);
    const perHost = (await clusterSummary(state, { agents: fakeAgents({ failing: new Set(['h1:50000']), down: new Set(['h2']) }).agents })) as Summary;
    const perInstance = (await clusterSummary(state, { agents: fakeAgents({ failing: new Set(['h1:50000']), down: new Set(['h2']), older: new Set(['h0', 'h1', 'h2']) }).agents })) as Summary;
    const statuses = (s: Summary) => s.list_cluster.map(({ cluster_id, status, nodes_online, comps_online }) => ({ cluster_id, status, nodes_online, comps_online }));
    expect(statuses(perHost)).toEqual(statuses(perInstance));
    expect(perHost.list_cluster.map((c) => [c.status, c.nodes_online, c.comps_online])).toEqual([
      ['degraded', '1/3', '1/1'], // its nodes: h0 online, h1 failing, h2 down
      ['degraded', '2/3', '1/1'], // h1 and h0 online, h2 down
    ]);
  });

  it('never has more than maxInFlight agent calls open, per host or (older agents) per instance', async () => {
    for (const older of [new Set<string>(), new Set(Array.from({ length: 40 }, (_, i) => `h${i}`))]) {
      const fake = fakeAgents({ older });
      const measurements = new InstanceMeasurements({ maxInFlight: 6 });
      const reply = (await clusterSummary(fleet(40, 40), { agents: fake.agents, measurements })) as Summary;
      expect(fake.maxOpen()).toBe(6);
      expect(measurements.probesInFlight).toBe(0);
      expect(reply.list_cluster.every((c) => c.status === 'online')).toBe(true);
    }
  });
});
