// An agent stopped during a job of each family that talks to agents fails the job with the
// same catalog code, AGENT_UNREACHABLE, never INTERNAL or INSTANCE_FAILED. The jobs run on
// the real runner against real gRPC clients of the one pool (@kcm/agent-api), aimed at a
// loopback port where nothing listens, so the real call helper and error mapping run. The
// cluster they work on is built first with recording fake agents (grow-harness.ts).
// The later families (password rotation, manual switch, backup, restore, table moves) run
// on loopback hosts, so that the error names the host whose agent (or, for a move's own SQL
// sessions, whose MariaDB) did not answer, and each test checks that nothing was left
// half-done; one agent dies in the middle of a call instead.

import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError, errorEntry } from '@kcm/protocol';
import {
  AgentClient,
  AgentPool,
  CgroupAgentClient,
  HostProbeAgentClient,
  MariaDbAgentClient,
  MariaDbHaAgentClient,
  MariaDbRestoreAgentClient,
  PasswordAgentClient,
  PostgresAgentClient,
  loadAgentService,
  serverCredentials,
  type AgentPoolOptions,
  type Agents,
} from '@kcm/agent-api';
import { foreignTablesOf, cutOver, type ForeignTableAgent } from '../../src/jobs/moves/cutover';
import { CommandKind } from '../../src/meta/commands';
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
    if (kind === 'mariadbHa') return new MariaDbHaAgentClient(address);
    if (kind === 'mariadbRestore') return new MariaDbRestoreAgentClient(address, { queryMs: 2000 });
    if (kind === 'passwords') return new PasswordAgentClient(address);
    if (kind === 'hostProbe') return new HostProbeAgentClient(address, 2000);
    return new CgroupAgentClient(address);
  }) as NonNullable<AgentPoolOptions['makeClient']>;
  return new AgentPool(deadPort, { makeClient });
}

/** Stops every agent the jobs of `h` talk to: from now on they reach `pool`'s agents (default: the dead port). */
function stopAgents(h: { agents: Agents }, pool: AgentPool = deadAgentPool()): AgentPool {
  Object.assign(h.agents, {
    mariadb: (host: string) => pool.mariadb(host),
    postgres: (host: string) => pool.postgres(host),
    postgresProbe: (host: string) => pool.postgresProbe(host),
    cgroup: (host: string) => pool.cgroup(host),
    mariadbHa: (host: string) => pool.mariadbHa(host),
    mariadbRestore: (host: string) => pool.mariadbRestore(host),
    passwords: (host: string) => pool.passwords(host),
    hostProbe: (host: string) => pool.hostProbe(host),
    shardData: (host: string) => pool.shardData(host),
    tableMove: (host: string) => pool.tableMove(host),
    relationSwitch: (host: string) => pool.relationSwitch(host),
    mariadbTables: (host: string) => pool.mariadbTables(host),
    mariadbLogical: (host: string) => pool.mariadbLogical(host),
    catalogDump: (host: string) => pool.catalogDump(host),
    agentAddress: (host: string) => pool.agentAddress(host),
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

/**
 * Loopback hosts where nothing listens on the agent port: a call fails at once, and its
 * error names the host (the agent address is `<host>:<port>`), as it does in production.
 */
const LOOPBACK_HOSTS = ['127.0.9.1', '127.0.9.2', '127.0.9.3', '127.0.9.4'];
const onLoopback = { storage_iplists: LOOPBACK_HOSTS.slice(0, 3) };

/** Stops every agent of the loopback hosts: the pool's real clients, aimed at the dead port. */
const stopLoopbackAgents = (h: { agents: Agents }) => stopAgents(h, new AgentPool(deadPort, { deadlineMs: 2000, probeDeadlineMs: 2000 }));

/** Failed with AGENT_UNREACHABLE, and the error names the agent of one of `hosts`. */
function expectUnreachableNaming(status: { status: string; errorCode: number; errorInfo: string }, hosts: readonly string[]) {
  expectUnreachable(status);
  expect(hosts.map((h) => `agent at ${h}:${deadPort} is unreachable`).some((m) => status.errorInfo.includes(m)), status.errorInfo).toBe(true);
}

describe('an agent stopped during a job of a later wave fails it cleanly: AGENT_UNREACHABLE naming the host, nothing half-done or lost', () => {
  const pools: AgentPool[] = [];
  afterAll(() => pools.forEach((p) => p.close()));

  it('rotate_cluster_passwords: the new passwords stay recorded as an unfinished rotation, and the next run finishes it with them', async () => {
    const h = await startHarness({ hosts: LOOPBACK_HOSTS });
    const cluster = await h.readyCluster(onLoopback);
    const live = { ...h.agents };
    pools.push(stopLoopbackAgents(h));
    const status = await h.run('rotate_cluster_passwords', { cluster_id: cluster.id });
    expectUnreachableNaming(status, LOOPBACK_HOSTS);
    const after = h.store.s.clusters[cluster.id];
    expect(after.accounts).toEqual(cluster.accounts); // kcm goes on using the passwords every node has
    const recorded = after.passwordRotation!;
    expect(recorded).toMatchObject({ jobId: status.jobId, applied: [] });
    expect(status.errorInfo).toContain(`submit rotate_cluster_passwords for cluster ${cluster.id} again`);
    // The agents are back: the next rotation finishes the recorded one, with the same passwords.
    Object.assign(h.agents, live);
    const again = await h.run('rotate_cluster_passwords', { cluster_id: cluster.id });
    expect(again.status, again.errorInfo).toBe('done');
    const finished = h.store.s.clusters[cluster.id];
    expect(finished.passwordRotation).toBeUndefined();
    for (const role of Object.keys(recorded.accounts) as (keyof typeof recorded.accounts)[]) expect(finished.accounts[role]).toEqual(recorded.accounts[role]);
  });

  it('manual_switch: fails at its measurement, before any write is held; the master stays master, nothing fenced', async () => {
    const h = await startHarness({ hosts: LOOPBACK_HOSTS });
    const cluster = await h.readyCluster(onLoopback);
    const shard = cluster.shards['1'];
    const master = shard.nodes[shard.masterNodeId];
    const standby = Object.values(shard.nodes).find((n) => n.id !== master.id)!;
    pools.push(stopLoopbackAgents(h));
    const status = await h.run('manual_switch', {
      cluster_id: cluster.id, shard_id: '1', master_hostaddr: `${master.hostaddr}_${master.port}`, assign_hostaddr: `${standby.hostaddr}_${standby.port}`,
    });
    expectUnreachableNaming(status, [master.hostaddr, standby.hostaddr]);
    const after = h.store.s.clusters[cluster.id].shards['1'];
    expect(after.masterNodeId).toBe(master.id);
    expect(Object.values(after.nodes).filter((n) => n.fenced)).toEqual([]);
  });

  /** manual_backup_cluster with every agent stopped, the storage's own included (registered directly: create_backup_storage opens it). */
  async function backupWithAgentsStopped() {
    const h = await startHarness({ hosts: LOOPBACK_HOSTS });
    const cluster = await h.readyCluster(onLoopback);
    await h.store.propose({ kind: CommandKind.BackupStorageCreated, at: 0, name: 'local', stype: 'fs', hostaddr: LOOPBACK_HOSTS[3], port: deadPort, path: '/backups' });
    pools.push(stopLoopbackAgents(h));
    return { h, cluster, status: await h.run('manual_backup_cluster', { cluster_id: cluster.id }) };
  }

  it('manual_backup_cluster: fails naming every node whose agent did not answer; no backup set is recorded', async () => {
    const { h, cluster, status } = await backupWithAgentsStopped();
    expect(status.status).toBe('failed');
    for (const shard of Object.values(cluster.shards)) {
      for (const n of Object.values(shard.nodes)) expect(status.errorInfo).toContain(`${n.hostaddr}:${n.port}: its agent did not answer`);
    }
    expect(h.store.s.backupSets).toEqual({});
  });

  // A shard none of whose agents answers was once INSTANCE_FAILED (2001): the hosts, not the instances, are the problem.
  it('manual_backup_cluster: answers AGENT_UNREACHABLE, as the other families do', async () => {
    const { status } = await backupWithAgentsStopped();
    expectUnreachable(status);
  });

  it('an agent that dies in the middle of a call: rotate_cluster_passwords fails naming it, the rotation stays recorded', async () => {
    const h = await startHarness({ hosts: LOOPBACK_HOSTS });
    const cluster = await h.readyCluster(onLoopback);
    const pool = stopLoopbackAgents(h);
    pools.push(pool);
    // The first host's agent takes the call and dies before it answers: its connection is dropped mid-call.
    const dying = await dyingAgent(LOOPBACK_HOSTS[0], deadPort, 'agent-passwords.proto', 'PasswordAgent');
    const status = await h.run('rotate_cluster_passwords', { cluster_id: cluster.id });
    expect(dying.callsTaken()).toBeGreaterThan(0);
    expectUnreachableNaming(status, [LOOPBACK_HOSTS[0]]);
    expect(h.store.s.clusters[cluster.id].accounts).toEqual(cluster.accounts);
    expect(h.store.s.clusters[cluster.id].passwordRotation).toMatchObject({ jobId: status.jobId, applied: [] });
  });
});

/**
 * A gRPC server for one agent service at host:port whose every call is taken and never
 * answered: the server is shut down at once, dropping the connection in the middle of the
 * call, as an agent SIGKILLed while it works on a command.
 */
async function dyingAgent(host: string, port: number, protoFile: string, serviceName: string): Promise<{ callsTaken(): number }> {
  const server = new grpc.Server();
  let taken = 0;
  const service = loadAgentService(protoFile, serviceName).service;
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const method of Object.keys(service)) {
    handlers[method] = () => {
      taken++;
      server.forceShutdown();
    };
  }
  server.addService(service, handlers);
  await new Promise<void>((resolve, reject) => server.bindAsync(`${host}:${port}`, serverCredentials(), (err) => (err ? reject(err) : resolve())));
  return { callsTaken: () => taken };
}

/**
 * A BackupStorageAgent at host:port that finds every object intact (Verify answers ok) and
 * records the keys it was asked about; no other call is expected of it.
 */
async function intactStorageAgent(host: string, port: number): Promise<{ verified: string[]; stop(): void }> {
  const server = new grpc.Server();
  const verified: string[] = [];
  server.addService(loadAgentService('agent-storage.proto', 'BackupStorageAgent').service, {
    Verify: (call: grpc.ServerUnaryCall<{ key: string }, unknown>, done: grpc.sendUnaryData<unknown>) => {
      verified.push(call.request.key);
      done(null, { key: call.request.key, ok: true, problem: '', expected_sha256: '' });
    },
  });
  await new Promise<void>((resolve, reject) => server.bindAsync(`${host}:${port}`, serverCredentials(), (err) => (err ? reject(err) : resolve())));
  return { verified, stop: () => server.forceShutdown() };
}

describe('cluster_restore with agents stopped fails cleanly: AGENT_UNREACHABLE naming the host, nothing restored behind the user', () => {
  const pools: AgentPool[] = [];
  afterAll(() => pools.forEach((p) => p.close()));
  const STORAGE_HOST = LOOPBACK_HOSTS[3];
  const BACKUP_FINISHED_S = 1_700_000_000;

  /**
   * Source and destination clusters of 2 shards on the loopback hosts, a backup set of the
   * source finished at BACKUP_FINISHED_S on storage `local` (STORAGE_HOST at the dead port),
   * and each source shard's binlogs archived past it; the restore's paras.
   */
  async function restoreSetUp() {
    const h = await startHarness({ hosts: LOOPBACK_HOSTS });
    const src = await h.readyCluster(onLoopback);
    const dst = await h.readyCluster({ ...onLoopback, nick_name: 'shop_restored' });
    await h.store.propose({ kind: CommandKind.BackupStorageCreated, at: 0, name: 'local', stype: 'fs', hostaddr: STORAGE_HOST, port: deadPort, path: '/backups' });
    const shards = Object.values(src.shards);
    await h.store.propose({
      kind: CommandKind.BackupSetRecorded, at: 0,
      set: {
        id: '900', clusterId: src.id, storageName: 'local', startedAt: (BACKUP_FINISHED_S - 10) * 1000, finishedAt: BACKUP_FINISHED_S * 1000, catalog: [],
        shards: shards.map((s) => ({
          shardId: s.id, shardName: s.name, key: `cluster_${src.id}/backup_900/shard_${s.id}.mbstream`, bytes: 10, sha256: '', gtidPos: '0-1-10',
          sourceHostaddr: LOOPBACK_HOSTS[0], sourcePort: 5000, sourceWasMaster: false, transferMs: 1, storedAt: BACKUP_FINISHED_S * 1000,
        })),
      },
    });
    for (const s of shards) {
      await h.store.propose({
        kind: CommandKind.BinlogArchived, at: 0, clusterId: src.id, shardId: s.id,
        file: {
          key: `cluster_${src.id}/binlogs/shard_${s.id}/1/mariadb-bin.000002`, storageName: 'local', name: 'mariadb-bin.000002', serverId: 1, hostaddr: LOOPBACK_HOSTS[0], port: 5000,
          bytes: 10, sha256: '', startGtidState: '0-1-5', endGtidState: '0-1-15', firstEventTime: BACKUP_FINISHED_S - 5, lastEventTime: BACKUP_FINISHED_S + 100, archivedAt: 0,
        },
      });
    }
    const masters = Object.values(dst.shards).map((s) => s.nodes[s.masterNodeId]);
    return { h, src, dst, masters, paras: { src_cluster_id: src.id, dst_cluster_id: dst.id, restore_time: String(BACKUP_FINISHED_S + 30) } };
  }

  it('the backup storage\'s agent stopped: fails before anything is written, naming the storage host, not as a checksum mismatch', async () => {
    const { h, dst, paras } = await restoreSetUp();
    const status = await h.run('cluster_restore', paras);
    expectUnreachableNaming(status, [STORAGE_HOST]);
    expect(status.errorInfo).not.toContain('do not match their checksums');
    expect(h.calls).toEqual([]); // not even the destination's checks: the storage comes first
    expect(h.store.s.clusters[dst.id]).toEqual(dst);
  });

  it('the destination\'s agents stopped: fails at its checks naming a destination master, before anything is written', async () => {
    const { h, dst, masters, paras } = await restoreSetUp();
    const storage = await intactStorageAgent(STORAGE_HOST, deadPort);
    try {
      pools.push(stopLoopbackAgents(h));
      const status = await h.run('cluster_restore', paras);
      expect(storage.verified).toHaveLength(4); // 2 shard backups and 2 binlog files: the set was found intact
      expectUnreachableNaming(status, masters.map((m) => m.hostaddr));
      expect(h.store.s.clusters[dst.id]).toEqual(dst);
      expect(h.store.s.pendingRollbacks).toEqual({});
    } finally {
      storage.stop();
    }
  });

  it('the destination\'s agents stop once its masters were restored: the job says which master keeps partly restored data', async () => {
    const { h, dst, masters, paras } = await restoreSetUp();
    const storage = await intactStorageAgent(STORAGE_HOST, deadPort);
    try {
      const live = { mariadb: h.agents.mariadb.bind(h.agents), mariadbRestore: h.agents.mariadbRestore.bind(h.agents) };
      const pool = stopLoopbackAgents(h);
      pools.push(pool);
      // The destination is found empty and its masters restored; then no agent answers: not the standbys' rebuild, not the rollback's drop.
      Object.assign(h.agents, {
        mariadb: (host: string) => Object.assign(Object.create(pool.mariadb(host)), { listTables: (port: number) => live.mariadb(host).listTables(port) }),
        mariadbRestore: (host: string) => Object.assign(Object.create(pool.mariadbRestore(host)), { restoreFullBackup: (r: never) => live.mariadbRestore(host).restoreFullBackup(r) }),
      });
      const status = await h.run('cluster_restore', paras);
      expect(h.calls.filter((c) => c.method === 'restore.full')).toHaveLength(masters.length);
      expectUnreachableNaming(status, LOOPBACK_HOSTS);
      expect(status.errorInfo).toContain('; the partly restored data could not be dropped from ');
      for (const [i, shard] of Object.values(dst.shards).entries()) {
        expect(status.errorInfo).toContain(`${shard.name} on ${masters[i].hostaddr}:${masters[i].port} (AGENT_UNREACHABLE: agent at ${masters[i].hostaddr}:${deadPort} is unreachable`);
      }
      expect(h.store.s.clusters[dst.id]).toEqual(dst);
    } finally {
      storage.stop();
    }
  });
});

describe('a table move whose shard masters or compute nodes cannot be reached fails cleanly: an error naming the host, nothing half-moved', () => {
  const pools: AgentPool[] = [];
  afterAll(() => pools.forEach((p) => p.close()));
  const INSTANCE_FAILED = errorEntry('INSTANCE_FAILED').code;

  // The move's sessions on the masters are held by the masters' agents: with those agents
  // down, the first phase fails naming the source master and its host's agent.
  it('expand_cluster, the shard masters\' agents down: fails at its first phase naming the source master, not as a bug of kcm; nothing moved', async () => {
    const h = await startHarness({ hosts: LOOPBACK_HOSTS });
    const cluster = await h.readyCluster(onLoopback);
    const source = cluster.shards['1'].nodes[cluster.shards['1'].masterNodeId];
    pools.push(stopLoopbackAgents(h));
    const status = await h.run('expand_cluster', { cluster_id: cluster.id, src_shard_id: '1', dst_shard_id: '2', table_list: ['shop.public.orders'], drop_old_table: '0' });
    expect({ status: status.status, code: status.errorCode }, status.errorInfo).toEqual({ status: 'failed', code: errorEntry('AGENT_UNREACHABLE').code });
    expect(status.errorInfo).toMatch(/^step 1 of 6 \(record the source positions\) failed: /);
    expect(status.errorInfo).toContain(`MariaDB at ${source.hostaddr}:${source.port}: the agent of its host did not answer`);
    expect(h.store.s.clusters[cluster.id]).toEqual(cluster);
  });

  it('the cut-over, one compute node\'s agent down: AGENT_UNREACHABLE naming it, nothing re-pointed, every hold taken released', async () => {
    const pool = new AgentPool(deadPort);
    pools.push(pool);
    const dead = foreignTablesOf(pool);
    const calls: string[] = [];
    let deadHoldFailed!: () => void;
    const failed = new Promise<void>((resolve) => (deadHoldFailed = resolve));
    // The compute node on 127.0.9.1 has no agent; the one on 127.0.9.2 takes its hold, answering just after the other failed.
    const agent: ForeignTableAgent = {
      hold: async (host, id, ref, ms, prepareFor) => {
        if (host === LOOPBACK_HOSTS[0]) return dead.hold(host, id, ref, ms, prepareFor).finally(deadHoldFailed);
        await failed;
        await new Promise((r) => setTimeout(r, 20));
        calls.push(`hold ${host}`);
        return { server: 'shard_1' };
      },
      repoint: async (host) => {
        calls.push(`repoint ${host}`);
        return { held_ms: 0 };
      },
      release: async (host) => void calls.push(`release ${host}`),
      server: async () => ({ server: 'shard_1' }),
    };
    const cutting = cutOver(agent, {
      holdId: 'j1-0-1', comps: [{ hostaddr: LOOPBACK_HOSTS[0], port: 6000 }, { hostaddr: LOOPBACK_HOSTS[1], port: 6000 }], foreign: { database: 'shop', schema: 'public', table: 'orders' },
      targetServer: 'shard_2', holdMs: 5000, sourcePosition: async () => ({ file: 'b.000001', pos: 4 }), caughtUp: async () => {},
    });
    const err = await cutting.then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(KcmError);
    expect({ code: (err as KcmError).code, message: (err as KcmError).message }).toMatchObject({
      code: AGENT_UNREACHABLE, message: expect.stringContaining(`the source keeps serving: agent at ${LOOPBACK_HOSTS[0]}:${deadPort} is unreachable`),
    });
    expect(calls).toEqual([`hold ${LOOPBACK_HOSTS[1]}`, `release ${LOOPBACK_HOSTS[1]}`]);
  });
});
