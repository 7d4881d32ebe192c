// The health monitor's rounds at fleet scale, on a fake clock against a FAKE fleet of
// agents (a unit test: no process, no socket). The fake pool behaves as AgentPool does
// where it matters here: a call to a host with no open connection first pays a TLS
// handshake, handshakes share one CPU (each waits for those queued before it), a call
// fails at the pool's 5 s deadline, and a failed call closes the connection.
// Every case runs against both agent generations: agents that serve Agent.Watch (one stream
// per host, a beat per interval) and agents older than it (UNIMPLEMENTED: polled with Health).

import * as grpc from '@grpc/grpc-js';
import { silentLogger } from '@kcm/common';
import { AgentCallError, type AgentApi, type HealthReply, type WithAgent } from '@kcm/agent-api';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { HealthMonitor, type HealthMonitorOptions } from '../src/leader/health-monitor';
import { CommandKind } from '../src/meta/commands';
import { createManagerMetrics } from '../src/metrics';
import { LocalStore } from './helpers/local-store';

const POOL_DEADLINE_MS = 5000;

type Behaviour = 'answers' | 'silent' | 'hung' | 'slow';
/** Agents that serve Agent.Watch, or agents older than it. */
type Generation = 'watch' | 'older';

class FakeFleet {
  readonly behaviour = new Map<string, Behaviour>();
  private readonly connected = new Set<string>();
  private cpuFreeAt = 0;
  handshakes = 0;
  inFlight = 0;
  maxInFlightOpening = 0;
  private opening = 0;
  readonly callsInFlight = new Map<string, number>();
  maxCallsToOneHost = 0;

  watchesOpened = 0;

  constructor(private readonly handshakeCpuMs: number, private readonly callCpuMs = 0.2, private readonly generation: Generation = 'watch') {}

  /** Resolves after `ms` of the one shared CPU, behind the work queued before it. */
  private cpu(ms: number): Promise<void> {
    const start = Math.max(Date.now(), this.cpuFreeAt);
    this.cpuFreeAt = start + ms;
    return new Promise((r) => setTimeout(r, this.cpuFreeAt - Date.now()));
  }

  readonly withAgent: WithAgent = async (hostaddr, use) => {
    const n = (this.callsInFlight.get(hostaddr) ?? 0) + 1;
    this.callsInFlight.set(hostaddr, n);
    this.maxCallsToOneHost = Math.max(this.maxCallsToOneHost, n);
    const opening = !this.connected.has(hostaddr);
    if (opening) this.maxInFlightOpening = Math.max(this.maxInFlightOpening, ++this.opening);
    // A connection being opened counts until it is open (a watch lasts long after that).
    let stillOpening = opening;
    const opened = () => {
      if (stillOpening) this.opening--;
      stillOpening = false;
    };
    try {
      const agent = {
        address: hostaddr,
        health: () => this.health(hostaddr, opening),
        watch: (intervalMs: number, onBeat: (r: HealthReply) => void, signal: AbortSignal) => this.watch(hostaddr, opening, opened, intervalMs, onBeat, signal),
      };
      return await use(agent as unknown as AgentApi);
    } catch (err) {
      this.connected.delete(hostaddr); // the pool retires a client whose agent did not answer
      throw err;
    } finally {
      opened();
      this.callsInFlight.set(hostaddr, this.callsInFlight.get(hostaddr)! - 1);
    }
  };

  /** Agent.Watch: beats once connected and then every interval; a silent host breaks the stream, a hung one keeps it open without a beat. */
  private async watch(hostaddr: string, opening: boolean, opened: () => void, intervalMs: number, onBeat: (r: HealthReply) => void, signal: AbortSignal): Promise<void> {
    if (this.generation === 'older') throw new AgentCallError(hostaddr, grpc.status.UNIMPLEMENTED, 'unknown method Watch');
    this.watchesOpened++;
    const behaviour = () => this.behaviour.get(hostaddr) ?? 'answers';
    if (behaviour() === 'slow') await new Promise((r) => setTimeout(r, 1800));
    if (opening) {
      this.handshakes++;
      await this.cpu(this.handshakeCpuMs);
    }
    await this.cpu(this.callCpuMs);
    if (behaviour() === 'silent') throw new Error(`${hostaddr}: UNAVAILABLE`);
    this.connected.add(hostaddr);
    opened();
    return new Promise<void>((resolve, reject) => {
      const beat = () => {
        if (behaviour() === 'silent') return finish(new Error(`${hostaddr}: UNAVAILABLE`));
        if (behaviour() !== 'hung') onBeat({ hostaddr } as HealthReply);
      };
      const timer = setInterval(beat, intervalMs);
      const finish = (err?: Error) => {
        clearInterval(timer);
        if (err) reject(err);
        else resolve();
      };
      if (signal.aborted) return finish();
      signal.addEventListener('abort', () => finish(), { once: true });
      beat();
    });
  }

  private health(hostaddr: string, opening: boolean): Promise<never> {
    const deadline = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${hostaddr}: DEADLINE_EXCEEDED`)), POOL_DEADLINE_MS));
    const answer = (async () => {
      const behaviour = this.behaviour.get(hostaddr) ?? 'answers';
      if (behaviour === 'hung') return new Promise<never>(() => {});
      if (behaviour === 'slow') await new Promise((r) => setTimeout(r, 1800)); // past the probe's deadline, within the pool's
      if (opening) {
        this.handshakes++;
        await this.cpu(this.handshakeCpuMs);
      }
      await this.cpu(this.callCpuMs);
      if (behaviour === 'silent') throw new Error(`${hostaddr}: UNAVAILABLE`);
      this.connected.add(hostaddr);
      return { hostaddr } as never;
    })();
    return Promise.race([answer, deadline]);
  }
}

async function fleetOf(count: number) {
  const store = new LocalStore();
  const hosts = Array.from({ length: count }, (_, i) => `10.1.${i >> 8}.${i & 0xff}`);
  for (const hostaddr of hosts) {
    await store.propose({
      kind: CommandKind.MachineRegistered, at: 0, hostaddr, machineType: 'storage', portLow: 5000, portHigh: 5100, rackId: 'r',
      datadir: '/d', logdir: '/l', walLogDir: '/w', compDatadir: '/c', totalMemMb: 1, totalCpuCores: 1, facts: null,
    });
  }
  return { store, hosts };
}

function monitorOf(store: LocalStore, fleet: FakeFleet, opts: Partial<HealthMonitorOptions> & { intervalMs: number; deadAfterMs: number }) {
  const rounds: number[] = [];
  let open = 0;
  let overlapping = 0;
  const monitor = new HealthMonitor({
    store, withAgent: fleet.withAgent, logger: silentLogger(),
    onRoundStart: () => {
      if (++open > 1) overlapping++;
    },
    onRoundEnd: (s) => {
      open--;
      rounds.push(s);
    },
    ...opts,
  });
  return { monitor, rounds, overlapping: () => overlapping };
}

const deadNow = (store: LocalStore, hostaddr: string) => store.s.machines[`${hostaddr}/storage`].nodeStats === 'dead';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe.each([
  ['agents that serve Watch', 'watch'],
  ['agents older than Watch (polled with Health)', 'older'],
] as const)('health probe rounds at fleet scale, %s', (_name, generation) => {
  it('a new leader behind costly TLS handshakes never reports an answering host unreachable or dead', async () => {
    // 200 hosts and 30 ms of CPU per handshake (1,000 hosts at 6 ms, as measured, in fewer
    // fake timers): all at once, the last ones finish 6 s later, past the 5 s call deadline.
    const { store, hosts } = await fleetOf(200);
    const fleet = new FakeFleet(30, 0.2, generation);
    const { monitor, rounds } = monitorOf(store, fleet, { intervalMs: 2000, deadAfterMs: 30_000 });
    const everUnreachable = new Set<string>();
    monitor.start();
    for (let t = 0; t < 40_000; t += 250) {
      await vi.advanceTimersByTimeAsync(250);
      for (const h of hosts) if (monitor.reachability(h)?.reachable === false) everUnreachable.add(h);
    }
    monitor.stop();
    expect(everUnreachable.size).toBe(0);
    expect(hosts.filter((h) => deadNow(store, h))).toEqual([]);
    expect(fleet.maxInFlightOpening).toBeLessThanOrEqual(8);
    expect(fleet.handshakes).toBe(200); // one per host, never again: no connection was dropped
    // The first round pays 200 handshakes one CPU after another; later rounds reuse the connections.
    expect(rounds[0]).toBeGreaterThan(5.9);
    expect(Math.max(...rounds.slice(1))).toBeLessThan(2);
  });

  it('with a hung agent among the hosts, a silenced host is marked dead within deadAfterMs plus one interval', async () => {
    const { store, hosts } = await fleetOf(20);
    const [hung, silenced] = hosts;
    const fleet = new FakeFleet(1, 0.2, generation);
    fleet.behaviour.set(hung, 'hung'); // accepts the call, never answers: only the pool's 5 s deadline ends it
    const intervalMs = 1000;
    const deadAfterMs = 7000;
    const { monitor, overlapping } = monitorOf(store, fleet, { intervalMs, deadAfterMs });
    monitor.start();
    await vi.advanceTimersByTimeAsync(3020); // the silenced host answered the round at 3 s
    fleet.behaviour.set(silenced, 'silent');
    const silencedAt = Date.now();
    while (!deadNow(store, silenced) && Date.now() - silencedAt < 30_000) await vi.advanceTimersByTimeAsync(25);
    monitor.stop();
    expect(deadNow(store, silenced)).toBe(true);
    expect(Date.now() - silencedAt).toBeLessThanOrEqual(deadAfterMs + intervalMs);
    expect(overlapping()).toBe(0);
  });

  it('a host that hangs is marked dead within deadAfterMs plus one interval, whatever the phase of its calls', async () => {
    // A hung agent's call outlives the probe deadline (1.5 s) to the pool's (5 s), so some
    // rounds find its call still out and others start a new one: the verdict must not wait
    // for a new call's probe deadline.
    const late: number[] = [];
    for (let deadAfterMs = 6000; deadAfterMs <= 12_000; deadAfterMs += 250) {
      const { store, hosts } = await fleetOf(3);
      const fleet = new FakeFleet(1, 0.2, generation);
      const { monitor } = monitorOf(store, fleet, { intervalMs: 2000, deadAfterMs });
      monitor.start();
      await vi.advanceTimersByTimeAsync(4010);
      fleet.behaviour.set(hosts[0], 'hung');
      const hungAt = Date.now();
      while (!deadNow(store, hosts[0]) && Date.now() - hungAt < 30_000) await vi.advanceTimersByTimeAsync(25);
      monitor.stop();
      if (Date.now() - hungAt > deadAfterMs + 2000) late.push(deadAfterMs);
    }
    expect(late).toEqual([]);
  });

  it('rounds never overlap, and a hung agent is never called again while its last call is out', async () => {
    const { store, hosts } = await fleetOf(50);
    const fleet = new FakeFleet(1, 0.2, generation);
    for (const h of hosts.slice(0, 5)) fleet.behaviour.set(h, 'hung');
    const { monitor, rounds, overlapping } = monitorOf(store, fleet, { intervalMs: 1000, deadAfterMs: 60_000 });
    monitor.start();
    await vi.advanceTimersByTimeAsync(20_000);
    monitor.stop();
    expect(overlapping()).toBe(0);
    expect(fleet.maxCallsToOneHost).toBe(1);
    // A hung agent costs a round its probe deadline (3/4 of the interval), not the pool's 5 s.
    expect(Math.max(...rounds)).toBeLessThan(1);
    expect(rounds.length).toBeGreaterThanOrEqual(20);
  });

  it('an answer that comes after the probe deadline is still an answer: the host never reads unreachable, and the round does not wait for it', async () => {
    const { store, hosts } = await fleetOf(10);
    const fleet = new FakeFleet(1, 0.2, generation);
    fleet.behaviour.set(hosts[0], 'slow');
    const { monitor, rounds } = monitorOf(store, fleet, { intervalMs: 2000, deadAfterMs: 30_000 });
    const readings = new Set<boolean | undefined>();
    monitor.start();
    for (let t = 0; t < 20_000; t += 100) {
      await vi.advanceTimersByTimeAsync(100);
      readings.add(monitor.reachability(hosts[0])?.reachable);
    }
    monitor.stop();
    expect(readings).not.toContain(false);
    expect(readings).toContain(true);
    expect(Math.max(...rounds)).toBeLessThan(1.6);
  });

  it('kcm_health_probe_round_seconds counts every round and its time', async () => {
    const registry = new Registry();
    const metrics = createManagerMetrics(registry, { raft: () => undefined, state: () => new LocalStore().s, health: () => undefined });
    metrics.observeHealthProbeRound(0.4);
    metrics.observeHealthProbeRound(3);
    const text = await registry.getSingleMetricAsString('kcm_health_probe_round_seconds');
    expect(text).toContain('kcm_health_probe_round_seconds_count 2');
    expect(text).toContain('kcm_health_probe_round_seconds_sum 3.4');
    expect(text).toContain('kcm_health_probe_round_seconds_bucket{le="0.5"} 1');
  });
});

describe('a round over connected hosts, on the real event loop', () => {
  it('with agents older than Watch, starts its calls a slice per event-loop turn, not 1,000 in one turn that holds the loop', async () => {
    vi.useRealTimers();
    const { store, hosts } = await fleetOf(1000);
    const fleet = new FakeFleet(0, 0, 'older');
    // An event-loop turn counter: a setImmediate chain, one step per turn.
    let turn = 0;
    let counting = true;
    const count = () => {
      turn++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    const startedInTurn = new Map<number, number>();
    const withAgent: typeof fleet.withAgent = (hostaddr, use) => {
      startedInTurn.set(turn, (startedInTurn.get(turn) ?? 0) + 1);
      return fleet.withAgent(hostaddr, use);
    };
    const monitor = new HealthMonitor({ store, withAgent, logger: silentLogger(), intervalMs: 60_000, deadAfterMs: 600_000 });
    await monitor.probeAll(); // the first round connects every host (32 handshakes at a time)
    expect(hosts.every((h) => monitor.reachability(h)?.reachable)).toBe(true);
    startedInTurn.clear();
    await monitor.probeAll(); // every host connected: all are called at once
    counting = false;
    expect([...startedInTurn.values()].reduce((a, b) => a + b, 0)).toBe(1000);
    expect(Math.max(...startedInTurn.values())).toBeLessThanOrEqual(50);
  });

  it('with agents that serve Watch, a round over connected hosts calls none of them: it reads the beats of their open streams', async () => {
    vi.useRealTimers();
    const { store, hosts } = await fleetOf(1000);
    const fleet = new FakeFleet(0, 0, 'watch');
    let calls = 0;
    const withAgent: typeof fleet.withAgent = (hostaddr, use) => {
      calls++;
      return fleet.withAgent(hostaddr, use);
    };
    const monitor = new HealthMonitor({ store, withAgent, logger: silentLogger(), intervalMs: 60_000, deadAfterMs: 600_000 });
    await monitor.probeAll(); // the first round opens a watch per host
    expect(hosts.every((h) => monitor.reachability(h)?.reachable)).toBe(true);
    expect(calls).toBe(1000);
    expect(monitor.watching).toBe(1000);
    await monitor.probeAll();
    await monitor.probeAll();
    expect(calls).toBe(1000);
    expect(fleet.watchesOpened).toBe(1000);
    expect(hosts.every((h) => monitor.reachability(h)?.reachable)).toBe(true);
    monitor.stop(); // a former leader holds no streams
    expect(monitor.watching).toBe(0);
  });
});
