// The agent's supervisor: every instance whose desired state is `running` (desired-state.ts)
// is checked every second and started again when its server process is gone, whether it
// crashed, was killed, or the host or the agent restarted. A restart runs under the
// capability's per-port lock, so it never interleaves with an Install, Stop, Remove or a
// rebuild that stops mariadbd on purpose; inside the lock the desired state is read again,
// so what Remove is deleting or Stop has stopped is never brought back.
//
// Backoff: the first restart is immediate. An instance that goes down again within
// `stableMs` of its last restart, or whose start fails, waits initialMs, 2x, 4x, ... up to
// maxMs before the next attempt; staying up for stableMs resets it. Each restart is logged
// and counted in the desired-state record (the probe replies report the count).

import type { Logger } from '@kcm/common';
import type { DesiredRecord, DesiredStates, SupervisedKind } from './desired-state';

/** How the supervisor reaches one engine's instances; each capability module registers one. */
export interface SupervisedEngine {
  kind: SupervisedKind;
  /** Runs `work` while no other command changes this instance (the capability's per-port lock). */
  exclusive<T>(port: number, work: () => Promise<T>): Promise<T>;
  /** The pid of the instance's running server, 0 when none runs. */
  runningPid(port: number): Promise<number>;
  /** Why the instance cannot be started now (not installed, data being replaced), or ''. */
  startBlocker(port: number): Promise<string>;
  /** Starts the server and waits until it serves; returns its pid. */
  start(port: number): Promise<number>;
}

export interface SupervisorOptions {
  desired: DesiredStates;
  logger: Logger;
  intervalMs?: number;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Up this long after a restart: the next crash is a fresh one (no backoff). */
  stableMs?: number;
  now?: () => number;
  /** Called after each restart (the agent puts the new process back into its cgroup). */
  onRestarted?(kind: SupervisedKind, port: number, pid: number): Promise<unknown>;
}

export interface InstanceCensus {
  kind: SupervisedKind;
  port: number;
  desired: DesiredRecord['desired'];
  /** Its server process runs now. */
  running: boolean;
  restarts: number;
}

interface Watch {
  /** Restarts in a row that did not stay up for stableMs, or starts that failed. */
  failures: number;
  nextAttemptAt: number;
  lastRestartAt: number | undefined;
  downSince: number | undefined;
  busy: boolean;
  /** Last reason logged for not restarting, so a lasting one is logged once. */
  blockedBy: string;
}

export class InstanceSupervisor {
  private readonly engines = new Map<SupervisedKind, SupervisedEngine>();
  private readonly watches = new Map<string, Watch>();
  private readonly inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private checking: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly opts: SupervisorOptions) {}

  get desired(): DesiredStates {
    return this.opts.desired;
  }

  register(engine: SupervisedEngine): void {
    this.engines.set(engine.kind, engine);
  }

  start(): void {
    if (this.timer || this.stopped) return;
    this.timer = setInterval(() => void this.checkAll(), this.opts.intervalMs ?? 1000);
    this.timer.unref();
    void this.checkAll();
  }

  /** Stops checking and waits for restarts under way (an agent shutting down must not leave one half done). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.checking;
    await this.idle();
  }

  /** Resolves once every restart under way has ended (tests, shutdown). */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }

  /** Restarts the supervisor made of this instance (0 when it never had to). */
  async restarts(kind: SupervisedKind, port: number): Promise<{ restarts: number; desired: string; lastRestartAtMs: number }> {
    const record = await this.opts.desired.get(kind, port).catch(() => undefined);
    const at = record?.lastRestartAt ? Date.parse(record.lastRestartAt) : 0;
    return { restarts: record?.restarts ?? 0, desired: record?.desired ?? '', lastRestartAtMs: Number.isFinite(at) ? at : 0 };
  }

  /**
   * Every instance with a desired state, with whether its server process runs now (measured
   * with the engine's own pid check, not read from the record): the agent's /metrics.
   */
  async census(): Promise<InstanceCensus[]> {
    const records = await this.opts.desired.list();
    return Promise.all(records.map(async (r) => {
      const pid = (await this.engines.get(r.kind)?.runningPid(r.port).catch(() => 0)) ?? 0;
      return { kind: r.kind, port: r.port, desired: r.desired, running: pid > 0, restarts: r.restarts };
    }));
  }

  /** One pass over every instance wanted running; a pass still under way makes this a no-op. */
  checkAll(): Promise<void> {
    if (this.checking) return this.checking;
    this.checking = (async () => {
      try {
        const records = (await this.opts.desired.list()).filter((r) => r.desired === 'running');
        const wanted = new Set(records.map((r) => `${r.kind}-${r.port}`));
        for (const [key, w] of this.watches) if (!wanted.has(key) && !w.busy) this.watches.delete(key);
        for (const record of records) await this.check(record);
      } catch (err) {
        this.opts.logger.error({ err }, 'supervisor pass failed');
      } finally {
        this.checking = null;
      }
    })();
    return this.checking;
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  private watch(record: DesiredRecord): Watch {
    const key = `${record.kind}-${record.port}`;
    let w = this.watches.get(key);
    if (!w) this.watches.set(key, (w = { failures: 0, nextAttemptAt: 0, lastRestartAt: undefined, downSince: undefined, busy: false, blockedBy: '' }));
    return w;
  }

  private backoff(failures: number): number {
    if (failures <= 0) return 0;
    const initial = this.opts.initialBackoffMs ?? 1000;
    return Math.min(this.opts.maxBackoffMs ?? 60_000, initial * 2 ** (failures - 1));
  }

  private async check(record: DesiredRecord): Promise<void> {
    const engine = this.engines.get(record.kind);
    const w = this.watch(record);
    if (!engine || w.busy || this.stopped) return;
    const now = this.now();
    if ((await engine.runningPid(record.port).catch(() => 0)) > 0) {
      w.downSince = undefined;
      if (w.lastRestartAt !== undefined && now - w.lastRestartAt >= (this.opts.stableMs ?? 60_000)) w.failures = 0;
      return;
    }
    if (w.downSince === undefined) {
      w.downSince = now;
      // Down again soon after our last restart: a crash loop, so wait before the next one.
      if (w.lastRestartAt !== undefined && now - w.lastRestartAt < (this.opts.stableMs ?? 60_000)) w.failures++;
      w.nextAttemptAt = now + this.backoff(w.failures);
    }
    if (now < w.nextAttemptAt) return;
    w.busy = true;
    const attempt = engine.exclusive(record.port, () => this.restart(engine, record, w)).catch((err: unknown) => this.opts.logger.error({ err }, 'supervisor restart failed')).finally(() => {
      w.busy = false;
      this.inFlight.delete(attempt);
    });
    this.inFlight.add(attempt);
  }

  /** Under the instance's lock: read the desired state again, then start it if still wanted and still down. */
  private async restart(engine: SupervisedEngine, record: DesiredRecord, w: Watch): Promise<void> {
    const log = this.opts.logger.child({ kind: record.kind, port: record.port });
    try {
      const current = await this.opts.desired.get(record.kind, record.port);
      if (current?.desired !== 'running' || this.stopped) return;
      if ((await engine.runningPid(record.port)) > 0) return;
      const blocker = await engine.startBlocker(record.port);
      if (blocker) {
        if (blocker !== w.blockedBy) log.warn({ reason: blocker }, 'instance is down and cannot be restarted yet');
        w.blockedBy = blocker;
        w.failures++;
        w.nextAttemptAt = this.now() + this.backoff(w.failures);
        return;
      }
      w.blockedBy = '';
      const downSince = w.downSince ?? this.now();
      log.warn({ down_ms: this.now() - downSince, attempt: w.failures + 1 }, 'instance is down; restarting it');
      const pid = await engine.start(record.port);
      w.lastRestartAt = this.now();
      w.downSince = undefined;
      const counted = await this.opts.desired.noteRestart(record.kind, record.port, new Date());
      log.warn({ pid, restarts: counted?.restarts, down_ms: this.now() - downSince }, 'instance restarted by the supervisor');
      await this.opts.onRestarted?.(record.kind, record.port, pid).catch((err: unknown) => log.warn({ err }, 'restarted instance could not rejoin its cgroup'));
    } catch (err) {
      w.failures++;
      w.nextAttemptAt = this.now() + this.backoff(w.failures);
      log.error({ err, retry_in_ms: this.backoff(w.failures) }, 'restarting the instance failed');
    }
  }
}
