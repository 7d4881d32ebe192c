// Check a history file from the command line and explain the verdict:
//   npx tsx libs/raft/test/linearizability/check-history.ts jepsen <file.log> [timeoutMs]
//   npx tsx libs/raft/test/linearizability/check-history.ts kv <file.edn> [timeoutMs]
// Exit status: 0 linearizable, 1 not linearizable, 2 unknown (timed out), 3 bad usage.

import { readFileSync } from 'node:fs';
import { checkOperations } from './checker';
import type { Model, Operation } from './model';
import { kvModel } from './models/kv';
import { registerModel } from './models/register';
import { parseKvHistory } from './parse-edn';
import { parseJepsenLog } from './parse-jepsen';
import { formatReport } from './report';

function checkAndExplain<S, I, O>(model: Model<S, I, O>, history: Operation<I, O>[], timeoutMs: number): number {
  const started = Date.now();
  const result = checkOperations(model, history, { timeoutMs });
  console.log(formatReport(model, result));
  console.log(`${history.length} operations checked in ${Date.now() - started} ms`);
  return result.result === 'ok' ? 0 : result.result === 'illegal' ? 1 : 2;
}

const [format, file, timeout] = process.argv.slice(2);
const timeoutMs = timeout === undefined ? 60_000 : Number(timeout);
if ((format !== 'jepsen' && format !== 'kv') || !file || !(timeoutMs >= 0)) {
  console.error('usage: check-history.ts jepsen|kv <file> [timeoutMs]');
  process.exit(3);
}
const text = readFileSync(file, 'utf8');
process.exitCode =
  format === 'jepsen' ? checkAndExplain(registerModel, parseJepsenLog(text), timeoutMs) : checkAndExplain(kvModel, parseKvHistory(text), timeoutMs);
