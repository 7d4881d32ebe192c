// The history as a doubly linked list of call and return entries in time order, on typed
// arrays. The WGL search removes ("lifts") an operation's two entries when it linearizes
// the operation and puts them back ("unlifts") when it backtracks; both are O(1).

import type { Operation } from './model';

const NIL = -1;

export class EntryList {
  /** The sentinel before the first entry; `next[HEAD]` is the first live entry. */
  readonly head: number;
  readonly next: Int32Array;
  readonly prev: Int32Array;
  /** Per entry: the operation it belongs to. */
  readonly opOf: Int32Array;
  /** Per entry: 1 for a call, 0 for a return. */
  readonly isCall: Uint8Array;
  /** Per operation: its call entry and its return entry. */
  readonly callEntry: Int32Array;
  readonly returnEntry: Int32Array;

  constructor(ops: readonly Operation<unknown, unknown>[]) {
    const count = ops.length * 2;
    this.head = count;
    this.next = new Int32Array(count + 1);
    this.prev = new Int32Array(count + 1);
    this.opOf = new Int32Array(count);
    this.isCall = new Uint8Array(count);
    this.callEntry = new Int32Array(ops.length);
    this.returnEntry = new Int32Array(ops.length);

    const times = new Float64Array(count);
    for (let op = 0; op < ops.length; op++) {
      this.opOf[2 * op] = op;
      this.isCall[2 * op] = 1;
      times[2 * op] = ops[op].call;
      this.opOf[2 * op + 1] = op;
      times[2 * op + 1] = ops[op].return;
    }
    // Time order; at equal times calls go first, so touching operations count as
    // concurrent (the permissive reading: a tie never manufactures a violation).
    const order = Array.from({ length: count }, (_, i) => i);
    order.sort((a, b) => times[a] - times[b] || this.isCall[b] - this.isCall[a] || a - b);

    let previous = this.head;
    for (const entry of order) {
      this.next[previous] = entry;
      this.prev[entry] = previous;
      previous = entry;
      if (this.isCall[entry]) this.callEntry[this.opOf[entry]] = entry;
      else this.returnEntry[this.opOf[entry]] = entry;
    }
    this.next[previous] = NIL;
    this.prev[this.head] = NIL;
  }

  /** Unlink both entries of `op`. */
  lift(op: number): void {
    const { next, prev } = this;
    const call = this.callEntry[op];
    next[prev[call]] = next[call];
    prev[next[call]] = prev[call]; // a call is always followed by at least its own return
    const ret = this.returnEntry[op];
    next[prev[ret]] = next[ret];
    if (next[ret] !== NIL) prev[next[ret]] = prev[ret];
  }

  /** Relink both entries of `op`; must undo the most recent `lift` still in effect. */
  unlift(op: number): void {
    const { next, prev } = this;
    const ret = this.returnEntry[op];
    next[prev[ret]] = ret;
    if (next[ret] !== NIL) prev[next[ret]] = ret;
    const call = this.callEntry[op];
    next[prev[call]] = call;
    prev[next[call]] = call;
  }
}
