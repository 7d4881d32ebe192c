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

import type { WithAgent } from '@kcm/agent-api';
import { CALLS_STARTED_PER_TURN, eachAtMost, startInSlices, type Logger } from '@kcm/common';
import { CommandKind } from './meta/commands';
import type { MetaStore } from './meta/store';

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
  /** Probes of hosts that may need a new connection (a TLS handshake) in flight at once; default 32. */
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

export class HealthMonitor {
  private timer: NodeJS.Timeout | null = null;
  private probing = false;
  private readonly seen = new Map<string, Reachability>();
  /** Hosts whose Health call has not settled yet (it may outlive its probe's deadline). */
  private readonly calling = new Set<string>();
  /** When this leader started watching: a machine never seen is judged from then. */
  private watchingSince = 0;
  private readonly probeTimeoutMs: number;
  private readonly maxConnecting: number;

  constructor(private readonly opts: HealthMonitorOptions) {
    this.probeTimeoutMs = opts.probeTimeoutMs ?? Math.max(500, Math.floor((opts.intervalMs * 3) / 4));
    this.maxConnecting = opts.maxConnecting ?? 32;
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
    if (before && (!before.reachable || this.calling.has(hostaddr))) await this.judge(hostaddr, machineKeys, false, before.lastSeenMs);
    const answered = await this.answers(hostaddr);
    // Still waiting: no answer since lastSeenMs, and no new reading either way.
    const lastSeenMs = answered === 'pending' ? (this.seen.get(hostaddr)?.lastSeenMs ?? null) : this.record(hostaddr, answered);
    await this.judge(hostaddr, machineKeys, answered === true, lastSeenMs);
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

  /** Records a settled call's reading; returns the host's lastSeenMs. */
  private record(hostaddr: string, reachable: boolean): number | null {
    const before = this.seen.get(hostaddr);
    const lastSeenMs = reachable ? this.now() : (before?.lastSeenMs ?? null);
    this.seen.set(hostaddr, { reachable, lastSeenMs });
    if (reachable !== before?.reachable) this.opts.logger.info({ hostaddr, reachable }, 'agent reachability changed');
    return lastSeenMs;
  }

  /** Whether the host's agent answered Health, or 'pending' when the call outlives the probe's deadline (it is recorded when it settles). */
  private async answers(hostaddr: string): Promise<boolean | 'pending'> {
    if (this.calling.has(hostaddr)) return 'pending';
    this.calling.add(hostaddr);
    const call = this.opts.withAgent(hostaddr, (agent) => agent.health()).then(
      () => true,
      () => false,
    );
    let late = false;
    void call.then((reachable) => {
      this.calling.delete(hostaddr);
      if (late && this.timer) this.record(hostaddr, reachable);
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
