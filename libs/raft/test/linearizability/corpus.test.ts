// The checker against histories whose verdicts are known (Jepsen's etcd runs and porcupine's
// key-value histories): every verdict must match, within a time budget.

import { describe, expect, it } from 'vitest';
import { checkOperations } from './checker';
import { jepsenCases, KV_CASES, readCorpusFile } from './corpus';
import { kvModel } from './models/kv';
import { registerModel } from './models/register';
import { parseKvHistory } from './parse-edn';
import { parseJepsenLog } from './parse-jepsen';

/** Per history; far above what any needs (well under a second each), so 'unknown' means a regression. */
const TIMEOUT_MS = 20_000;

describe('the known-verdict corpus', () => {
  it('gets all 102 Jepsen etcd verdicts right (23 linearizable, 79 not)', () => {
    const cases = jepsenCases();
    const tally = { ok: 0, illegal: 0, unknown: 0 };
    const started = Date.now();
    for (const { file, linearizable } of cases) {
      const history = parseJepsenLog(readCorpusFile(file));
      const { result } = checkOperations(registerModel, history, { timeoutMs: TIMEOUT_MS });
      expect(result, file).toBe(linearizable ? 'ok' : 'illegal');
      tally[result]++;
    }
    console.log(`jepsen: ${cases.length} histories, ${tally.ok} linearizable, ${tally.illegal} not, in ${Date.now() - started} ms`);
    expect(tally).toEqual({ ok: 23, illegal: 79, unknown: 0 });
  });

  for (const { file, linearizable } of KV_CASES) {
    it(`finds ${file} ${linearizable ? 'linearizable' : 'not linearizable'}, checking each key on its own`, () => {
      const history = parseKvHistory(readCorpusFile(file));
      const started = Date.now();
      const result = checkOperations(kvModel, history, { timeoutMs: TIMEOUT_MS });
      const keys = new Set(history.map((op) => op.input.key)).size;
      console.log(`${file}: ${history.length} ops, ${keys} keys, ${result.result} in ${Date.now() - started} ms`);
      expect(result.result).toBe(linearizable ? 'ok' : 'illegal');
      expect(result.partitions).toHaveLength(keys);
      if (!linearizable) expect(result.partitions.some((p) => p.result === 'illegal')).toBe(true);
    });
  }
});
