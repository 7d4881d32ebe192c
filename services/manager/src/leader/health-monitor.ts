// Leader-only: probes every registered machine's agent, keeps the live reachability that
// get_machine_summary and /metrics report, and moves a machine to `dead` after its agent
// has been unreachable for `deadAfterMs`, and back to `running` when it answers again.
// A machine an operator set dead stays dead: only the monitor's own verdicts are undone.
//
// At fleet scale (1,000 hosts) a round must fit in its interval, or the verdicts come late:
//  - Rounds never overlap: a tick that finds the last round running starts none.
//  - The round waits for each probe at most its own deadline, under the interval, so a hung
//    or black-holed agent does not hold the round (and so the next tick) for the pool's 5 s
//    call deadline. The call itself runs on: an answer that comes late is still an answer
//    (a busy leader or agent is not an unreachable one), and reachability changes only when
//    the call settles. A host whose call is still out is not called again (calls to a hung
//    agent do not pile up), and it is judged dead on its silence so far like any other.
//  - A host that answered the last probe has an open connection: a Health call on it is
//    cheap, and all of them go at once. Any other host may need a new connection, a TLS
//    handshake that costs the leader milliseconds of CPU: at most `maxConnecting` of those
//    run at a time. Without that bound a new leader's first round opened 1,000 handshakes
//    at once, they outran the call deadline, the pool closed each timed-out channel, and the
//    next round started the same storm: every host was reported unreachable and then dead.
// The first round of a new leader is the costly one (a handshake per host); it is bounded
// by the host count / maxConnecting, and the verdicts it leads to still wait deadAfterMs.
// maxConnecting is 8, not more: a handshake costs the leader ~10 ms of CPU (bench:scale:probe,
// 9.8 s for 1,000), and with 32 under way a just-elected leader's gateway waited behind them:
// its first job was acknowledged 0.48-0.93 s after the election at 1,000 hosts, against
// 0.13-0.20 s with 8 (bench:scale; the first round took 9.6-10.8 s instead of 8.8 s).
//
// A host is heard through one long-lived Agent.Watch stream, on which its agent beats every
// interval; a round reads the last beat of each host instead of calling it. A unary Health
// call per host per round cost the leader ~28 KB of grpc-js garbage each (call objects,
// metadata, an HTTP/2 stream): at 1,000 hosts, scavenges of 20-55 ms every half second,
// which were most of a 1,000-host leader's event-loop blocks. A beat on an open stream is a
// few hundred bytes. A watch silent for longer than an interval plus the probe deadline is
// ended (a wedged agent or a dead link: the pool opens a fresh channel for the next one) and
// its host read unreachable; an agent older than Watch (UNIMPLEMENTED) is polled with Health
// as before, and asked for a watch again after WATCH_RETRY_AFTER_MS (it may be upgraded).

import { AgentUnreachableError, isUnimplemented, type WithAgent } from '@kcm/agent-api';
import { CALLS_STARTED_PER_TURN, eachAtMost, startInSlices, type Logger } from '@kcm/common';
import { CommandKind } from '../meta/commands';
import type { MetaStore } from '../meta/store';

export interface HealthMonitorOptions {
  store: MetaStore;
  withAgent: WithAgent;
  logger: Logger;
  intervalMs: number;
  deadAfterMs: number;
  /**
   * How long one probe may take before the host counts as not answering (ms). Default: 3/4
   * of the interval, so a round with hung agents still ends before the next tick, but at
   * least 500 ms (a new TLS connection on a loaded leader takes a good part of that).
   */
  probeTimeoutMs?: number;
  /** Probes of hosts that may need a new connection (a TLS handshake) in flight at once; default 8. */
  maxConnecting?: number;
  now?: () => number;
  /** Told when a round starts, and its wall time when it ends (the round-time metric, benches). */
  onRoundStart?: () => void;
  onRoundEnd?: (seconds: number) => void;
  /** Told when a tick finds the previous round still running (that tick starts none). */
  onTickSkipped?: () => void;
}

export interface Reachability {
  reachable: boolean;
  /** Last time the agent answered (ms), or null if never seen by this leader. */
  lastSeenMs: number | null;
}

/** How long a host whose agent is older than Watch is polled before it is asked for a watch again. */
export const WATCH_RETRY_AFTER_MS = 10 * 60_000;

/** A host's open Agent.Watch stream. */
interface OpenWatch {
  openedMs: number;
  /** When its last beat came, or null before the first. */
  lastBeatMs: number | null;
  /** Set when the opening round stopped waiting for the first beat: that beat is recorded when it comes. */
  late: boolean;
  /** Set when the monitor ends it for its silence (ms silent). */
  endedSilentForMs?: number;
  stop: AbortController;
}

/** What a probe heard: when the agent was last heard (ms), false for a failure, 'pending' while waiting. */
type Heard = number | false | 'pending';

export class HealthMonitor {
  private timer: NodeJS.Timeout | null = null;
  private probing = false;
  private readonly seen = new Map<string, Reachability>();
  /** Hosts whose Health call has not settled yet (it may outlive its probe's deadline). */
  private readonly calling = new Set<string>();
  private readonly watches = new Map<string, OpenWatch>();
  /** Hosts whose agent answered Watch with UNIMPLEMENTED, and since when: polled with Health. */
  private readonly pollOnlySince = new Map<string, number>();
  /** When this leader started watching: a machine never seen is judged from then. */
  private watchingSince = 0;
  private readonly probeTimeoutMs: number;
  private readonly maxConnecting: number;

  constructor(private readonly opts: HealthMonitorOptions) {
    this.probeTimeoutMs = opts.probeTimeoutMs ?? Math.max(500, Math.floor((opts.intervalMs * 3) / 4));
    this.maxConnecting = opts.maxConnecting ?? 8;
  }

  start(): void {
    if (this.timer) return;
    this.watchingSince = this.now();
    this.timer = setInterval(() => void this.probeAll(), this.opts.intervalMs);
    this.timer.unref();
    void this.probeAll();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    // A former leader holds no streams: each agent stops beating for it.
    for (const w of this.watches.values()) w.stop.abort();
    this.watches.clear();
  }

  /** Hosts heard through an open Watch stream (tests, metrics). */
  get watching(): number {
    return this.watches.size;
  }

  /** Live reachability of a host's agent as of the last probe; undefined before the first. */
  reachability(hostaddr: string): Reachability | undefined {
    return this.seen.get(hostaddr);
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  /** One round: probe each host once (a host registered as both types is one agent). */
  async probeAll(): Promise<void> {
    if (this.probing) {
      this.opts.onTickSkipped?.();
      return;
    }
    this.probing = true;
    this.opts.onRoundStart?.();
    const started = performance.now();
    try {
      const machineKeys = this.machineKeysByHost();
      const connected: string[] = [];
      const others: string[] = [];
      for (const hostaddr of machineKeys.keys()) (this.seen.get(hostaddr)?.reachable ? connected : others).push(hostaddr);
      const probe = (hostaddr: string) => this.probe(hostaddr, machineKeys.get(hostaddr) ?? []);
      await Promise.all([startInSlices(CALLS_STARTED_PER_TURN, connected, probe), eachAtMost(this.maxConnecting, others, probe)]);
    } finally {
      this.probing = false;
      this.opts.onRoundEnd?.((performance.now() - started) / 1000);
    }
  }

  /** The keys of each host's machine records, in one pass (not a pass per host: 1,000 hosts made that 2 million steps a round). */
  private machineKeysByHost(): Map<string, string[]> {
    const byHost = new Map<string, string[]>();
    for (const [key, m] of Object.entries(this.opts.store.state().machines)) {
      const keys = byHost.get(m.hostaddr);
      if (keys) keys.push(key);
      else byHost.set(m.hostaddr, [key]);
    }
    return byHost;
  }

  private async probe(hostaddr: string, machineKeys: string[]): Promise<void> {
    const before = this.seen.get(hostaddr);
    // Silent since lastSeenMs already (its last call failed, or is still out): judged at the
    // round's start too, or the verdict could wait for one more probe deadline.
    if (before && (!before.reachable || this.waitingOn(hostaddr))) await this.judge(hostaddr, machineKeys, false, before.lastSeenMs);
    const heard = await this.hear(hostaddr);
    // Still waiting: no answer since lastSeenMs, and no new reading either way.
    const lastSeenMs = heard === 'pending' ? (this.seen.get(hostaddr)?.lastSeenMs ?? null) : this.record(hostaddr, heard);
    await this.judge(hostaddr, machineKeys, typeof heard === 'number', lastSeenMs);
  }

  /** A call or a first beat is still awaited from the host. */
  private waitingOn(hostaddr: string): boolean {
    return this.calling.has(hostaddr) || this.watches.get(hostaddr)?.lastBeatMs === null;
  }

  /** The host's reading this round: from its watch (opened if need be), or a Health call for an agent older than Watch. */
  private async hear(hostaddr: string): Promise<Heard> {
    const pollOnlySince = this.pollOnlySince.get(hostaddr);
    if (pollOnlySince !== undefined && this.now() - pollOnlySince < WATCH_RETRY_AFTER_MS) return this.answers(hostaddr);
    const open = this.watches.get(hostaddr);
    return open ? this.lastBeat(hostaddr, open) : this.openWatch(hostaddr);
  }

  /** Reads an open watch: its last beat if recent enough; a silent one is ended and read as a failure. */
  private lastBeat(hostaddr: string, w: OpenWatch): Heard {
    const silentForMs = this.now() - (w.lastBeatMs ?? w.openedMs);
    if (silentForMs <= this.opts.intervalMs + this.probeTimeoutMs) return w.lastBeatMs ?? 'pending';
    w.endedSilentForMs = silentForMs;
    this.watches.delete(hostaddr);
    w.stop.abort();
    return false;
  }

  /** Opens the host's watch and waits for its first beat at most the probe deadline (a later first beat is recorded when it comes). */
  private async openWatch(hostaddr: string): Promise<Heard> {
    const w: OpenWatch = { openedMs: this.now(), lastBeatMs: null, late: false, stop: new AbortController() };
    this.watches.set(hostaddr, w);
    let firstHeard!: (heard: Heard | 'older') => void;
    const first = new Promise<Heard | 'older'>((resolve) => (firstHeard = resolve));
    const onBeat = () => {
      const at = this.now();
      if (w.lastBeatMs === null && w.late && this.timer) this.record(hostaddr, at);
      w.lastBeatMs = at;
      firstHeard(at);
    };
    this.opts
      .withAgent(hostaddr, (agent) =>
        agent.watch(this.opts.intervalMs, onBeat, w.stop.signal).then(() => {
          // Ended for its silence: the link may be dead, so the pool opens a fresh channel for the next one.
          if (w.endedSilentForMs !== undefined) throw new AgentUnreachableError(agent.address, new Error(`no beat for ${w.endedSilentForMs} ms`));
        }),
      )
      .catch((err: unknown) => {
        if (this.watches.get(hostaddr) === w) this.watches.delete(hostaddr);
        if (isUnimplemented(err)) {
          this.pollOnlySince.set(hostaddr, this.now());
          return firstHeard('older');
        }
        firstHeard(false);
        // A stream that broke after the monitor had its reading: unreachable until a new watch hears it.
        if (w.endedSilentForMs === undefined && (w.lastBeatMs !== null || w.late) && this.timer) this.record(hostaddr, false);
      });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'pending'>((resolve) => {
      timer = setTimeout(() => resolve('pending'), this.probeTimeoutMs);
    });
    try {
      const heard = await Promise.race([first, deadline]);
      if (heard === 'pending') w.late = true;
      return heard === 'older' ? this.answers(hostaddr) : heard;
    } finally {
      clearTimeout(timer);
    }
  }

  private async judge(hostaddr: string, machineKeys: string[], reachable: boolean, lastSeenMs: number | null): Promise<void> {
    // Read now, not at the round's start: an operator's verdict in between must be seen.
    const machines = this.opts.store.state().machines;
    const records = machineKeys.map((key) => machines[key]).filter((m) => m !== undefined);
    const silentFor = this.now() - (lastSeenMs ?? this.watchingSince);
    if (!reachable && silentFor >= this.opts.deadAfterMs && records.some((m) => m.nodeStats === 'running')) {
      await this.setStatus(hostaddr, 'dead', silentFor);
    } else if (reachable && records.some((m) => m.nodeStats === 'dead' && m.nodeStatsSetBy === 'health')) {
      await this.setStatus(hostaddr, 'running', 0);
    }
  }

  /** Records a reading (when the agent was heard, or false); returns the host's lastSeenMs. */
  private record(hostaddr: string, heard: number | false): number | null {
    const before = this.seen.get(hostaddr);
    const reachable = heard !== false;
    const lastSeenMs = reachable ? heard : (before?.lastSeenMs ?? null);
    this.seen.set(hostaddr, { reachable, lastSeenMs });
    if (reachable !== before?.reachable) this.opts.logger.info({ hostaddr, reachable }, 'agent reachability changed');
    return lastSeenMs;
  }

  /** When the host's agent answered Health (false: it did not), or 'pending' when the call outlives the probe's deadline (it is recorded when it settles). */
  private async answers(hostaddr: string): Promise<Heard> {
    if (this.calling.has(hostaddr)) return 'pending';
    this.calling.add(hostaddr);
    const call = this.opts.withAgent(hostaddr, (agent) => agent.health()).then(
      () => this.now(),
      () => false as const,
    );
    let late = false;
    void call.then((heard) => {
      this.calling.delete(hostaddr);
      if (late && this.timer) this.record(hostaddr, heard);
    });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'pending'>((resolve) => {
      timer = setTimeout(() => {
        late = true;
        resolve('pending');
      }, this.probeTimeoutMs);
    });
    try {
      return await Promise.race([call, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async setStatus(hostaddr: string, nodeStats: 'running' | 'dead', silentForMs: number): Promise<void> {
    try {
      await this.opts.store.propose({ kind: CommandKind.MachineStatusSet, at: this.now(), hostaddr, nodeStats, reason: 'health' });
      this.opts.logger.warn({ hostaddr, nodeStats, silentForMs }, 'machine status changed by health monitor');
    } catch (err) {
      // Lost leadership or no quorum: the next leader's monitor decides.
      this.opts.logger.debug({ err, hostaddr }, 'could not record machine status');
    }
  }
}
