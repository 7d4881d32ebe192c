// The job runner: leader-only. It starts every runnable job (see runnableJobs), runs its
// steps in order, commits each step's output, and commits the job's end. Started and
// stopped with leadership in one place (leader/leadership.ts); on stop it aborts its jobs
// without finishing them, so the next leader resumes each at its first unfinished step.

import { KcmError, errorEntry, type ErrorName } from '@kcm/protocol';
import { flushLogSoon, type Logger } from '@kcm/common';
import { CommandKind, type Command } from '../../meta/commands';
import { runnableJobs } from '../../meta/jobs';
import type { ApplyOutcome } from '../../meta/outcome';
import type { JobRecord, JobResultRecord } from '../../meta/state';
import type { MetaStore } from '../../meta/store';
import { stepFailureOf } from './errors';
import { PlacementTurns } from './placement-turns';
import type { JobDefinition, StepContext, StepServices } from './workflow';

/** What the runner and the gateway look jobs up in, by canonical job type (only those kcm runs). */
export type JobRegistry = ReadonlyMap<string, JobDefinition>;

export interface RunnerHooks {
  /** Called after each step commits (metrics, tests that count step runs). */
  onStepDone?(job: JobRecord, step: string, durationMs: number): void;
  onJobFinished?(job: JobRecord, outcome: JobResultRecord): void;
  /**
   * Resolves once the local state holds every entry committed before the call (a read
   * barrier). A new leader may not yet have applied steps its predecessor committed; the
   * runner resumes jobs only after this, so a committed step is never run again.
   */
  caughtUp?(): Promise<void>;
}

export interface RunnerOptions {
  /** Written into each JobFinished: how many finished jobs the history keeps (meta/jobs.ts). Absent: all. */
  keepFinishedJobs?: number;
}

/** Raised inside the runner when a commit fails because leadership moved on. */
class LeadershipLost extends Error {}

/** Pause before retrying a job whose commit failed while this member still leads. */
const COMMIT_RETRY_DELAY_MS = 200;

/** A step that failed only because its own proposal was not committed here (not a job failure). */
function isLeadershipError(err: unknown): boolean {
  return KcmError.is(err, 'NO_LEADER');
}

export class JobRunner {
  private readonly running = new Map<string, Promise<void>>();
  private abort: AbortController | null = null;
  /** The leadership term (its abort signal) for which the state has caught up. */
  private caughtUpFor: AbortSignal | null = null;
  private scanScheduled = false;
  /** Steps that place instances take turns (StepContext.placeInTurn). */
  private readonly placements = new PlacementTurns();

  private readonly logger: Logger;

  /**
   * `store` is what the runner commits job records through; `services` is what every step
   * acts through (its proposals, agents and logger; the runner logs there too).
   */
  constructor(
    private readonly store: MetaStore,
    private readonly registry: JobRegistry,
    private readonly services: StepServices,
    private readonly hooks: RunnerHooks = {},
    private readonly options: RunnerOptions = {},
  ) {
    this.logger = services.logger;
  }

  get active(): boolean {
    return this.abort !== null;
  }

  /** Leadership gained: resume every unfinished job. */
  start(): void {
    if (this.abort) return;
    const abort = (this.abort = new AbortController());
    this.logger.info('job runner started');
    void this.catchUp(abort.signal);
  }

  private async catchUp(signal: AbortSignal): Promise<void> {
    while (this.hooks.caughtUp && !signal.aborted) {
      try {
        await this.hooks.caughtUp();
        break;
      } catch (err) {
        this.logger.warn({ err }, 'job runner: state not caught up yet; retrying');
        await new Promise((resolve) => setTimeout(resolve, COMMIT_RETRY_DELAY_MS));
      }
    }
    if (signal.aborted) return;
    this.caughtUpFor = signal;
    this.notify();
  }

  /** Leadership lost (or shutdown): abort running steps and wait for them to settle. */
  async stop(): Promise<void> {
    if (!this.abort) return;
    this.abort.abort();
    this.abort = null;
    await Promise.allSettled([...this.running.values()]);
    this.logger.info('job runner stopped');
  }

  /**
   * Something changed (a job was submitted or finished): look for jobs to start. On the
   * next turn, not in a microtask: notify() comes from the apply of a JobSubmitted, and a
   * microtask would start the job (log lines, the first step's connect) before the
   * submitter's reply, which waits on the same commit, is even written.
   */
  notify(): void {
    if (!this.abort || this.scanScheduled) return;
    this.scanScheduled = true;
    setImmediate(() => {
      this.scanScheduled = false;
      this.scan();
    });
  }

  private scan(): void {
    const abort = this.abort;
    if (!abort || this.caughtUpFor !== abort.signal) return;
    for (const job of runnableJobs(this.store.state())) {
      if (this.running.has(job.id)) continue;
      let commitFailed = false;
      const run = this.runJob(job.id, abort.signal)
        .catch((err: unknown) => {
          commitFailed = err instanceof LeadershipLost;
          if (!commitFailed && !abort.signal.aborted) this.logger.error({ err, jobId: job.id }, 'job runner error');
        })
        .finally(async () => {
          // A commit refused at once (e.g. proposals dropped during a leadership transfer)
          // would otherwise retry in a microtask loop that starves timers and I/O, so the
          // transfer itself could never finish: wait a little before trying this job again.
          if (commitFailed && !abort.signal.aborted) await new Promise((resolve) => setTimeout(resolve, COMMIT_RETRY_DELAY_MS));
          this.running.delete(job.id);
          this.notify();
        });
      this.running.set(job.id, run);
    }
  }

  private async commit(cmd: Command, signal: AbortSignal): Promise<ApplyOutcome> {
    if (signal.aborted) throw new LeadershipLost();
    try {
      return await this.store.propose(cmd);
    } catch (err) {
      // Not committed (or unknown): leave the job to whoever leads next.
      throw new LeadershipLost(String(err));
    }
  }

  private async runJob(jobId: string, signal: AbortSignal): Promise<void> {
    const job = this.store.state().jobs[jobId];
    const def = this.registry.get(job.jobType);
    const log = this.logger.child({ jobId, jobType: job.jobType });
    if (!def) {
      await this.finish(job, failed('UNSUPPORTED', `job type ${job.jobType} has no runner in this kcm`), signal);
      return;
    }
    const steps = def.steps(job.paras);
    const names = steps.map((s) => s.name);
    if (job.stepNames.length > 0 && job.stepNames.join() !== names.join()) {
      const msg = `job was started with steps [${job.stepNames.join(', ')}] but this kcm defines [${names.join(', ')}]; it cannot be resumed safely`;
      await this.finish(job, failed('INTERNAL', msg), signal);
      return;
    }
    // Started already: by its JobSubmitted (runnable at submission) or by an earlier leader.
    if (job.status !== 'ongoing' || job.stepNames.length === 0) {
      await this.commit({ kind: CommandKind.JobStarted, at: this.services.now(), jobId, stepNames: names }, signal);
    }

    const outputs: Record<string, unknown> = {};
    // Outputs are kept by step name as the job's steps type them; the record holds them by index.
    const ctx = (step: number): StepContext<Record<string, unknown>, Record<string, unknown>> => ({
      ...this.services,
      jobId,
      paras: job.paras,
      outputs,
      state: () => this.store.state(),
      signal,
      placeInTurn: (place) => this.placements.take(place),
      progress: async (unitsDone, unitsTotal) => {
        await this.commit({ kind: CommandKind.JobProgress, at: this.services.now(), jobId, step, unitsDone, unitsTotal }, signal);
      },
    });

    for (let k = 0; k < steps.length; k++) {
      const recorded = this.store.state().jobs[jobId].stepOutputs;
      if (k in recorded) {
        outputs[names[k]] = recorded[k];
        continue;
      }
      const started = Date.now();
      // 'step started' and 'step done' are the outside record of step runs (the system tests
      // count them to prove no committed step runs twice): they stay at info, and are
      // written out before the step acts, so a member killed in the middle of a step leaves
      // them behind (the jobs started in one pass share that write).
      // cancel_job on a running job: it stops here, between steps, and rolls back like a failed step.
      const cancel = this.store.state().jobs[jobId].cancelRequested;
      if (!cancel) log.info({ step: names[k], stepNumber: k + 1, steps: steps.length }, 'step started');
      await flushLogSoon();
      let output: unknown;
      try {
        if (cancel) throw KcmError.of('CANCELED', `canceled${cancel.by === null ? '' : ` by ${cancel.by}`} (cancel_job) before this step started`);
        output = await steps[k].run(ctx(k));
      } catch (err) {
        // Leadership moving under a step's own proposal leaves the job to whoever leads next.
        if (signal.aborted || isLeadershipError(err)) throw new LeadershipLost();
        const failure = stepFailureOf(err);
        const info = `step ${k + 1} of ${steps.length} (${names[k]}) failed: ${failure.message}`;
        // A catalog error (agent unreachable, bad directories, ...) is an outcome, and its
        // message says it all; only an unexpected error is worth its stack in the log. With
        // no rollback to run, the 'job finished' line right after says the same (code and
        // info): this one is then a debug line.
        const errorCode = errorEntry(failure.errorName).code;
        if (failure.errorName === 'INTERNAL') log.warn({ step: names[k], err }, 'step failed');
        else if (def.rollback) log.warn({ step: names[k], error_code: errorCode, error: failure.message }, 'step failed');
        else log.debug({ step: names[k], error_code: errorCode, error: failure.message }, 'step failed');
        let rollbackNote = '';
        if (def.rollback) {
          try {
            const note = await def.rollback(ctx(k), names[k], err instanceof KcmError ? err : KcmError.of(failure.errorName, failure.message, { cause: err }));
            if (note) rollbackNote = `; ${note}`;
          } catch (rollbackErr) {
            // Its commits were not made here: whoever leads next resumes the job (and its rollback).
            if (signal.aborted || isLeadershipError(rollbackErr)) throw new LeadershipLost();
            log.error({ err: rollbackErr }, 'rollback failed');
            rollbackNote = `; rollback failed: ${rollbackErr instanceof Error ? rollbackErr.message : String(rollbackErr)}`;
          }
        }
        await this.finish(job, failed(failure.errorName, info + rollbackNote), signal);
        return;
      }
      const committed = await this.commit({ kind: CommandKind.JobStepDone, at: this.services.now(), jobId, step: k, output: output ?? null }, signal);
      outputs[names[k]] = committed.ok ? (committed.value as { output: unknown }).output : output;
      const durationMs = Date.now() - started;
      log.info({ step: names[k], durationMs }, 'step done'); // written out with the next step's or the job's end line
      this.hooks.onStepDone?.(this.store.state().jobs[jobId], names[k], durationMs);
    }
    await this.finish(job, { ok: true, errorCode: 0, errorInfo: '', attachment: def.result(outputs, job.paras) as Record<string, unknown> }, signal);
  }

  private async finish(job: JobRecord, outcome: JobResultRecord, signal: AbortSignal): Promise<void> {
    await this.commit({ kind: CommandKind.JobFinished, at: this.services.now(), jobId: job.id, outcome, keepFinished: this.options.keepFinishedJobs }, signal);
    this.logger.info({ jobId: job.id, jobType: job.jobType, ok: outcome.ok, errorCode: outcome.errorCode, errorInfo: outcome.errorInfo }, 'job finished');
    void flushLogSoon(); // a job's end is worth reading at once
    this.hooks.onJobFinished?.(this.store.state().jobs[job.id] ?? job, outcome);
  }
}

function failed(errorName: ErrorName, errorInfo: string): JobResultRecord {
  return { ok: false, errorCode: errorEntry(errorName).code, errorInfo, attachment: null };
}
