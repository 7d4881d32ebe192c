// Leader-only: probes every registered machine's agent, keeps the live reachability that
// get_machine_summary and /metrics report, and moves a machine to `dead` after its agent
// has been unreachable for `deadAfterMs`, and back to `running` when it answers again.
// A machine an operator set dead stays dead: only the monitor's own verdicts are undone.

import type { WithAgent } from '@kcm/agent-api';
import type { Logger } from '@kcm/common';
import { CommandKind } from './meta/commands';
import type { MetaStore } from './meta/store';

export interface HealthMonitorOptions {
  store: MetaStore;
  withAgent: WithAgent;
  logger: Logger;
  intervalMs: number;
  deadAfterMs: number;
  now?: () => number;
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
  /** When this leader started watching: a machine never seen is judged from then. */
  private watchingSince = 0;

  constructor(private readonly opts: HealthMonitorOptions) {}

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
    if (this.probing) return;
    this.probing = true;
    try {
      const hosts = [...new Set(Object.values(this.opts.store.state().machines).map((m) => m.hostaddr))];
      await Promise.all(hosts.map((h) => this.probe(h)));
    } finally {
      this.probing = false;
    }
  }

  private async probe(hostaddr: string): Promise<void> {
    const before = this.seen.get(hostaddr);
    let reachable = true;
    try {
      await this.opts.withAgent(hostaddr, (agent) => agent.health());
    } catch {
      reachable = false;
    }
    const now = this.now();
    const lastSeenMs = reachable ? now : (before?.lastSeenMs ?? null);
    this.seen.set(hostaddr, { reachable, lastSeenMs });
    if (reachable !== before?.reachable) this.opts.logger.info({ hostaddr, reachable }, 'agent reachability changed');

    const records = Object.values(this.opts.store.state().machines).filter((m) => m.hostaddr === hostaddr);
    const silentFor = now - (lastSeenMs ?? this.watchingSince);
    if (!reachable && silentFor >= this.opts.deadAfterMs && records.some((m) => m.nodeStats === 'running')) {
      await this.setStatus(hostaddr, 'dead', silentFor);
    } else if (reachable && records.some((m) => m.nodeStats === 'dead' && m.nodeStatsSetBy === 'health')) {
      await this.setStatus(hostaddr, 'running', 0);
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
