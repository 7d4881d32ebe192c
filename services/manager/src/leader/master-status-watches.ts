// The shard failure detector's view of its masters through MariaDbHaAgent.WatchStatus: one
// stream per host that holds masters, on which the host's agent measures every one of them
// each interval. A detector round reads the latest beat instead of calling each master's
// agent: at 1,000 clusters that was 3,000 ReplicationStatus calls every 500 ms, each ~28 KB
// of grpc-js garbage on the leader, and rounds of 4.7 s against a 500 ms interval
// (bench:scale:failure). A beat is only evidence while it is fresh; without a fresh one the
// detector asks the agent directly, as it always did, so a silent stream never hides a
// failure: it only stops saving calls.
//
// A beat that shows a master down or restarted starts a round at once (onNews): the failover
// does not wait for the next tick. A host's stream is reopened when its set of masters
// changes, the round after it fails, and when it has been quiet too long.
// An agent older than WatchStatus (UNIMPLEMENTED) is asked per master, and offered a watch
// again after WATCH_RETRY_AFTER_MS (it may have been upgraded).

import { isUnimplemented, type Agents, type MariaDbHaStatusReply, type MariaDbHaWatchBeat } from '@kcm/agent-api';
import { CALLS_STARTED_PER_TURN, startInSlices, type Logger } from '@kcm/common';
import { WATCH_RETRY_AFTER_MS } from './health-monitor';

interface HostWatch {
  /** The ports it measures, sorted and joined: a different set means a new stream. */
  portsKey: string;
  openedMs: number;
  stop: AbortController;
  /** The last beat's status of each port, and when that beat came. */
  statuses: Map<number, MariaDbHaStatusReply>;
  beatAtMs: number | null;
}

export interface MasterStatusWatchesOptions {
  agents: Pick<Agents, 'mariadbHa'>;
  /** How often each agent measures its masters (the detector's interval). */
  intervalMs: number;
  /**
   * A stream without a beat for longer than this is replaced by a new one (a wedged agent, or
   * a link that went dark: a stream has no deadline, and nothing else would end it).
   */
  quietAfterMs: number;
  logger: Logger;
  now?: () => number;
  /**
   * Told when a beat brings news a round should judge now rather than at its next tick: an
   * installed master not running, or restarted by its agent's supervisor since the last beat.
   */
  onNews?: () => void;
}

export class MasterStatusWatches {
  private readonly hosts = new Map<string, HostWatch>();
  /** Hosts whose agent answered UNIMPLEMENTED, and since when. */
  private readonly olderSince = new Map<string, number>();
  /** Streams opened since start (tests, bench:scale:failure). */
  opened = 0;

  constructor(private readonly opts: MasterStatusWatchesOptions) {}

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  /** Keeps one stream open on each host for exactly its ports here; closes the streams of hosts not named. */
  async want(portsByHost: Map<string, number[]>): Promise<void> {
    for (const [hostaddr, w] of this.hosts) {
      if (!portsByHost.has(hostaddr)) this.close(hostaddr, w);
    }
    const toOpen: Array<[string, number[]]> = [];
    for (const [hostaddr, ports] of portsByHost) {
      const portsKey = [...ports].sort((a, b) => a - b).join(',');
      const open = this.hosts.get(hostaddr);
      if (open?.portsKey === portsKey && this.now() - (open.beatAtMs ?? open.openedMs) <= this.opts.quietAfterMs) continue;
      if (open) this.close(hostaddr, open);
      const olderSince = this.olderSince.get(hostaddr);
      if (olderSince !== undefined && this.now() - olderSince < WATCH_RETRY_AFTER_MS) continue;
      toOpen.push([hostaddr, ports]);
    }
    // Opening a stream costs about what a call does: a slice per turn, as rounds start their calls.
    await startInSlices(CALLS_STARTED_PER_TURN, toOpen, async ([hostaddr, ports]) => this.open(hostaddr, ports));
  }

  /** The status of the instance on (hostaddr, port) from a beat at most maxAgeMs old; undefined when there is none. */
  fresh(hostaddr: string, port: number, maxAgeMs: number): MariaDbHaStatusReply | undefined {
    const w = this.hosts.get(hostaddr);
    if (!w || w.beatAtMs === null || this.now() - w.beatAtMs > maxAgeMs) return undefined;
    return w.statuses.get(port);
  }

  /** Streams open now. */
  get size(): number {
    return this.hosts.size;
  }

  stop(): void {
    for (const [hostaddr, w] of this.hosts) this.close(hostaddr, w);
  }

  private open(hostaddr: string, ports: number[]): void {
    const w: HostWatch = { portsKey: [...ports].sort((a, b) => a - b).join(','), openedMs: this.now(), stop: new AbortController(), statuses: new Map(), beatAtMs: null };
    this.hosts.set(hostaddr, w);
    this.opened++;
    const onBeat = (beat: MariaDbHaWatchBeat) => {
      const before = w.statuses;
      w.statuses = new Map(beat.statuses.map((s) => [s.port, s]));
      w.beatAtMs = this.now();
      const news = beat.statuses.some((s) => {
        const was = before.get(s.port);
        return (s.installed && !s.running && was?.running !== false) || (was !== undefined && s.supervisor_restarts > was.supervisor_restarts);
      });
      if (news) this.opts.onNews?.();
    };
    Promise.resolve()
      .then(() => this.opts.agents.mariadbHa(hostaddr).watchStatus(ports, this.opts.intervalMs, onBeat, w.stop.signal))
      .catch((err: unknown) => {
        if (isUnimplemented(err)) this.olderSince.set(hostaddr, this.now());
        else this.opts.logger.debug({ err, hostaddr }, 'shard masters watch ended; reopened next round');
      })
      .finally(() => {
        if (this.hosts.get(hostaddr) === w) this.hosts.delete(hostaddr);
      });
  }

  private close(hostaddr: string, w: HostWatch): void {
    w.stop.abort();
    if (this.hosts.get(hostaddr) === w) this.hosts.delete(hostaddr);
  }
}
