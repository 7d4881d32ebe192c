// A key-value store of strings with get, put and append, checked one key at a time.

import type { Model, Operation } from '../model';

/** `value` is ignored for `get`. */
export interface KvInput {
  op: 'get' | 'put' | 'append';
  key: string;
  value: string;
}

/** `get` returns the key's value ('' for a key never written); for put and append it is not checked (use `{ value: '' }`). */
export interface KvOutput {
  value: string;
}

/**
 * The state is the value of ONE key: `partition` splits the history per key and every
 * part is checked on its own, which is what keeps large histories fast. (Keys are
 * independent, so the whole history is linearizable iff every key's history is.)
 */
export const kvModel: Model<string, KvInput, KvOutput> = {
  init: () => '',

  step(state, input, output) {
    switch (input.op) {
      case 'get':
        return { ok: output === undefined || output.value === state, state };
      case 'put':
        return { ok: true, state: input.value };
      case 'append':
        return { ok: true, state: state + input.value };
    }
  },

  isReadOnly: (input) => input.op === 'get',

  partition(history: Operation<KvInput, KvOutput>[]) {
    const byKey = new Map<string, Operation<KvInput, KvOutput>[]>();
    for (const op of history) {
      const ops = byKey.get(op.input.key);
      if (ops) ops.push(op);
      else byKey.set(op.input.key, [op]);
    }
    return [...byKey.values()];
  },

  describeOperation(input, output) {
    const result = output === undefined ? ' (outcome unknown)' : '';
    if (input.op === 'get') return `get(${JSON.stringify(input.key)}) -> ${output === undefined ? '?' : JSON.stringify(output.value)}`;
    return `${input.op}(${JSON.stringify(input.key)}, ${JSON.stringify(input.value)})${result}`;
  },

  describeState: (state) => JSON.stringify(state),
};
