// A single read/write/compare-and-set register (the object Jepsen's etcd test drives).

import type { Model } from '../model';

/** Register contents; `null` is "never written" (Jepsen's `nil`). */
export type RegisterValue = number | string | null;

export type RegisterInput =
  | { op: 'read' }
  | { op: 'write'; value: RegisterValue }
  | { op: 'cas'; expected: RegisterValue; next: RegisterValue };

/**
 * What the client saw: a read returns `{ value }`, a cas `{ ok }` (false: the comparison
 * failed, so the register held something other than `expected`), a write `{}`.
 */
export type RegisterOutput = { value?: RegisterValue; ok?: boolean };

function show(value: RegisterValue | undefined): string {
  return value === null || value === undefined ? 'nil' : String(value);
}

export const registerModel: Model<RegisterValue, RegisterInput, RegisterOutput> = {
  init: () => null,

  step(state, input, output) {
    switch (input.op) {
      case 'read':
        return { ok: output === undefined || output.value === state, state };
      case 'write':
        return { ok: true, state: input.value };
      case 'cas': {
        const matches = state === input.expected;
        // Unobserved outcome: the cas does whatever it would do in this state.
        const ok = output === undefined || output.ok === matches;
        return { ok, state: matches ? input.next : state };
      }
    }
  },

  // A failed cas is legal only where the register differs from `expected`, and then
  // changes nothing; an unobserved cas might have succeeded.
  isReadOnly: (input, output) => input.op === 'read' || (input.op === 'cas' && output?.ok === false),

  describeOperation(input, output) {
    switch (input.op) {
      case 'read':
        return `read -> ${output === undefined ? '?' : show(output.value)}`;
      case 'write':
        return `write ${show(input.value)}${output === undefined ? ' (outcome unknown)' : ''}`;
      case 'cas':
        return `cas ${show(input.expected)} -> ${show(input.next)}: ${output === undefined ? '?' : output.ok ? 'ok' : 'failed'}`;
    }
  },

  describeState: (state) => show(state),
};
