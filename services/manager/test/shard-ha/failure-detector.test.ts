// The leader's shard failure detector against fake agents: which evidence makes it submit a
// shard_failover, and which does not (a manager cut off from a healthy master).

import { silentLogger } from '@kcm/common';
import { AgentUnreachableError, type Agents, type MariaDbHaStatusReply } from '@kcm/agent-api';
import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/meta/commands';
import { ShardFailureDetector } from '../../src/leader/shard-failure-detector';
import { cluster, stateWith } from '../helpers/cluster-state';
import { storedAccount, testSecretBox } from '../../../../test/helpers/secrets';

// Nothing listens on 127.0.0.1:9 (discard): the SQL ping to the master fails at once.
const MASTER = ['11', '127.0.0.1', 9] as [string, string, number];
const STANDBYS: Array<[string, string, number]> = [['12', 'h2', 57002], ['13', 'h3', 57003]];

function status(over: Partial<MariaDbHaStatusReply>): MariaDbHaStatusReply {
  return {
    port: 0, installed: true, running: true, answering: true, pid: 1, reason: '', read_only: false, gtid_current_pos: '', gtid_slave_pos: '', gtid_binlog_pos: '',
    is_replica: false, io_running: false, sql_running: false, master_host: '', master_port: 0, last_io_error: '', last_sql_error: '', gtid_io_pos: '',
    relay_applied: true, semi_sync_slave_active: false, semi_sync_master_enabled: false, semi_sync_master_clients: 0, master_reachable: false,
    supervisor_restarts: 0, desired_state: 'running', fenced: false, supervisor_restarted_at_ms: 0, ...over,
  };
}

interface World {
  master: MariaDbHaStatusReply | 'unreachable';
  standby: MariaDbHaStatusReply;
  /** How long the master's agent takes to answer (ms). */
  masterAgentMs?: number;
  /** What other hosts' agents say, when not `standby`. */
  byHost?: Map<string, MariaDbHaStatusReply>;
}

function setUp(world: World) {
  const c = cluster('1', 'ready', [MASTER, ...STANDBYS], []);
  c.accounts = { storage: storedAccount({ user: 'u', password: 'p' }) } as typeof c.accounts;
  const state = stateWith(c);
  const proposed: Command[] = [];
  let clock = 1_000_000;
  const agents = {
    mariadbHa: (host: string) => ({
      async replicationStatus() {
        if (host === MASTER[1]) {
          if (world.masterAgentMs) await new Promise((r) => setTimeout(r, world.masterAgentMs));
          if (world.master === 'unreachable') throw new AgentUnreachableError(`${host}:58100`, new Error('deadline exceeded'));
          return world.master;
        }
        return world.byHost?.get(host) ?? world.standby;
      },
    }),
  } as unknown as Agents;
  const detector = new ShardFailureDetector({
    store: { state: () => state, propose: async (cmd: Command) => (proposed.push(cmd), { ok: true, value: { jobId: '9' } }) },
    agents,
    secrets: testSecretBox(),
    logger: silentLogger(),
    graceMs: 1000,
    probeTimeoutMs: 300,
    sqlPingAfterMs: 50,
    now: () => clock,
  });
  const failovers = () => proposed.filter((p) => p.kind === 4 && p.jobType === 'shard_failover') as Extract<Command, { kind: 4 }>[];
  const shard = () => c.shards[Object.keys(c.shards)[0]];
  return { detector, failovers, shard, advance: (ms: number) => void (clock += ms), judge: () => detector.judge(c, c.shards[Object.keys(c.shards)[0]], c.shards[Object.keys(c.shards)[0]].nodes[MASTER[0]]) };
}

const replicating = status({ read_only: true, is_replica: true, io_running: true, sql_running: true, master_reachable: true });

describe('shard failure detector', () => {
  it('fails over at once when the agent says mariadbd is not running', async () => {
    const { detector, failovers } = setUp({ master: status({ running: false, answering: false, reason: 'no mariadbd process' }), standby: replicating });
    await detector.checkAll();
    expect(failovers()).toHaveLength(1);
    expect(failovers()[0].paras).toMatchObject({ cluster_id: '1', failed_node_id: '11', reason: expect.stringMatching(/mariadbd is not running/) });
    expect(failovers()[0].lockKey).toBe('cluster:1');
  });

  it('fails over when the agent restarted a master that died between two looks', async () => {
    const world: World = { master: status({ supervisor_restarts: 0 }), standby: replicating };
    const { detector, failovers } = setUp(world);
    await detector.checkAll();
    expect(failovers()).toHaveLength(0);
    world.master = status({ supervisor_restarts: 1 });
    await detector.checkAll();
    expect(failovers().map((f) => f.paras.reason)).toEqual([expect.stringMatching(/restarted mariadbd after it died \(restarts 0 -> 1\)/)]);
  });

  it('fails over the master that replaced a failed one when it dies too, seconds later (the guard is per master, not per shard)', async () => {
    const dead = status({ running: false, answering: false, reason: 'no mariadbd process' });
    const world: World = { master: dead, standby: replicating };
    const { detector, failovers, shard, advance } = setUp(world);
    await detector.checkAll();
    expect(failovers().map((f) => f.paras.failed_node_id)).toEqual(['11']);
    // The failover made node 12 master; 2 s later it dies too.
    shard().masterNodeId = '12';
    shard().masterSince = 1_000_000;
    advance(2000);
    world.byHost = new Map([['h2', dead]]);
    await detector.checkAll();
    expect(failovers().map((f) => f.paras.failed_node_id)).toEqual(['11', '12']);
    // The same failed master is not submitted again in a tight loop.
    advance(500);
    await detector.checkAll();
    expect(failovers()).toHaveLength(2);
  });

  it('fails over a node again when it fails after it was failed over, rejoined and promoted back, within seconds', async () => {
    const dead = status({ running: false, answering: false, reason: 'no mariadbd process' });
    const world: World = { master: dead, standby: replicating };
    const { detector, failovers, shard, advance } = setUp(world);
    await detector.checkAll();
    // Failed over to 12, which died too: failed over back to 11 (rejoined meanwhile), which dies again.
    shard().masterNodeId = '12';
    shard().masterSince = 1_000_500;
    world.byHost = new Map([['h2', dead]]);
    advance(1000);
    await detector.checkAll();
    shard().masterNodeId = '11';
    shard().masterSince = 1_002_000;
    world.byHost = new Map();
    advance(2000);
    await detector.checkAll();
    expect(failovers().map((f) => f.paras.failed_node_id)).toEqual(['11', '12', '11']);
  });

  it('fails over a new master its supervisor restarted after its promotion, before any round looked at it', async () => {
    const world: World = { master: status({}), standby: replicating };
    const { detector, failovers, shard } = setUp(world);
    // Made master at t=1,000,000 (while its cluster was busy); died and was restarted 800 ms later.
    shard().masterSince = 1_000_000;
    world.master = status({ supervisor_restarts: 3, supervisor_restarted_at_ms: 1_000_800 });
    await detector.checkAll();
    expect(failovers().map((f) => f.paras.reason)).toEqual([expect.stringMatching(/restarted mariadbd after it died, 800 ms after it became master/)]);
  });

  it('does not count a restart from before a master was promoted', async () => {
    const { detector, failovers, shard } = setUp({ master: status({ supervisor_restarts: 3, supervisor_restarted_at_ms: 999_000 }), standby: replicating });
    shard().masterSince = 1_000_000;
    await detector.checkAll();
    expect(failovers()).toHaveLength(0);
  });

  it('does not fail over a master the manager cannot reach while its standbys still do', async () => {
    const { detector, failovers, advance } = setUp({ master: 'unreachable', standby: replicating });
    for (let i = 0; i < 5; i++) {
      await detector.checkAll();
      advance(1000);
    }
    expect(failovers()).toHaveLength(0);
  });

  it('fails over an unreachable master its standbys lost too, once the grace period has passed', async () => {
    const lost = status({ read_only: true, is_replica: true, io_running: true, sql_running: true, master_reachable: false });
    const { detector, failovers, advance } = setUp({ master: 'unreachable', standby: lost });
    await detector.checkAll();
    expect(failovers()).toHaveLength(0);
    advance(1000);
    await detector.checkAll();
    expect(failovers()).toHaveLength(1);
    expect(failovers()[0].paras.reason).toMatch(/unreachable from the manager .* every standby lost it/);
  });

  describe('SQL pings (a new MariaDB connection each) only when the agent cannot vouch for the master', () => {
    it('makes none for a master whose agent answers in time that it runs and answers SQL', async () => {
      const { detector, judge } = setUp({ master: status({}), standby: replicating });
      expect(await judge()).toMatchObject({ failed: false, answers: true, evidence: 'answers' });
      expect(detector.sqlPings).toBe(0);
    });

    it('makes none when the agent says mariadbd is not running: that is the verdict', async () => {
      const { detector, judge } = setUp({ master: status({ running: false, answering: false, reason: 'no mariadbd process' }), standby: replicating });
      expect(await judge()).toMatchObject({ failed: true });
      expect(detector.sqlPings).toBe(0);
    });

    it('pings a master whose agent says it runs but does not answer SQL', async () => {
      const { detector, judge } = setUp({ master: status({ answering: false, reason: 'Too many connections' }), standby: replicating });
      await judge();
      expect(detector.sqlPings).toBe(1);
    });

    it('pings beside an agent that is late or unreachable, and still takes a late agent answer', async () => {
      const late = setUp({ master: status({}), standby: replicating, masterAgentMs: 150 });
      expect(await late.judge()).toMatchObject({ answers: true, evidence: 'answers' });
      expect(late.detector.sqlPings).toBe(1);
      const unreachable = setUp({ master: 'unreachable', standby: replicating });
      await unreachable.judge();
      expect(unreachable.detector.sqlPings).toBe(1);
    });
  });
});
