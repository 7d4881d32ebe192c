// Cross-checks the WGL search against a plain enumeration of every order of operations on
// many small random histories: the two must agree on every verdict, with and without the
// read-only shortcut, so the pruning (memoization, forced reads, dropping unknown outcomes)
// and per-key partitioning can be trusted.

import { describe, expect, it } from 'vitest';
import { checkOperations } from './checker';
import type { Model, Operation } from './model';
import { kvModel, type KvInput, type KvOutput } from './models/kv';
import { registerModel, type RegisterInput, type RegisterOutput, type RegisterValue } from './models/register';
import { seededRandom } from '../seeded-random';

/**
 * The definition, executed: some order of a subset of the operations, containing every
 * operation that returned, respects real time and is accepted by the model.
 */
function linearizableByEnumeration<S, I, O>(model: Model<S, I, O>, ops: readonly Operation<I, O>[]): boolean {
  const used = new Array<boolean>(ops.length).fill(false);
  const extend = (state: S, usedCount: number): boolean => {
    const required = ops.some((op, i) => !used[i] && op.return !== Infinity);
    if (!required) return true; // every remaining operation may never have happened
    for (let i = 0; i < ops.length; i++) {
      if (used[i]) continue;
      // Real time: nothing still unplaced may have returned before this one was called.
      if (ops.some((other, j) => !used[j] && j !== i && other.return < ops[i].call)) continue;
      const output = ops[i].return === Infinity ? undefined : ops[i].output;
      const next = model.step(state, ops[i].input, output);
      if (!next.ok) continue;
      used[i] = true;
      const found = extend(next.state, usedCount + 1);
      used[i] = false;
      if (found) return true;
    }
    return false;
  };
  return extend(model.init(), 0);
}

/** A failure can be replayed from its seed. */
const random = seededRandom;

/** Operations from three clients at random overlapping times; some end with an unknown outcome. */
function randomHistory<I, O>(seed: number, opCount: number, randomOperation: (pick: <T>(items: readonly T[]) => T) => { input: I; output: O; mayBeLost: boolean }): Operation<I, O>[] {
  const next = random(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)];
  const clientFreeAt = [0, 0, 0];
  const ops: Operation<I, O>[] = [];
  for (let n = 0; n < opCount; n++) {
    const clientId = Math.floor(next() * clientFreeAt.length);
    const call = clientFreeAt[clientId] + Math.floor(next() * 3);
    const ret = call + 1 + Math.floor(next() * 6);
    const { input, output, mayBeLost } = randomOperation(pick);
    const lost = mayBeLost && next() < 0.2;
    ops.push({ clientId, input, call, output: lost ? undefined : output, return: lost ? Infinity : ret });
    // A client whose request was lost carries on with the next one, as Jepsen's do.
    clientFreeAt[clientId] = lost ? call + 1 : ret + 1;
  }
  return ops;
}

/** A register with values null, 1, 2. */
function randomRegisterOperation(pick: <T>(items: readonly T[]) => T): { input: RegisterInput; output: RegisterOutput; mayBeLost: boolean } {
  const values: RegisterValue[] = [null, 1, 2];
  switch (pick(['read', 'read', 'write', 'cas'] as const)) {
    case 'read':
      return { input: { op: 'read' }, output: { value: pick(values) }, mayBeLost: false };
    case 'write':
      return { input: { op: 'write', value: pick([1, 2]) }, output: {}, mayBeLost: true };
    case 'cas':
      return { input: { op: 'cas', expected: pick(values), next: pick([1, 2]) }, output: { ok: pick([true, false]) }, mayBeLost: true };
  }
}

/** Two keys, short values, so gets often match some order of the writes. */
function randomKvOperation(pick: <T>(items: readonly T[]) => T): { input: KvInput; output: KvOutput; mayBeLost: boolean } {
  const key = pick(['p', 'q']);
  const op = pick(['get', 'get', 'put', 'append', 'append'] as const);
  if (op === 'get') return { input: { op, key, value: '' }, output: { value: pick(['', 'a', 'b', 'ab', 'ba', 'bb']) }, mayBeLost: false };
  return { input: { op, key, value: pick(['a', 'b']) }, output: { value: '' }, mayBeLost: true };
}

/** The whole store as one state, with no partitioning: what per-key checking must agree with. */
const wholeStoreModel: Model<Record<string, string>, KvInput, KvOutput> = {
  init: () => ({}),
  step(store, input, output) {
    const current = store[input.key] ?? '';
    if (input.op === 'get') return { ok: output === undefined || output.value === current, state: store };
    return { ok: true, state: { ...store, [input.key]: input.op === 'put' ? input.value : current + input.value } };
  },
};

describe('the search agrees with brute-force enumeration', () => {
  const withoutReadOnlyShortcut: Model<RegisterValue, RegisterInput, RegisterOutput> = { ...registerModel, isReadOnly: undefined };

  it('on 1500 random register histories of up to 7 operations', () => {
    const verdicts = { ok: 0, illegal: 0 };
    for (let seed = 1; seed <= 1500; seed++) {
      const ops = randomHistory(seed, 2 + (seed % 6), randomRegisterOperation);
      const expected = linearizableByEnumeration(registerModel, ops) ? 'ok' : 'illegal';
      const context = `seed ${seed}: ${JSON.stringify(ops)}`;
      expect(checkOperations(registerModel, ops).result, context).toBe(expected);
      expect(checkOperations(withoutReadOnlyShortcut, ops).result, context).toBe(expected);
      verdicts[expected]++;
    }
    // Both verdicts must be well represented, or the comparison proves little.
    expect(verdicts.ok).toBeGreaterThan(200);
    expect(verdicts.illegal).toBeGreaterThan(200);
  });

  it('on 1500 random two-key kv histories, checked per key against the whole store', () => {
    const verdicts = { ok: 0, illegal: 0 };
    for (let seed = 1; seed <= 1500; seed++) {
      const ops = randomHistory(seed, 2 + (seed % 7), randomKvOperation);
      const expected = linearizableByEnumeration(wholeStoreModel, ops) ? 'ok' : 'illegal';
      expect(checkOperations(kvModel, ops).result, `seed ${seed}: ${JSON.stringify(ops)}`).toBe(expected);
      verdicts[expected]++;
    }
    expect(verdicts.ok).toBeGreaterThan(200);
    expect(verdicts.illegal).toBeGreaterThan(200);
  });
});
