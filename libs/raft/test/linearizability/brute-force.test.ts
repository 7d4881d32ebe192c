// Cross-checks the WGL search against a plain enumeration of every order of operations on
// many small random histories: the two must agree on every verdict, with and without the
// read-only shortcut, so the pruning (memoization, forced reads, dropping unknown outcomes)
// can be trusted.

import { describe, expect, it } from 'vitest';
import { checkOperations } from './checker';
import type { Model, Operation } from './model';
import { registerModel, type RegisterInput, type RegisterOutput, type RegisterValue } from './models/register';

type RegisterOp = Operation<RegisterInput, RegisterOutput>;

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

/** A small deterministic PRNG (mulberry32), so a failure can be replayed from its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Three clients issuing overlapping operations on a register with values null, 1, 2. */
function randomHistory(seed: number, opCount: number): RegisterOp[] {
  const next = random(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)];
  const values: RegisterValue[] = [null, 1, 2];
  const clientFreeAt = [0, 0, 0];
  const ops: RegisterOp[] = [];
  for (let n = 0; n < opCount; n++) {
    const clientId = Math.floor(next() * clientFreeAt.length);
    const call = clientFreeAt[clientId] + Math.floor(next() * 3);
    const ret = call + 1 + Math.floor(next() * 6);
    const kind = pick(['read', 'read', 'write', 'cas'] as const);
    const input: RegisterInput =
      kind === 'read' ? { op: 'read' } : kind === 'write' ? { op: 'write', value: pick([1, 2]) } : { op: 'cas', expected: pick(values), next: pick([1, 2]) };
    const output: RegisterOutput = kind === 'read' ? { value: pick(values) } : kind === 'cas' ? { ok: next() < 0.5 } : {};
    const unknown = kind !== 'read' && next() < 0.2;
    ops.push({ clientId, input, call, output: unknown ? undefined : output, return: unknown ? Infinity : ret });
    // A client that timed out is replaced by a fresh one, as Jepsen does; keep the slot busy-free.
    clientFreeAt[clientId] = unknown ? call + 1 : ret + 1;
  }
  return ops;
}

describe('the search agrees with brute-force enumeration', () => {
  const withoutReadOnlyShortcut: Model<RegisterValue, RegisterInput, RegisterOutput> = { ...registerModel, isReadOnly: undefined };

  it('on 1500 random register histories of up to 7 operations', () => {
    const verdicts = { ok: 0, illegal: 0 };
    for (let seed = 1; seed <= 1500; seed++) {
      const ops = randomHistory(seed, 2 + (seed % 6));
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
});
