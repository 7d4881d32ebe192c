// Builds a history from the event stream a test client sees: invoke, then one of ok
// (completed, output known), fail (definitely did not happen) or info (outcome unknown).
// Timestamps come from one logical clock that ticks on every event, so real-time order
// between clients is exactly the order events were recorded in.

import type { Operation } from './model';

interface PendingCall<I> {
  input: I;
  call: number;
}

export class HistoryRecorder<I, O> {
  private clock = 0;
  private readonly pending = new Map<number, PendingCall<I>>();
  private readonly completed: Operation<I, O>[] = [];

  /** Client `clientId` starts an operation; a client has at most one in flight. */
  invoke(clientId: number, input: I): void {
    if (this.pending.has(clientId)) throw new Error(`client ${clientId} invoked while its previous operation is still pending`);
    this.pending.set(clientId, { input, call: this.clock++ });
  }

  /** The input of the client's operation in flight, if any. */
  pendingInput(clientId: number): I | undefined {
    return this.pending.get(clientId)?.input;
  }

  /** The operation completed and the client saw `output`. */
  ok(clientId: number, output: O): void {
    const { input, call } = this.take(clientId);
    this.completed.push({ clientId, input, call, output, return: this.clock++ });
  }

  /** The operation definitely had no effect (e.g. rejected before reaching the log): it is dropped. */
  fail(clientId: number): void {
    this.take(clientId);
    this.clock++;
  }

  /** The outcome is unknown (timeout, crash): it may take effect any time after its call, or never. */
  info(clientId: number): void {
    const { input, call } = this.take(clientId);
    this.clock++;
    this.completed.push(unknownOutcome(clientId, input, call));
  }

  /** The history so far; operations still in flight are included with unknown outcome. */
  operations(): Operation<I, O>[] {
    const inFlight = [...this.pending].map(([clientId, { input, call }]) => unknownOutcome<I, O>(clientId, input, call));
    return [...this.completed, ...inFlight];
  }

  private take(clientId: number): PendingCall<I> {
    const pending = this.pending.get(clientId);
    if (!pending) throw new Error(`client ${clientId} completed an operation it never invoked`);
    this.pending.delete(clientId);
    return pending;
  }
}

function unknownOutcome<I, O>(clientId: number, input: I, call: number): Operation<I, O> {
  return { clientId, input, call, output: undefined, return: Infinity };
}
