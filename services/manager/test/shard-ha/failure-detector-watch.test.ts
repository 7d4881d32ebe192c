// The shard failure detector reading its masters from the agents' WatchStatus beats (one
// stream per host) instead of a ReplicationStatus call per master per round, against fake
// agents whose beats the test delivers by hand on a fake clock.

import { silentLogger } from '@kcm/common';
import { AgentCallError, type Agents, type MariaDbHaStatusReply, type MariaDbHaWatchBeat } from '@kcm/agent-api';
import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/meta/commands';
import { WATCH_RETRY_AFTER_MS } from '../../src/leader/health-monitor';
import { ShardFailureDetector } from '../../src/leader/shard-failure-detector';
import { cluster, stateWith } from '../helpers/cluster-state';
import { storedAccount, testSecretBox } from '../../../../test/helpers/secrets';

const MASTER = ['11', 'h1', 57001] as [string, string, number];
const STANDBY = ['12', 'h2', 57002] as [string, string, number];
const INTERVAL_MS = 500;

function status(over: Partial<MariaDbHaStatusReply>): MariaDbHaStatusReply {
  return {
    port: MASTER[2], installed: true, running: true, answering: true, pid: 1, reason: '', read_only: false, gtid_current_pos: '', gtid_slave_pos: '', gtid_binlog_pos: '',
    is_replica: false, io_running: false, sql_running: false, master_host: '', master_port: 0, last_io_error: '', last_sql_error: '', gtid_io_pos: '',
    relay_applied: true, semi_sync_slave_active: false, semi_sync_master_enabled: false, semi_sync_master_clients: 0, master_reachable: false,
    supervisor_restarts: 0, desired_state: 'running', fenced: false, supervisor_restarted_at_ms: 0, ...over,
  };
}

function setUp(opts: { olderAgents?: boolean } = {}) {
  const c = cluster('1', 'ready', [MASTER, STANDBY], []);
  c.accounts = { storage: storedAccount({ user: 'u', password: 'p' }) } as typeof c.accounts;
  const state = stateWith(c);
  const proposed: Command[] = [];
  let clock = 1_000_000;
  let masterNow = status({});
  const statusCalls: string[] = [];
  const streams: Array<{ host: string; ports: number[]; beat: (b: MariaDbHaWatchBeat) => void; signal: AbortSignal }> = [];
  const agents = {
    mariadbHa: (host: string) => ({
      async replicationStatus(port: number) {
        statusCalls.push(`${host}:${port}`);
        return host === MASTER[1] ? masterNow : status({ port, read_only: true, is_replica: true, io_running: true, sql_running: true, master_reachable: true });
      },
      watchStatus(ports: number[], intervalMs: number, onBeat: (b: MariaDbHaWatchBeat) => void, signal: AbortSignal) {
        expect(intervalMs).toBe(INTERVAL_MS);
        if (opts.olderAgents) return Promise.reject(new AgentCallError(`${host}:58100`, 12, 'unknown method WatchStatus'));
        streams.push({ host, ports, beat: onBeat, signal });
        return new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      },
    }),
  } as unknown as Agents;
  const detector = new ShardFailureDetector({
    store: { state: () => state, propose: async (cmd: Command) => (proposed.push(cmd), { ok: true, value: { jobId: '9' } }) },
    agents,
    secrets: testSecretBox(),
    logger: silentLogger(),
    intervalMs: INTERVAL_MS,
    probeTimeoutMs: 300,
    sqlPingAfterMs: 50,
    now: () => clock,
  });
  const failovers = () => proposed.filter((p) => p.kind === 4 && p.jobType === 'shard_failover') as Extract<Command, { kind: 4 }>[];
  /** The master's agent sends a beat measuring `s`. */
  const beat = (s: MariaDbHaStatusReply) => {
    const open = streams.filter((x) => x.host === MASTER[1] && !x.signal.aborted);
    expect(open).toHaveLength(1);
    open[0].beat({ statuses: [s] });
  };
  return {
    detector, failovers, beat, streams, statusCalls,
    setMaster: (s: MariaDbHaStatusReply) => void (masterNow = s),
    advance: (ms: number) => void (clock += ms),
  };
}

describe('shard failure detector reading WatchStatus beats', () => {
  it('opens one stream per host with masters, for its masters only, and judges from fresh beats without calling the agent', async () => {
    const w = setUp();
    await w.detector.checkAll(); // streams open; no beat yet: asked directly
    expect(w.streams.map((s) => [s.host, s.ports])).toEqual([[MASTER[1], [MASTER[2]]]]);
    expect(w.statusCalls).toEqual([`${MASTER[1]}:${MASTER[2]}`]);
    for (let round = 0; round < 5; round++) {
      w.advance(INTERVAL_MS);
      w.beat(status({}));
      await w.detector.checkAll();
    }
    expect(w.statusCalls).toHaveLength(1); // no call after the first beat
    expect(w.detector.judgedFromBeats).toBe(5);
    expect(w.streams).toHaveLength(1); // the same stream throughout
    expect(w.failovers()).toHaveLength(0);
  });

  it('fails over at once on a beat that says mariadbd is not running, without a call', async () => {
    const w = setUp();
    await w.detector.checkAll();
    w.advance(INTERVAL_MS);
    w.beat(status({ running: false, answering: false, reason: 'no mariadbd process' }));
    await w.detector.checkAll();
    expect(w.failovers().map((f) => f.paras.reason)).toEqual([expect.stringMatching(/mariadbd is not running \(no mariadbd process\)/)]);
    expect(w.statusCalls).toHaveLength(1);
  });

  it('a running detector judges a beat that shows its master down at once, not at its next tick', async () => {
    const w = setUp();
    w.detector.start(); // a first round at once opens the stream; the next tick is 500 ms away
    await w.detector.checkAll();
    w.beat(status({}));
    w.beat(status({ running: false, answering: false, reason: 'no mariadbd process' }));
    for (let i = 0; i < 20 && w.failovers().length === 0; i++) await new Promise((r) => setImmediate(r));
    const failoversFromTheBeat = w.failovers().length;
    await w.detector.stop();
    expect(failoversFromTheBeat).toBe(1);
    expect(w.statusCalls).toHaveLength(1); // the first round's only: the verdict came from the beat
  });

  it('fails over on a beat that shows the agent restarted a master that died between two beats', async () => {
    const w = setUp();
    w.setMaster(status({ supervisor_restarts: 2 })); // restarted twice before this leader looked
    await w.detector.checkAll();
    w.beat(status({ supervisor_restarts: 2 }));
    await w.detector.checkAll();
    w.advance(INTERVAL_MS);
    w.beat(status({ supervisor_restarts: 3 }));
    await w.detector.checkAll();
    expect(w.failovers().map((f) => f.paras.reason)).toEqual([expect.stringMatching(/restarted mariadbd after it died \(restarts 2 -> 3\)/)]);
  });

  it('takes no stale beat as evidence: a stream gone quiet makes the detector ask the agent again, and see the failure', async () => {
    const w = setUp();
    await w.detector.checkAll();
    w.beat(status({})); // the last beat: the agent then goes quiet while the master dies
    w.setMaster(status({ running: false, answering: false, reason: 'no mariadbd process' }));
    w.advance(2 * INTERVAL_MS + 251);
    await w.detector.checkAll();
    expect(w.statusCalls).toHaveLength(2);
    expect(w.failovers()).toHaveLength(1);
  });

  it('replaces a stream gone quiet with a new one (a stream has no deadline: a dark link would keep it forever)', async () => {
    const w = setUp();
    await w.detector.checkAll();
    w.beat(status({}));
    w.advance(2 * INTERVAL_MS + 200); // still fresh
    await w.detector.checkAll();
    expect(w.streams.filter((s) => !s.signal.aborted)).toHaveLength(1);
    expect(w.detector.watches.opened).toBe(1);
    w.advance(100); // quiet past two intervals + 250 ms
    await w.detector.checkAll();
    expect(w.streams.map((s) => s.signal.aborted)).toEqual([true, false]);
    expect(w.detector.watches.opened).toBe(2);
  });

  it('asks each master of an agent older than WatchStatus every round, and offers it a stream again only after WATCH_RETRY_AFTER_MS', async () => {
    const w = setUp({ olderAgents: true });
    await w.detector.checkAll();
    await new Promise((r) => setImmediate(r)); // the refusal settles
    for (let round = 0; round < 3; round++) {
      w.advance(INTERVAL_MS);
      await w.detector.checkAll();
    }
    expect(w.statusCalls).toHaveLength(4);
    expect(w.detector.watches.opened).toBe(1);
    w.advance(WATCH_RETRY_AFTER_MS);
    await w.detector.checkAll();
    expect(w.detector.watches.opened).toBe(2);
  });

  it('closes every stream when it stops (a former leader holds none)', async () => {
    const w = setUp();
    await w.detector.checkAll();
    expect(w.detector.watches.size).toBe(1);
    await w.detector.stop();
    expect(w.streams.every((s) => s.signal.aborted)).toBe(true);
    expect(w.detector.watches.size).toBe(0);
  });
});
