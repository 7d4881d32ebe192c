// A job is its validation plus an ordered list of named, idempotent steps. Each finished
// step commits its output; a new leader resumes the job at its first unfinished step, so
// a step may run again only if it had not committed, and must find its own work done.
//
// Step outputs are typed per job: a job declares an outputs interface keyed by step name
// (`O`), each step's `name` is a key of it and its `run` returns that key's type, and later
// steps and `result` read `ctx.outputs[name]` with that type, no cast. The runner still
// records each output in the replicated job record by step index and rebuilds the map by
// name on resume (runner.ts), so jobs started by an older kcm read what they recorded.

import type { Logger } from '@kcm/common';
import type { AsyncJobType, KcmError, ParasOf, ResultOf } from '@kcm/protocol';
import type { WithAgent, Agents } from '@kcm/agent-api';
import type { Command } from '../../meta/commands';
import type { ApplyOutcome } from '../../meta/outcome';
import type { MetaState } from '../../meta/state';
import type { SecretBox } from '../../secrets/secret-box';
import type { GroupProtocol } from '../../group/member-versions';

/** What every step acts through, the same for every job family (given to the runner once). */
export interface StepServices {
  /** Commits a command; resolves once applied here, with the state machine's outcome. */
  propose(cmd: Command): Promise<ApplyOutcome>;
  /** The engine agents (MariaDB, PostgreSQL, cgroups) of each host. */
  agents: Agents;
  /** The host agents' own calls (host facts, directories, health). */
  withAgent: WithAgent;
  logger: Logger;
  /** The manager's clock (ms since the epoch): the `at` of every command a step proposes. */
  now(): number;
  /** Seals new passwords and opens stored ones for the agent calls that need them. */
  secrets: SecretBox;
  /** The manager group's kcm builds, for group/protocol-gate.ts's requireGroupProtocol (absent in unit tests: one build). */
  groupProtocol?: GroupProtocol;
}

export interface StepContext<P = unknown, O extends object = {}> extends StepServices {
  jobId: string;
  paras: P;
  /** Outputs of the steps before this one, by step name (a step reads only steps that precede it). */
  outputs: Readonly<O>;
  /** The replicated state as of now (read-only: mutate only by proposing commands). */
  state(): MetaState;
  /** Records progress of a long step (units done out of total); visible in get_status. */
  progress(unitsDone: number, unitsTotal: number): Promise<void>;
  /** Aborted when this member loses leadership: stop promptly, the next leader resumes. */
  signal: AbortSignal;
  /**
   * Runs `place` (plan new instances on ctx.state(), then commit the plan) in its turn: no
   * other job's placement is between its plan and its commit meanwhile, so every plan sees
   * the placements before it (placement-turns.ts). Every step that places instances uses it.
   */
  placeInTurn<T>(place: () => Promise<T>): Promise<T>;
}

/** One step of a job whose outputs are `O`: named by a key of `O`, returning that key's type. */
export type JobStep<P, O extends object> = {
  [K in keyof O & string]: {
    name: K;
    /** Must be idempotent: re-running it after a crash finds its work done and succeeds. */
    run(ctx: StepContext<P, O>): Promise<O[K]>;
  };
}[keyof O & string];

/**
 * `P` the job's paras as committed, `O` its step outputs by step name, `R` its result
 * attachment (the protocol's ResultOf<jobType>, checked by the registry).
 */
export interface JobDefinition<P = any, O extends object = any, R = unknown> {
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
  /**
   * The paras with their secrets sealed (an S3 secret key), by the submitting member before
   * they enter the log (secrets/secret-box.ts): the job's steps see them sealed. Absent: none.
   */
  sealParas?(paras: P, secrets: SecretBox): P;
  /** Jobs with the same key run one at a time in submission order (e.g. `cluster:7`); `state` is the one validate saw. */
  lockKey(paras: P, state: MetaState): string | null;
  steps(paras: P): JobStep<P, O>[];
  /** The attachment of the finished job, from the step outputs. */
  result(outputs: O, paras: P): R;
  /**
   * What a dry run shows beyond the steps: where the job would place instances, with ports,
   * or what it would remove (jobs/dry-run.ts). Called after validate and resolve; pure.
   */
  dryRunPlan?(paras: P, state: MetaState): Record<string, unknown>;
  /**
   * Undo what the finished steps created after a later step failed. Resolves to a note for
   * the job's error when something could not be undone now (what is left, and where; it is
   * recorded and finished later), or to nothing when all was undone.
   */
  rollback?(ctx: StepContext<P, O>, failedStep: string, error: KcmError): Promise<string | undefined | void>;
}

/**
 * The definition of async job type T: the protocol's paras and result for T, its own step
 * outputs `O`; `P` narrows the paras when resolve() fills a field in (delete_cluster).
 */
export type JobOf<T extends AsyncJobType, O extends object, P extends ParasOf<T> = ParasOf<T>> = JobDefinition<P, O, ResultOf<T>> & { jobType: T };
