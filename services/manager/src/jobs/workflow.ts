// A job is its validation plus an ordered list of named, idempotent steps. Each finished
// step commits its output; a new leader resumes the job at its first unfinished step, so
// a step may run again only if it had not committed, and must find its own work done.

import type { KcmError } from '@kcm/protocol';
import type { MetaState } from '../meta/state';

export interface StepContext<P> {
  jobId: string;
  paras: P;
  /** Outputs of the steps before this one, by step name. */
  outputs: Record<string, unknown>;
  /** The replicated state as of now (read-only: mutate only by proposing commands). */
  state(): MetaState;
  /** Records progress of a long step (units done out of total); visible in get_status. */
  progress(unitsDone: number, unitsTotal: number): Promise<void>;
  /** Aborted when this member loses leadership: stop promptly, the next leader resumes. */
  signal: AbortSignal;
}

export interface JobStep<P> {
  name: string;
  /** Must be idempotent: re-running it after a crash finds its work done and succeeds. */
  run(ctx: StepContext<P>): Promise<unknown>;
}

export interface JobDefinition<P = Record<string, unknown>> {
  jobType: string;
  /**
   * Checks the paras against the replicated state before anything is committed;
   * throws a KcmError naming the field and what was wrong.
   */
  validate?(paras: P, state: MetaState): void;
  /**
   * The paras the job is committed with, after validate: names resolved to the ids the
   * lock key and the steps use (delete_cluster by cluster_name). Absent: the paras as sent.
   */
  resolve?(paras: P, state: MetaState): P;
  /** Jobs with the same key run one at a time in submission order (e.g. `cluster:7`). */
  lockKey(paras: P): string | null;
  steps(paras: P): JobStep<P>[];
  /** The attachment of the finished job, from the step outputs. */
  result(outputs: Record<string, unknown>, paras: P): Record<string, unknown>;
  /**
   * Undo what the finished steps created after a later step failed. Resolves to a note for
   * the job's error when something could not be undone now (what is left, and where; it is
   * recorded and finished later), or to nothing when all was undone.
   */
  rollback?(ctx: StepContext<P>, failedStep: string, error: KcmError): Promise<string | undefined | void>;
}
