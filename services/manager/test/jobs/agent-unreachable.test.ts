// An agent stopped during a job of each family that talks to agents fails the job with the
// same catalog code, AGENT_UNREACHABLE, never INTERNAL or INSTANCE_FAILED. The jobs run on
// the real runner against real gRPC clients of the one pool (@kcm/agent-api), aimed at a
// loopback port where nothing listens, so the real call helper and error mapping run. The
// cluster they work on is built first with recording fake agents (grow-harness.ts).

import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorEntry } from '@kcm/protocol';
import {
  AgentClient,
  AgentPool,
  CgroupAgentClient,
  MariaDbAgentClient,
  PostgresAgentClient,
  type AgentPoolOptions,
  type Agents,
} from '@kcm/agent-api';
import { createParas, request, startHarness } from './grow-harness';

const AGENT_UNREACHABLE = errorEntry('AGENT_UNREACHABLE').code;
let deadPort = 0;

/** A loopback port nothing listens on: bound once for a free number, then closed. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

beforeAll(async () => {
  deadPort = await freePort();
});

/** The pool, with every host's agent at the dead loopback port (the harness's hosts are 10.0.0.x). */
function deadAgentPool(): AgentPool {
  const address = `127.0.0.1:${deadPort}`;
  const makeClient = ((kind: string) => {
    if (kind === 'agent') return new AgentClient(address, 2000);
    if (kind === 'mariadb') return new MariaDbAgentClient(address, { queryMs: 2000 });
    if (kind === 'postgres') return new PostgresAgentClient(address);
    if (kind === 'postgresProbe') return new PostgresAgentClient(address, 2000);
    return new CgroupAgentClient(address);
  }) as NonNullable<AgentPoolOptions['makeClient']>;
  return new AgentPool(deadPort, { makeClient });
}

/** Stops every agent the jobs of `h` talk to: from now on they reach the dead port. */
function stopAgents(h: { agents: Agents }): AgentPool {
  const pool = deadAgentPool();
  Object.assign(h.agents, {
    mariadb: (host: string) => pool.mariadb(host),
    postgres: (host: string) => pool.postgres(host),
    postgresProbe: (host: string) => pool.postgresProbe(host),
    cgroup: (host: string) => pool.cgroup(host),
  });
  return pool;
}

function expectUnreachable(status: { status: string; errorCode: number; errorInfo: string }) {
  expect(status.status, status.errorInfo).toBe('failed');
  expect({ code: status.errorCode, info: status.errorInfo }).toMatchObject({ code: AGENT_UNREACHABLE, info: expect.stringContaining('unreachable') });
}

describe('an agent stopped during a job fails it with AGENT_UNREACHABLE, in every family', () => {
  const pools: AgentPool[] = [];
  afterAll(() => pools.forEach((p) => p.close()));

  it('machines: create_machine', async () => {
    const pool = new AgentPool(deadPort, { deadlineMs: 2000 });
    pools.push(pool);
    const h = await startHarness({ agents: pool });
    const status = await h.run('create_machine', {
      hostaddr: '127.0.0.1', machine_type: 'storage', port_range: '57000-57999', rack_id: 'r1', datadir: '/tmp/kcm-d', logdir: '/tmp/kcm-l',
      wal_log_dir: '/tmp/kcm-w', comp_datadir: '/tmp/kcm-c', total_mem: '2048', total_cpu_cores: '2',
    });
    await h.close();
    expectUnreachable(status);
  });

  it('clusters: create_cluster', async () => {
    const h = await startHarness();
    pools.push(stopAgents(h));
    const status = await h.run('create_cluster', createParas());
    await h.close();
    expectUnreachable(status);
  });

  // Each grows, shrinks or changes a ready cluster whose agents are stopped once it is built.
  const onReadyCluster: [string, (cluster: Awaited<ReturnType<Awaited<ReturnType<typeof startHarness>>['readyCluster']>>) => Record<string, unknown>][] = [
    ['delete_cluster', (c) => ({ cluster_id: c.id })],
    ['add_shards', (c) => ({ cluster_id: c.id, shards: '1', nodes: '3', storage_iplists: [] })],
    ['add_comps', (c) => ({ cluster_id: c.id, comps: '1', computer_iplists: [] })],
    ['add_nodes', (c) => ({ cluster_id: c.id, nodes: '1', storage_iplists: [] })],
    [
      'rebuild_node',
      (c) => {
        const shard = c.shards['1'];
        const standby = Object.values(shard.nodes).find((n) => n.id !== shard.masterNodeId)!;
        return { cluster_id: c.id, rb_nodes: [{ hostaddr: standby.hostaddr, port: String(standby.port) }] };
      },
    ],
    [
      'update_instance_cgroup',
      (c) => {
        const node = Object.values(c.shards['1'].nodes)[0];
        return { ip: node.hostaddr, port: String(node.port), type: 'mysql', cpu_cores: '3', cgroup_mode: 'share' };
      },
    ],
  ];

  it.each(onReadyCluster)('%s', async (jobType, paras) => {
    const h = await startHarness({ tables: { '1': [], '2': [] } });
    const cluster = await h.readyCluster();
    pools.push(stopAgents(h));
    const status = await h.run(jobType, paras(cluster));
    await h.close();
    expectUnreachable(status);
  });

  it('add_shards, with the agents stopped between the installs and the replication set-up', async () => {
    const h = await startHarness();
    const cluster = await h.readyCluster();
    const pool = deadAgentPool();
    pools.push(pool);
    const fakeMariadb = h.agents.mariadb.bind(h.agents);
    // The installs are answered; the agents stop before the replication is configured.
    Object.assign(h.agents, {
      mariadb: (host: string) => Object.assign(fakeMariadb(host), { configureReplication: pool.mariadb(host).configureReplication }),
    });
    const status = await h.run('add_shards', { cluster_id: cluster.id, shards: '1', nodes: '3', storage_iplists: [] });
    await h.close();
    expect(h.calls.map((c) => c.method)).toContain('mariadb.install');
    expectUnreachable(status);
  });
});
