// The Wing & Gong linearizability search with Lowe's memoization (the "WGL" algorithm, as
// porcupine uses it), iterative so history length never meets a recursion limit, and
// resumable so several partitions can be searched in turns.
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
import type { Model, Operation } from './model';

export type SearchStatus = 'ok' | 'illegal' | 'running';

export class LinearizationSearch<S, I, O> {
  status: SearchStatus = 'running';
  /** Loop iterations so far (each tries one candidate or undoes one choice). */
  steps = 0;

  /** The partition's operations, numbered in call order. */
  private readonly ops: readonly Operation<I, O>[];
  private readonly list: EntryList;
  private readonly memo: ConfigurationMemo<S>;
  private readonly stateEqual: (a: S, b: S) => boolean;
  private readonly linearized: Bitset;
  /** What the model is told each operation returned; undefined for an unknown outcome. */
  private readonly outputs: (O | undefined)[];
  private readonly readOnly: Uint8Array;
  private readonly required: Uint8Array;
  /** The choices made, innermost last; `forced` ones are not choices (see `run`). */
  private readonly opStack: Int32Array;
  private readonly forcedStack: Uint8Array;
  private readonly stateStack: S[] = [];
  private depth = 0;
  /** Operations with a finite return still to linearize; the others may be left out. */
  private requiredLeft: number;
  private state: S;
  private entry: number;
  /** The longest linearization so far; stack slots below `unchangedBelow` still equal it. */
  private readonly longest: number[] = [];
  private unchangedBelow = 0;

  constructor(
    private readonly model: Model<S, I, O>,
    history: readonly Operation<I, O>[],
  ) {
    // Numbered in call order, so linearized sets are dense at the bottom (see Bitset).
    const ops = [...history].sort((a, b) => a.call - b.call);
    this.ops = ops;
    this.list = new EntryList(ops);
    this.stateEqual = model.equal?.bind(model) ?? ((a: S, b: S) => a === b);
    this.memo = new ConfigurationMemo<S>(makeStateHasher(model.hash?.bind(model)), this.stateEqual);
    this.linearized = new Bitset(ops.length);
    this.outputs = ops.map((op) => (op.return === Infinity ? undefined : op.output));
    this.readOnly = Uint8Array.from(ops, (op, i) => (model.isReadOnly?.(op.input, this.outputs[i]) ? 1 : 0));
    this.required = Uint8Array.from(ops, (op) => (op.return === Infinity ? 0 : 1));
    this.requiredLeft = this.required.reduce((sum, r) => sum + r, 0);
    this.opStack = new Int32Array(ops.length);
    this.forcedStack = new Uint8Array(ops.length);
    this.state = model.init();
    this.entry = this.list.next[this.list.head];
  }

  /** The longest linearization found, as operations in order (on 'ok': every required operation). */
  longestPrefix(): Operation<I, O>[] {
    return this.longest.map((i) => this.ops[i]);
  }

  /** Operations real time allows right after the longest prefix: called before any other returned. */
  candidatesAfterLongestPrefix(): Operation<I, O>[] {
    const done = new Set(this.longest);
    const rest = this.ops.filter((_, i) => !done.has(i));
    const firstReturn = rest.reduce((first, op) => Math.min(first, op.return), Infinity);
    return rest.filter((op) => op.call <= firstReturn);
  }

  /** Search for at most `stepBudget` more steps; returns the status afterwards. */
  run(stepBudget: number): SearchStatus {
    const { list, model, ops, outputs, linearized, memo } = this;
    const stopAt = this.steps + stepBudget;
    while (this.status === 'running' && this.steps < stopAt) {
      this.steps++;
      // Whatever unknown-outcome operations remain can be taken to have never happened.
      if (this.requiredLeft === 0) {
        this.status = 'ok';
        break;
      }
      // While a required operation is pending its return entry is live, and every unknown
      // outcome's return sorts after it, so the walk meets a return before the end.
      const entry = this.entry;
      if (!list.isCall[entry]) {
        // This operation had to be linearized by now: the last choice was wrong.
        this.backtrack();
        continue;
      }
      const op = list.opOf[entry];
      const next = model.step(this.state, ops[op].input, outputs[op]);
      if (!next.ok) {
        this.entry = list.next[entry];
        continue;
      }
      // A read-only operation that is legal here can always go next: in any linearization
      // from here it could be moved to this point, since everything that must precede it is
      // linearized already and it changes nothing for the rest. So taking it is not a
      // choice, and the alternatives need no exploring.
      const forced = this.readOnly[op] === 1;
      linearized.add(op);
      if (memo.addIfNew(linearized, next.state)) {
        this.push(op, forced, next.state);
      } else {
        linearized.remove(op);
        // Explored before without success; if taking it was forced, this configuration fails too.
        if (forced) this.backtrack();
        else this.entry = list.next[entry];
      }
    }
    if (this.status !== 'running') memo.clear();
    return this.status;
  }

  private push(op: number, forced: boolean, nextState: S): void {
    const depth = this.depth++;
    this.forcedStack[depth] = forced ? 1 : 0;
    this.stateStack[depth] = this.state;
    this.opStack[depth] = op;
    if (this.depth > this.longest.length) {
      for (let i = this.unchangedBelow; i < this.depth; i++) this.longest[i] = this.opStack[i];
      this.unchangedBelow = this.depth;
    }
    this.state = nextState;
    this.list.lift(op);
    this.requiredLeft -= this.required[op];
    this.entry = this.list.next[this.list.head];
  }

  /** Undo choices back to the latest unforced one and move on to its next candidate. */
  private backtrack(): void {
    for (;;) {
      if (this.depth === 0) {
        this.status = 'illegal';
        return;
      }
      const depth = --this.depth;
      const op = this.opStack[depth];
      if (depth < this.unchangedBelow) this.unchangedBelow = depth;
      this.state = this.stateStack[depth];
      this.stateStack.length = depth;
      this.linearized.remove(op);
      this.list.unlift(op);
      this.requiredLeft += this.required[op];
      if (!this.forcedStack[depth]) {
        this.entry = this.list.next[this.list.callEntry[op]];
        return;
      }
    }
  }
}
