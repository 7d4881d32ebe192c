// Entry point of the checker: validates a history, splits it into partitions and runs one
// search per partition, in turns.
//
// Taking turns matters for histories that are not linearizable: one illegal partition
// decides the verdict, and proving a partition illegal means exhausting its search space,
// which can cost millions of steps on one partition and thousands on another. Round-robin
// finds the cheap witness first (porcupine gets the same effect from running partitions in
// parallel and cancelling the rest on the first failure).

import type { CheckOptions, CheckResult, Model, Operation, PartitionReport, Verdict } from './model';
import { LinearizationSearch } from './search';

/** Steps an unfinished partition gets per turn (some milliseconds); the clock is read after each turn. */
const STEPS_PER_TURN = 10_000;

function assertWellFormed(ops: readonly Operation<unknown, unknown>[]): void {
  for (const op of ops) {
    // Checked strictly: a history sent through JSON turns Infinity into null, which would
    // otherwise compare as 0 and silently change the verdict.
    const returnOk = Number.isFinite(op.return) || op.return === Infinity;
    if (!Number.isFinite(op.call) || !returnOk || op.call > op.return) {
      throw new RangeError(`operation of client ${op.clientId} has call ${op.call} and return ${op.return}; need a finite call <= return (Infinity for an unknown outcome)`);
    }
  }
}

/**
 * Decide whether `history` is linearizable with respect to `model`.
 *
 * The history is split with `model.partition` when the model has one (e.g. per key) and
 * each part is searched independently. The result is 'illegal' if some part is not
 * linearizable, 'unknown' if the time budget ran out first, else 'ok'. Illegal parts carry
 * the longest linearizable prefix found and the operations stuck after it.
 */
export function checkOperations<S, I, O>(
  model: Model<S, I, O>,
  history: readonly Operation<I, O>[],
  options: CheckOptions = {},
): CheckResult<I, O> {
  assertWellFormed(history);
  const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
  const partitions = model.partition ? model.partition([...history]) : [[...history]];
  const searches = partitions.map((ops) => new LinearizationSearch(model, ops));

  let unfinished = searches.filter((search) => search.status === 'running');
  let illegalFound = false;
  let timedOut = false;
  rounds: while (unfinished.length > 0) {
    for (const search of unfinished) {
      if (search.run(STEPS_PER_TURN) === 'illegal') {
        illegalFound = true;
        if (!options.exploreAllPartitions) break rounds;
      }
      if (search.status === 'running' && Date.now() >= deadline) {
        timedOut = true;
        break rounds;
      }
    }
    unfinished = unfinished.filter((search) => search.status === 'running');
  }

  const reports = searches.map((search, index): PartitionReport<I, O> => {
    const report: PartitionReport<I, O> = {
      index,
      result: search.status === 'running' ? (timedOut ? 'unknown' : 'skipped') : search.status,
      operationCount: partitions[index].length,
      steps: search.steps,
    };
    if (search.status === 'illegal') {
      report.longestLinearizablePrefix = search.longestPrefix();
      report.stuckCandidates = search.candidatesAfterLongestPrefix();
    }
    return report;
  });
  const result: Verdict = illegalFound ? 'illegal' : timedOut ? 'unknown' : 'ok';
  return { result, partitions: reports };
}
