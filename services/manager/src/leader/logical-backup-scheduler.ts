// Leader-only: runs the daily logical backups (meta/logical-backups.ts). Every round it
// looks at each schedule of a ready cluster; a schedule is due when its window is open and
// that window has no run yet, or when the run of its latest window was claimed but never
// finished (its leader died or lost leadership, or the dump failed and has attempts left).
// A due run is claimed in the replicated state first, then dumped, then finished with its
// backup set: at most one backup set per window, and a leader change loses none.
//
// The run starts at the first round inside the window (a round every intervalMs). A run
// taken over after its window closed is still finished, until the next window opens: late
// is better than lost. A run that keeps failing is finished as failed after MAX_ATTEMPTS.

import type { Logger } from '@kcm/common';
import { errorNameOf } from '../jobs/framework/errors';
import { CommandKind } from '../meta/commands';
import type { LogicalBackupSchedule } from '../meta/logical-backup-records';
import type { Clock, MetaStore } from '../meta/store';
import { PeriodicRounds } from './periodic-rounds';
import { dumpLogicalObject, type LogicalBackupDeps } from '../backup/logical-run';
import { latestWindow } from '../backup/logical-window';

export const DEFAULT_LOGICAL_BACKUP_INTERVAL_MS = 10_000;
export const MAX_ATTEMPTS = 5;

/** The run a schedule is due for at `nowMs`, if any: the window (by the day it opened) to claim. */
export function dueRun(schedule: LogicalBackupSchedule, nowMs: number): { windowDay: string; takeOver: boolean } | undefined {
  const latest = latestWindow(nowMs, schedule);
  const last = schedule.lastRun;
  if (last && last.windowDay > latest.windowDay) return undefined; // the clock went back: never run a window twice
  if (last && last.windowDay === latest.windowDay) {
    return last.finishedAt === null && last.attempts < MAX_ATTEMPTS ? { windowDay: latest.windowDay, takeOver: true } : undefined;
  }
  return nowMs < latest.closesAt ? { windowDay: latest.windowDay, takeOver: false } : undefined;
}

export interface LogicalBackupSchedulerOptions extends LogicalBackupDeps {
  store: MetaStore;
  /** This member's name, recorded with each claim. */
  member: string;
  now: Clock;
  intervalMs?: number;
}

export class LogicalBackupScheduler {
  private readonly loop: PeriodicRounds;
  private abort = new AbortController();

  constructor(private readonly opts: LogicalBackupSchedulerOptions) {
    this.loop = new PeriodicRounds(() => this.round(), opts.intervalMs ?? DEFAULT_LOGICAL_BACKUP_INTERVAL_MS);
  }

  start(): void {
    if (this.loop.started) return;
    this.abort = new AbortController();
    this.loop.start({ runAtOnce: true });
  }

  /** Stops the dump under way (its run stays claimed: the next leader takes it over). */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop.stop();
  }

  /** A schedule was added: while leading, look at once instead of at the next tick (a window may be open now). */
  notify(): void {
    // Called from apply: the round (which proposes) starts after it, never inside it.
    if (this.loop.started) setImmediate(() => this.loop.started && void this.loop.run());
  }

  /** One round now (a round under way is joined). */
  runDue(): Promise<void> {
    return this.loop.run();
  }

  private async round(): Promise<void> {
    const signal = this.abort.signal;
    const schedules = Object.values(this.opts.store.state().logicalBackups.schedules).sort((a, b) => a.key.localeCompare(b.key));
    for (const schedule of schedules) {
      if (signal.aborted) return;
      const cluster = this.opts.store.state().clusters[schedule.clusterId];
      if (!cluster || cluster.status !== 'ready') continue;
      const due = dueRun(schedule, this.opts.now());
      if (!due) continue;
      try {
        await this.runOnce(schedule, due.windowDay, signal);
      } catch (err) {
        this.opts.logger.warn({ err, schedule: schedule.key }, 'logical backup round could not record its run');
      }
    }
  }

  private async runOnce(schedule: LogicalBackupSchedule, windowDay: string, signal: AbortSignal): Promise<void> {
    const log = this.opts.logger.child({ schedule: schedule.key, window: windowDay });
    const claim = await this.opts.store.propose({ kind: CommandKind.LogicalBackupRunClaimed, at: this.opts.now(), scheduleKey: schedule.key, windowDay, claimedBy: this.opts.member });
    if (!claim.ok) {
      log.info({ refusal: claim.message }, 'logical backup run not claimed');
      return;
    }
    const { runId, attempts } = claim.value as { runId: string; attempts: number };
    log.info({ run: runId, attempt: attempts }, attempts > 1 ? 'logical backup run taken over' : 'logical backup run started');
    const state = this.opts.store.state();
    const cluster = state.clusters[schedule.clusterId];
    const takenAt = this.opts.now();
    let finish: { ok: true; set: { takenAt: number; parts: Awaited<ReturnType<typeof dumpLogicalObject>> } } | { ok: false; error: string };
    try {
      const parts = await dumpLogicalObject(this.opts, state, cluster, schedule, runId, signal);
      finish = { ok: true, set: { takenAt, parts } };
    } catch (err) {
      if (signal.aborted) return; // not ours to finish any more: the next leader takes it over
      const error = `${errorNameOf(err)}: ${err instanceof Error ? err.message : String(err)}`;
      log.warn({ run: runId, attempt: attempts, error }, 'logical backup run failed');
      if (attempts < MAX_ATTEMPTS) return; // claimed and unfinished: the next round tries again
      finish = { ok: false, error };
    }
    const done = await this.opts.store.propose({ kind: CommandKind.LogicalBackupRunFinished, at: this.opts.now(), scheduleKey: schedule.key, runId, ...finish });
    if (!done.ok) log.warn({ run: runId, refusal: done.message }, 'logical backup run not recorded');
  }
}
