// The vocabulary of the linearizability checker: operations, models and verdicts.
//
// A history is a list of operations, each with the logical time it was called and the
// logical time it returned. The checker asks: is there one total order of all operations,
// consistent with real time (if A returned before B was called, A comes first), in which
// the sequential model accepts every operation's observed output?

/**
 * One client operation.
 *
 * - `call` / `return` are logical timestamps on one clock shared by all clients (a global
 *   event counter is enough). `call <= return`. Equal timestamps count as concurrent: an
 *   operation that returns at t and one called at t may be ordered either way.
 * - Unknown outcome (Jepsen `:info`, a client timeout, a crash mid-request): set
 *   `return: Infinity` and `output: undefined`. The operation may then take effect at any
 *   moment after its call, or never. (Never is the same as "last of all": an operation
 *   ordered after every completed one can no longer be observed.)
 * - `output: undefined` with a finite `return` means "completed, result not observed":
 *   the model applies the operation's effect without checking a result.
 * - Operations that definitely did not happen (Jepsen `:fail`) must be left out.
 */
export interface Operation<I, O> {
  /** Who issued it; used only in reports (a client issues one operation at a time). */
  clientId: number;
  input: I;
  call: number;
  /** What the client saw; undefined when the outcome is unknown or not observed. */
  output: O | undefined;
  return: number;
}

/** What a model says about applying one operation to one state. */
export interface StepResult<S> {
  /** Whether a sequential object in `state` could have produced the observed output. */
  ok: boolean;
  /** The state after the operation (ignored when `ok` is false). */
  state: S;
}

/**
 * A sequential specification. States must be treated as immutable: `step` returns a new
 * state and never mutates its argument (the search keeps old states to backtrack to).
 */
export interface Model<S, I, O> {
  init(): S;
  /**
   * Apply `input` to `state`. `output` undefined means the result was not observed: the
   * model must then return ok and the state the operation would leave behind.
   */
  step(state: S, input: I, output: O | undefined): StepResult<S>;
  /**
   * True if an operation with this input and output leaves the state unchanged in every
   * state where it is legal (a read; a cas that reported failure). Optional but a large
   * speed-up: the search then linearizes such operations as soon as they are legal
   * instead of trying every order. Must be exact: a wrong `true` gives wrong verdicts.
   */
  isReadOnly?(input: I, output: O | undefined): boolean;
  /** State equality for memoization; defaults to `===`. Needed when states are objects. */
  equal?(a: S, b: S): boolean;
  /** A string that is equal for equal states; speeds up memoization of object states. */
  hash?(state: S): string;
  /**
   * Split a history into independent sub-histories (e.g. one per key). The history is
   * linearizable iff every partition is (linearizability is compositional).
   */
  partition?(history: Operation<I, O>[]): Operation<I, O>[][];
  /** Human-readable forms used by `formatReport`. */
  describeOperation?(input: I, output: O | undefined): string;
  describeState?(state: S): string;
}

export type Verdict = 'ok' | 'illegal' | 'unknown';

/** The outcome for one partition; debugging detail is present only when it is illegal. */
export interface PartitionReport<I, O> {
  index: number;
  /**
   * 'unknown': the time budget ran out before this partition was decided. 'skipped': not
   * finished because another partition had already proved the history illegal.
   */
  result: Verdict | 'skipped';
  operationCount: number;
  /** How many search steps (model calls) it took; a measure of how hard it was. */
  steps: number;
  /**
   * Illegal only: the longest sequence of operations the search managed to linearize,
   * in linearization order. The violation lies just after it.
   */
  longestLinearizablePrefix?: Operation<I, O>[];
  /**
   * Illegal only: after that prefix, the operations that were allowed to come next by
   * real time; the model rejected every one of them (or each led to a dead end).
   */
  stuckCandidates?: Operation<I, O>[];
}

export interface CheckResult<I, O> {
  /** 'illegal' if any partition is; else 'unknown' if any timed out; else 'ok'. */
  result: Verdict;
  partitions: PartitionReport<I, O>[];
}

export interface CheckOptions {
  /** Give up after this long (across all partitions) and answer 'unknown'. Default: none. */
  timeoutMs?: number;
  /**
   * Keep searching the other partitions after one is proved illegal, to report every
   * illegal partition. Default false: the verdict is settled by the first one.
   */
  exploreAllPartitions?: boolean;
}
