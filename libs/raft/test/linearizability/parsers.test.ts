import { describe, expect, it } from 'vitest';
import { HistoryRecorder } from './history';
import { EdnKeyword, parseEdn, parseKvHistory } from './parse-edn';
import { parseJepsenLog } from './parse-jepsen';

describe('HistoryRecorder', () => {
  it('stamps events from one clock, drops failures and leaves unknown outcomes open-ended', () => {
    const history = new HistoryRecorder<string, string>();
    history.invoke(1, 'a'); // t0
    history.invoke(2, 'b'); // t1
    history.ok(1, 'A'); // t2
    history.fail(2); // t3
    history.invoke(2, 'c'); // t4
    history.info(2); // t5
    history.invoke(3, 'd'); // t6, still in flight
    expect(history.operations()).toEqual([
      { clientId: 1, input: 'a', call: 0, output: 'A', return: 2 },
      { clientId: 2, input: 'c', call: 4, output: undefined, return: Infinity },
      { clientId: 3, input: 'd', call: 6, output: undefined, return: Infinity },
    ]);
  });

  it('refuses a second invoke from a client with an operation in flight', () => {
    const history = new HistoryRecorder<string, string>();
    history.invoke(1, 'a');
    expect(() => history.invoke(1, 'b')).toThrow(/still pending/);
    expect(() => history.ok(2, 'x')).toThrow(/never invoked/);
  });
});

describe('parseJepsenLog', () => {
  const log = [
    'INFO  jepsen.util - 0\t:invoke\t:read\tnil',
    'INFO  jepsen.core - some unrelated line',
    'INFO  jepsen.util - 1\t:invoke\t:cas\t[3 0]',
    'INFO  jepsen.util - 0\t:ok\t:read\tnil',
    'INFO  jepsen.util - 2   :invoke :write  4', // spaces instead of tabs occur in the corpus
    'INFO  jepsen.util - 1\t:fail\t:cas\t[3 0]',
    'INFO  jepsen.util - 2\t:info\t:write\t:timed-out',
    'INFO  jepsen.util - 7\t:invoke\t:cas\t[4 1]',
    'INFO  jepsen.util - 7\t:ok\t:cas\t[4 1]',
  ].join('\n');

  it('turns invoke/ok pairs into operations, drops :fail and leaves :info open-ended', () => {
    expect(parseJepsenLog(log)).toEqual([
      { clientId: 0, input: { op: 'read' }, call: 0, output: { value: null }, return: 2 },
      { clientId: 2, input: { op: 'write', value: 4 }, call: 3, output: undefined, return: Infinity },
      { clientId: 7, input: { op: 'cas', expected: 4, next: 1 }, call: 6, output: { ok: true }, return: 7 },
    ]);
  });

  it('can read a failed cas as an observed failed comparison', () => {
    const ops = parseJepsenLog(log, { failedCas: 'compare-failed' });
    expect(ops).toContainEqual({ clientId: 1, input: { op: 'cas', expected: 3, next: 0 }, call: 1, output: { ok: false }, return: 4 });
  });

  it('names the line of a malformed event', () => {
    expect(() => parseJepsenLog('INFO  jepsen.util - 0\t:invoke\t:cas\t5')).toThrow(/line 1: cas needs/);
  });
});

describe('parseEdn', () => {
  it('reads maps with keyword keys, strings with escapes, integers, nil, booleans and vectors', () => {
    const value = parseEdn('{:a 1, :b "x \\"y\\"", :c nil, :d [1 :k true], :e -3}');
    expect(value).toEqual({ a: 1, b: 'x "y"', c: null, d: [1, new EdnKeyword('k'), true], e: -3 });
  });

  it('rejects what it does not understand rather than guessing', () => {
    expect(() => parseEdn('{:a 1.5}')).toThrow(SyntaxError);
    expect(() => parseEdn('{:a "open}')).toThrow(/unterminated/);
    expect(() => parseEdn('{:a 1} extra')).toThrow(/trailing/);
  });
});

describe('parseKvHistory', () => {
  it('reads get/put/append events, with a nil read as the empty string', () => {
    const text = [
      '{:process 0, :type :invoke, :f :get, :key "7", :value nil}',
      '{:process 1, :type :invoke, :f :append, :key "7", :value "x 1 0 y"}',
      '{:process 0, :type :ok, :f :get, :key "7", :value nil}',
      '{:process 1, :type :ok, :f :append, :key "7", :value "x 1 0 y"}',
      '{:process 0, :type :invoke, :f :put, :key "3", :value "z"}',
      '{:process 0, :type :info, :f :put, :key "3", :value "z"}',
      '',
    ].join('\n');
    expect(parseKvHistory(text)).toEqual([
      { clientId: 0, input: { op: 'get', key: '7', value: '' }, call: 0, output: { value: '' }, return: 2 },
      { clientId: 1, input: { op: 'append', key: '7', value: 'x 1 0 y' }, call: 1, output: { value: '' }, return: 3 },
      { clientId: 0, input: { op: 'put', key: '3', value: 'z' }, call: 4, output: undefined, return: Infinity },
    ]);
  });

  it('names the line of a malformed event', () => {
    expect(() => parseKvHistory('{:process 0, :type :invoke, :f :cas, :key "1", :value "x"}')).toThrow(/line 1: unknown :f cas/);
  });
});
