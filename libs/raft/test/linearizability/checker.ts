// The Wing & Gong linearizability search with Lowe's memoization (the "WGL" algorithm, as
// porcupine uses it), iterative so history length never meets a recursion limit.
//
// The search walks the entry list from the front. A call entry there is an operation that
// may go next (nothing that returned earlier is still pending); it tries the model on it,
// and on success linearizes it (lifts its entries) and restarts from the front. Reaching a
// return entry means that operation had to be linearized by now and was not: backtrack to
// the last choice and try the next candidate. Configurations (set of linearized operations,
// model state) already explored are skipped; that bounds the work on concurrent histories.

import { Bitset } from './bitset';
import { EntryList } from './entry-list';
import { ConfigurationMemo, makeStateHasher } from './memo';
import type { CheckOptions, CheckResult, Model, Operation, PartitionReport, Verdict } from './model';

/** How many search steps between two looks at the clock. */
const CLOCK_CHECK_INTERVAL = 4096;

class SearchTimeout extends Error {}

interface SearchOutcome {
  verdict: Verdict;
  steps: number;
  /** Operation indices of the longest linearization found, in order. */
  longestPrefix: number[];
}

function assertWellFormed(ops: readonly Operation<unknown, unknown>[]): void {
  for (const op of ops) {
    if (!(op.call <= op.return) || Number.isNaN(op.call) || op.call === Infinity) {
      throw new RangeError(`operation of client ${op.clientId} has call ${op.call} and return ${op.return}; need call <= return`);
    }
  }
}

/** Run the search on one partition. Throws SearchTimeout past `deadline` (ms since epoch). */
function searchPartition<S, I, O>(model: Model<S, I, O>, ops: readonly Operation<I, O>[], deadline: number): SearchOutcome {
  const list = new EntryList(ops);
  const stateEqual = model.equal?.bind(model) ?? ((a: S, b: S) => a === b);
  const memo = new ConfigurationMemo<S>(makeStateHasher(model.hash?.bind(model)), stateEqual);
  const linearized = new Bitset(ops.length);
  // An unknown-outcome operation is handed to the model with no output to check.
  const outputs = ops.map((op) => (op.return === Infinity ? undefined : op.output));
  const readOnly = Uint8Array.from(ops, (op, i) => (model.isReadOnly?.(op.input, outputs[i]) ? 1 : 0));
  const opStack = new Int32Array(ops.length);
  // 1 where the choice was forced (see below): backtracking goes straight past it.
  const forcedStack = new Uint8Array(ops.length);
  const stateStack: S[] = [];
  let depth = 0;
  // Operations with a finite return must all be linearized; the others may be left out.
  let requiredLeft = ops.filter((op) => op.return !== Infinity).length;

  // The longest linearization so far, updated lazily: stack slots below `unchangedBelow`
  // still equal it, so each slot is copied at most once per push.
  const longestPrefix: number[] = [];
  let unchangedBelow = 0;

  let state = model.init();
  let entry = list.next[list.head];
  let steps = 0;

  /** Undo choices up to the latest unforced one; false when there is none left. */
  const backtrack = (): boolean => {
    for (;;) {
      if (depth === 0) return false;
      const op = opStack[--depth];
      if (depth < unchangedBelow) unchangedBelow = depth;
      state = stateStack[depth];
      stateStack.length = depth;
      linearized.remove(op);
      list.unlift(op);
      if (ops[op].return !== Infinity) requiredLeft++;
      if (!forcedStack[depth]) {
        entry = list.next[list.callEntry[op]];
        return true;
      }
    }
  };

  for (;;) {
    // Whatever unknown-outcome operations remain can be taken to have never happened.
    if (requiredLeft === 0) return { verdict: 'ok', steps, longestPrefix };
    if ((++steps & (CLOCK_CHECK_INTERVAL - 1)) === 0 && Date.now() > deadline) throw new SearchTimeout();

    // While a required operation is pending its return entry is live, and every unknown
    // outcome's return sorts after it, so the walk meets a return before the end.
    if (!list.isCall[entry]) {
      // This operation had to be linearized by now: the last choice was wrong.
      if (!backtrack()) return { verdict: 'illegal', steps, longestPrefix };
      continue;
    }
    const op = list.opOf[entry];
    const next = model.step(state, ops[op].input, outputs[op]);
    if (!next.ok) {
      entry = list.next[entry];
      continue;
    }
    // A read-only operation (one that never changes the state wherever it is legal) that is
    // legal here can always go next: in any linearization from here it could be moved to
    // this point, as everything that must precede it is already linearized and it changes
    // nothing for the rest. So it is not a choice, and the alternatives need no exploring.
    const forced = readOnly[op] === 1;
    linearized.add(op);
    if (memo.addIfNew(linearized, next.state)) {
      forcedStack[depth] = forced ? 1 : 0;
      stateStack[depth] = state;
      opStack[depth++] = op;
      if (depth > longestPrefix.length) {
        for (let i = unchangedBelow; i < depth; i++) longestPrefix[i] = opStack[i];
        unchangedBelow = depth;
      }
      state = next.state;
      list.lift(op);
      if (ops[op].return !== Infinity) requiredLeft--;
      entry = list.next[list.head];
      continue;
    }
    linearized.remove(op);
    // Explored before without success; if that step was forced, this configuration fails too.
    if (forced) {
      if (!backtrack()) return { verdict: 'illegal', steps, longestPrefix };
    } else {
      entry = list.next[entry];
    }
  }
}

/** After a prefix, the operations real time allows next: called before any other returned. */
function candidatesAfter<I, O>(ops: readonly Operation<I, O>[], prefix: readonly number[]): Operation<I, O>[] {
  const done = new Set(prefix);
  const rest = ops.filter((_, i) => !done.has(i));
  const firstReturn = Math.min(...rest.map((op) => op.return));
  return rest.filter((op) => op.call <= firstReturn);
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

  const reports: PartitionReport<I, O>[] = [];
  let anyIllegal = false;
  let anyUnknown = false;
  for (let index = 0; index < partitions.length; index++) {
    const ops = partitions[index];
    if (anyIllegal && options.stopAtFirstIllegal) break;
    let outcome: SearchOutcome;
    try {
      outcome = searchPartition(model, ops, deadline);
    } catch (error) {
      if (!(error instanceof SearchTimeout)) throw error;
      anyUnknown = true;
      reports.push({ index, result: 'unknown', operationCount: ops.length, steps: 0 });
      continue;
    }
    const report: PartitionReport<I, O> = { index, result: outcome.verdict, operationCount: ops.length, steps: outcome.steps };
    if (outcome.verdict === 'illegal') {
      anyIllegal = true;
      report.longestLinearizablePrefix = outcome.longestPrefix.map((i) => ops[i]);
      report.stuckCandidates = candidatesAfter(ops, outcome.longestPrefix);
    }
    reports.push(report);
  }
  const result: Verdict = anyIllegal ? 'illegal' : anyUnknown ? 'unknown' : 'ok';
  return { result, partitions: reports };
}
