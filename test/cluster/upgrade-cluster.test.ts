// upgrade_cluster on real engines (issue 31): a 3-manager group and three agents, each its
// own OS process; a cluster of 1 shard x 3 MariaDB 10.11.18 nodes and 2 PostgreSQL 15.18
// compute nodes, both older Debian builds the agents fetch into their engine cache. Clients
// insert and read rows through both compute nodes the whole time while the job moves every
// instance to MariaDB 10.11.19 and PostgreSQL 15.20; the manager leader is SIGKILLed in the
// middle and the new leader finishes the job. Afterwards every instance answers the new
// version, every acknowledged insert is on the shard, and no client statement failed
// because of the storage side (a compute node's own restart disconnects its sessions:
// counted and shown apart, and only while that node was being upgraded).

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobStatus } from '../helpers/emit-client';
import { waitFor } from '../manager/helpers/processes';
import { HOSTS } from './cluster-fixture';
import { ClientLoad, clientStall } from './ha-fixture';
import { startGroupCluster, type Endpoint, type GroupCluster } from './group-cluster';

const MEMBERS = ['127.0.1.111:58411', '127.0.1.112:58411', '127.0.1.113:58411'];
const AGENT_PORT = 58412;
const OLD = { storage: '10.11.18', computer: '15.18' };
const NEW = { storage: '10.11.19', computer: '15.20' };

/** The errors a compute node's own stop and start gives its sessions: admin shutdown, cannot connect now, a closed socket. */
const COMPUTE_RESTART = /Connection terminated|connection (?:is )?(?:closed|ended)|terminating connection|the database system is (?:shutting down|starting up)|Client has encountered a connection error|ECONNREFUSED|ECONNRESET|EPIPE|not queryable/i;

describe('upgrade_cluster under a write load, with the manager leader SIGKILLed in the middle', () => {
  let g: GroupCluster;

  beforeAll(async () => {
    g = await startGroupCluster({
      name: 'upgrade-cluster',
      members: MEMBERS,
      hosts: HOSTS,
      agentPort: AGENT_PORT,
      managerConfig: { tickMs: 50, electionTick: 10 },
      storagePorts: (i) => ({ low: 47100 + 20 * i, high: 47119 + 20 * i }),
      computerPorts: (i) => ({ low: 47200 + 10 * i, high: 47209 + 10 * i }),
      cluster: { shards: '1', comps: '2', computer_iplists: [HOSTS[1], HOSTS[2]], storage_version: OLD.storage, computer_version: OLD.computer },
    });
  }, 600_000);

  afterAll(async () => {
    await g?.close();
  }, 60_000);

  const comps = async (): Promise<Endpoint[]> => (await g.detail()).list_comp.map((c) => ({ host: c.hostaddr, port: Number(c.port) }));
  const nodes = async (): Promise<Endpoint[]> => (await g.detail()).list_shard.flatMap((s) => s.list_node.map((n) => ({ host: n.hostaddr, port: Number(n.port) })));
  const storageVersionAt = async (at: Endpoint) => String((await g.onNode<{ v: string }>(at, 'SELECT VERSION() AS v'))[0].v);
  const computerVersionAt = async (at: Endpoint) => {
    const c = new pg.Client({ host: at.host, port: at.port, ...g.computer, database: 'postgres' });
    await c.connect();
    try {
      return String((await c.query('SHOW server_version')).rows[0].server_version);
    } finally {
      await c.end();
    }
  };

  it('moves every instance to the new versions; no acknowledged write lost, no client error from the storage side', async () => {
    // Where it starts: every instance runs the old versions (fetched by the agents, not the system's).
    for (const at of await nodes()) expect(await storageVersionAt(at)).toMatch(new RegExp(`^${OLD.storage.replace(/\./g, '\\.')}-`));
    const computeNodes = await comps();
    expect(computeNodes).toHaveLength(2);
    for (const at of computeNodes) expect(await computerVersionAt(at)).toMatch(new RegExp(`^${OLD.computer.replace(/\./g, '\\.')}\\b`));

    const ddl = new pg.Client({ host: computeNodes[0].host, port: computeNodes[0].port, ...g.computer, database: 'postgres' });
    await ddl.connect();
    await ddl.query('CREATE TABLE up_orders (id bigint PRIMARY KEY, at bigint NOT NULL)');
    await ddl.end();
    await waitFor('up_orders on the second compute node', async () => {
      const c = new pg.Client({ host: computeNodes[1].host, port: computeNodes[1].port, ...g.computer, database: 'postgres' });
      await c.connect();
      try {
        return (await c.query('SELECT count(*) FROM up_orders')) ? true : undefined;
      } catch {
        return undefined;
      } finally {
        await c.end();
      }
    }, 60_000, 300);

    const load = new ClientLoad({ comps: () => computeNodes, computer: g.computer }, 4, 1, 'public.up_orders');
    load.start();
    await waitFor('every client acknowledged', async () => ([0, 1, 2, 3].every((c) => load.ops.filter((o) => o.client === c && o.kind === 'insert' && !o.error).length > 5) ? true : undefined), 60_000, 100);
    const jobStarted = Date.now();

    const leader = await g.group.waitForLeader();
    const jobId = await g.submit('upgrade_cluster', { cluster_id: g.clusterId, storage_version: NEW.storage, computer_version: NEW.computer }, [leader]);
    // The leader dies once the first standby is upgraded: the new leader resumes the step.
    const atKill = await waitFor('the first standby upgraded', async () => {
      const s = await jobStatus(leader, jobId, 2000).catch(() => undefined);
      if (!s) return undefined;
      if (s.status === 'done' || s.status === 'failed') throw new Error(`upgrade_cluster ended before the leader could be killed: ${s.status} ${s.error_info ?? ''}`);
      const progress = (s.attachment as { progress?: { step_name?: string; done?: number } } | null)?.progress;
      return progress?.step_name === 'upgrade the standbys' && (progress.done ?? 0) >= 1 ? progress : undefined;
    }, 300_000, 100);
    await g.group.manager(leader).kill();
    console.log(`leader ${leader} SIGKILLed during "${atKill.step_name}" (${atKill.done} done)`);
    await g.group.waitForLeader(MEMBERS.filter((m) => m !== leader), 30_000);
    const done = await g.waitForEnd(jobId, 600_000);
    expect(done.status, done.error_info).toBe('done');
    const jobEnded = Date.now();
    await load.stop();
    const result = done.attachment as { list_node: { instance: string; version_after: string }[]; list_comp: { version_after: string }[]; list_switch: { write_stall_ms: string }[] };
    console.log(`upgrade_cluster: ${JSON.stringify(result)}`);
    expect(result.list_switch).toHaveLength(1);

    // Every instance answers the new version, as its own engine says.
    for (const at of await nodes()) expect(await storageVersionAt(at)).toMatch(new RegExp(`^${NEW.storage.replace(/\./g, '\\.')}-`));
    for (const at of await comps()) expect(await computerVersionAt(at)).toMatch(new RegExp(`^${NEW.computer.replace(/\./g, '\\.')}\\b`));

    // Every acknowledged insert is on the shard's master.
    const master = await g.masterOf(0);
    const onShard = new Set((await g.onNode<{ id: number }>(master, 'SELECT id FROM `postgres_$$_public`.up_orders')).map((r) => Number(r.id)));
    const acked = load.acked();
    const lost = acked.filter((id) => !onShard.has(id));
    const errors = load.errors();
    const storageSide = errors.filter((e) => !COMPUTE_RESTART.test(e.error!));
    const restartsAt = (c: { host: string; port: number }) => errors.filter((e) => COMPUTE_RESTART.test(e.error!) && load.compOf(e.client) === c).length;
    const stall = clientStall(load.ops, jobStarted, jobEnded);
    console.log(
      `clients: ${acked.length} inserts acknowledged, ${lost.length} lost; errors: ${storageSide.length} storage side, ${errors.length - storageSide.length} from a compute node's own restart ` +
        `(${computeNodes.map((c) => `${c.host}:${c.port} ${restartsAt(c)}`).join(', ')}); ` +
        `longest statement per client during the job: ${stall.longestPerClient.join(', ')} ms; switchover stall (job): ${result.list_switch[0].write_stall_ms} ms`,
    );
    expect(lost).toEqual([]);
    expect(storageSide, JSON.stringify(storageSide.slice(0, 5))).toEqual([]);
  }, 900_000);
});
