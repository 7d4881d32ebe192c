// The linearizability checker: public surface.
//
//   import { checkOperations, kvModel, HistoryRecorder } from '<this folder>';
//   const history = new HistoryRecorder<KvInput, KvOutput>();
//   history.invoke(client, { op: 'put', key: 'a', value: '1' });  ... history.ok(client, { value: '' });
//   const { result } = checkOperations(kvModel, history.operations(), { timeoutMs: 10_000 });
//   // result: 'ok' | 'illegal' | 'unknown' (timed out); formatReport() explains an illegal one.

export { checkOperations } from './checker';
export type { CheckOptions, CheckResult, Model, Operation, PartitionReport, StepResult, Verdict } from './model';
export { HistoryRecorder } from './history';
export { registerModel } from './models/register';
export type { RegisterInput, RegisterOutput, RegisterValue } from './models/register';
export { kvModel } from './models/kv';
export type { KvInput, KvOutput } from './models/kv';
export { parseJepsenLog } from './parse-jepsen';
export type { JepsenParseOptions } from './parse-jepsen';
export { parseEdn, parseKvHistory, EdnKeyword } from './parse-edn';
export type { EdnValue } from './parse-edn';
export { formatReport } from './report';
