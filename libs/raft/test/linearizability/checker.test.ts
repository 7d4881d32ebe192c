import { describe, expect, it } from 'vitest';
import { checkOperations } from './checker';
import type { Operation } from './model';
import { kvModel, type KvInput, type KvOutput } from './models/kv';
import { registerModel, type RegisterInput, type RegisterOutput, type RegisterValue } from './models/register';
import { formatReport } from './report';

type RegisterOp = Operation<RegisterInput, RegisterOutput>;

const write = (clientId: number, value: RegisterValue, call: number, ret: number): RegisterOp => ({
  clientId, input: { op: 'write', value }, call, output: {}, return: ret,
});
const read = (clientId: number, value: RegisterValue, call: number, ret: number): RegisterOp => ({
  clientId, input: { op: 'read' }, call, output: { value }, return: ret,
});
const cas = (clientId: number, expected: RegisterValue, next: RegisterValue, ok: boolean, call: number, ret: number): RegisterOp => ({
  clientId, input: { op: 'cas', expected, next }, call, output: { ok }, return: ret,
});
/** An operation whose outcome never came back (Jepsen :info, a client timeout). */
const unknownOutcome = (op: RegisterOp): RegisterOp => ({ ...op, output: undefined, return: Infinity });

const verdict = (ops: RegisterOp[]) => checkOperations(registerModel, ops).result;

describe('register histories', () => {
  it('accepts the empty history', () => {
    expect(verdict([])).toBe('ok');
  });

  it('accepts either order of two concurrent writes, but not a value never written', () => {
    const writes = [write(1, 1, 0, 3), write(2, 2, 1, 4)];
    expect(verdict([...writes, read(3, 1, 5, 6)])).toBe('ok');
    expect(verdict([...writes, read(3, 2, 5, 6)])).toBe('ok');
    expect(verdict([...writes, read(3, 3, 5, 6)])).toBe('illegal');
  });

  it('rejects two later reads that see the concurrent writes in opposite orders', () => {
    const writes = [write(1, 1, 0, 3), write(2, 2, 1, 4)];
    expect(verdict([...writes, read(3, 1, 5, 6), read(3, 2, 7, 8)])).toBe('illegal');
  });

  it('rejects a stale read after a completed write', () => {
    expect(verdict([write(1, 1, 0, 1), write(1, 2, 2, 3), read(2, 1, 4, 5)])).toBe('illegal');
  });

  it('accepts a read concurrent with a write seeing either the old or the new value', () => {
    expect(verdict([write(1, 1, 0, 1), write(1, 2, 2, 5), read(2, 1, 3, 4)])).toBe('ok');
    expect(verdict([write(1, 1, 0, 1), write(1, 2, 2, 5), read(2, 2, 3, 4)])).toBe('ok');
  });

  it('treats touching timestamps as concurrent', () => {
    expect(verdict([write(1, 1, 0, 5), read(2, null, 5, 6)])).toBe('ok');
    expect(verdict([write(1, 1, 0, 4), read(2, null, 5, 6)])).toBe('illegal');
  });

  it('lets a write with unknown outcome take effect later, or never', () => {
    const lostWrite = unknownOutcome(write(1, 1, 0, 1));
    expect(verdict([lostWrite, read(2, null, 2, 3)])).toBe('ok'); // never applied (or not yet)
    expect(verdict([lostWrite, read(2, null, 2, 3), read(2, 1, 4, 5)])).toBe('ok'); // applied late
    expect(verdict([lostWrite, read(2, 1, 2, 3), read(2, 1, 4, 5)])).toBe('ok');
  });

  it('does not let a write with unknown outcome be undone or take effect before its call', () => {
    const lostWrite = unknownOutcome(write(1, 1, 2, 3));
    expect(verdict([lostWrite, read(2, 1, 4, 5), read(2, null, 6, 7)])).toBe('illegal'); // applied, then undone
    expect(verdict([read(2, 1, 0, 1), lostWrite])).toBe('illegal'); // seen before it was sent
  });

  it('lets a write with unknown outcome apply at most once', () => {
    const lostWrite = unknownOutcome(write(1, 1, 0, 1));
    const ops = [lostWrite, read(2, 1, 2, 3), write(2, 2, 4, 5), read(2, 2, 6, 7), read(2, 1, 8, 9)];
    expect(verdict(ops)).toBe('illegal');
  });

  it('applies a cas only where the register holds the expected value', () => {
    expect(verdict([write(1, 1, 0, 1), cas(1, 1, 2, true, 2, 3), read(2, 2, 4, 5)])).toBe('ok');
    expect(verdict([write(1, 1, 0, 1), cas(1, 3, 2, true, 2, 3)])).toBe('illegal'); // succeeded on a mismatch
    expect(verdict([write(1, 1, 0, 1), cas(1, 1, 2, false, 2, 3)])).toBe('illegal'); // failed on a match
    expect(verdict([write(1, 1, 0, 1), cas(1, 3, 2, false, 2, 3), read(2, 1, 4, 5)])).toBe('ok');
  });

  it('lets a cas with unknown outcome succeed later only if the value still matches', () => {
    const lostCas = unknownOutcome(cas(1, 1, 2, true, 2, 3));
    expect(verdict([write(1, 1, 0, 1), lostCas, read(2, 2, 4, 5)])).toBe('ok');
    expect(verdict([write(1, 3, 0, 1), lostCas, read(2, 2, 4, 5)])).toBe('illegal');
  });

  it('reports the longest linearizable prefix and the operations stuck after it', () => {
    const stale = read(2, 1, 4, 5);
    const result = checkOperations(registerModel, [write(1, 1, 0, 1), write(1, 2, 2, 3), stale]);
    const [partition] = result.partitions;
    expect(partition.longestLinearizablePrefix?.map((op) => op.input)).toEqual([
      { op: 'write', value: 1 },
      { op: 'write', value: 2 },
    ]);
    expect(partition.stuckCandidates).toEqual([stale]);
    const text = formatReport(registerModel, result);
    expect(text).toContain('state after the prefix: 2');
    expect(text).toContain('read -> 1');
  });

  it('checks a long history (30 000 operations) and finds one stale read near its end', () => {
    // Each round: client 0 writes i while clients 1 and 2 read, seeing the old and the new value.
    const ops: RegisterOp[] = [];
    for (let i = 0, t = 0; ops.length < 30_000; i++, t += 4) {
      ops.push(write(0, i, t, t + 2), read(1, i === 0 ? null : i - 1, t + 1, t + 3), read(2, i, t + 1, t + 3));
    }
    expect(verdict(ops)).toBe('ok');
    const last = ops[ops.length - 1];
    expect(verdict([...ops, read(3, 5, last.return + 1, last.return + 2)])).toBe('illegal');
  });

  it('rejects an operation that returns before it is called', () => {
    expect(() => verdict([read(1, null, 3, 2)])).toThrow(RangeError);
  });

  it('rejects a return time that is not a number (Infinity that went through JSON)', () => {
    const fromJson = JSON.parse(JSON.stringify([unknownOutcome(write(1, 1, 0, 1))])) as RegisterOp[];
    expect(fromJson[0].return).toBeNull();
    expect(() => verdict(fromJson)).toThrow(/Infinity for an unknown outcome/);
  });
});

type KvOp = Operation<KvInput, KvOutput>;
const kv = (clientId: number, op: KvInput['op'], key: string, value: string, call: number, ret: number): KvOp => ({
  clientId, input: { op, key, value: op === 'get' ? '' : value }, call, output: { value: op === 'get' ? value : '' }, return: ret,
});

describe('kv histories', () => {
  it('reads a missing key as the empty string', () => {
    expect(checkOperations(kvModel, [kv(1, 'get', 'a', '', 0, 1)]).result).toBe('ok');
  });

  it('checks each key on its own and names the partition that is not linearizable', () => {
    const ops = [
      kv(1, 'put', 'a', 'x', 0, 1),
      kv(2, 'append', 'b', 'y', 0, 2),
      kv(1, 'append', 'a', 'z', 2, 3),
      kv(2, 'get', 'b', 'y', 3, 4),
      kv(3, 'get', 'a', 'x', 4, 5), // stale: 'xz' was complete before this get started
    ];
    const result = checkOperations(kvModel, ops, { exploreAllPartitions: true });
    expect(result.result).toBe('illegal');
    expect(result.partitions.map((p) => [p.operationCount, p.result])).toEqual([
      [3, 'illegal'],
      [2, 'ok'],
    ]);
    expect(result.partitions[0].stuckCandidates?.[0].input.key).toBe('a');
  });

  it('answers unknown when the time budget runs out', () => {
    // Twelve concurrent appends and a get no order of them explains: a large search space.
    const appends = Array.from({ length: 12 }, (_, i) => kv(i, 'append', 'k', `<${i}>`, 0, 100));
    const impossible = kv(99, 'get', 'k', 'nope', 101, 102);
    const result = checkOperations(kvModel, [...appends, impossible], { timeoutMs: 0 });
    expect(result.result).toBe('unknown');
    expect(result.partitions[0].result).toBe('unknown');
  });
});
