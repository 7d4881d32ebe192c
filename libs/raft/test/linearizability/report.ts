// Renders a check result for a human: which partitions failed, the longest linearizable
// prefix (as the model describes operations and states) and the operations stuck after it.

import type { CheckResult, Model, Operation } from './model';

function describe<S, I, O>(model: Model<S, I, O>, op: Operation<I, O>): string {
  const what = model.describeOperation ? model.describeOperation(op.input, op.output) : JSON.stringify({ input: op.input, output: op.output });
  const until = op.return === Infinity ? 'never returned' : `returned ${op.return}`;
  return `client ${op.clientId}: ${what}  [called ${op.call}, ${until}]`;
}

/** A multi-line explanation of `result`; for an 'ok' result a single line. */
export function formatReport<S, I, O>(model: Model<S, I, O>, result: CheckResult<I, O>, maxPrefixShown = 10): string {
  const lines = [`${result.result}: ${result.partitions.length} partition(s)`];
  for (const part of result.partitions) {
    if (part.result === 'unknown') lines.push(`partition ${part.index} (${part.operationCount} ops): timed out`);
    if (part.result !== 'illegal') continue;
    const prefix = part.longestLinearizablePrefix ?? [];
    lines.push(`partition ${part.index} (${part.operationCount} ops): not linearizable; longest linearizable prefix has ${prefix.length} ops`);
    let state = model.init();
    for (const op of prefix) state = model.step(state, op.input, op.output).state;
    if (prefix.length > maxPrefixShown) lines.push(`  ... ${prefix.length - maxPrefixShown} earlier ops`);
    for (const op of prefix.slice(-maxPrefixShown)) lines.push(`  ${describe(model, op)}`);
    const shownState = model.describeState ? model.describeState(state) : JSON.stringify(state);
    lines.push(`  state after the prefix: ${shownState}; none of these can come next:`);
    for (const op of part.stuckCandidates ?? []) lines.push(`    ${describe(model, op)}`);
  }
  return lines.join('\n');
}
