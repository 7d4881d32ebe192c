// Parses the text logs of Jepsen's etcd register test into register-model operations.
//
// Lines of interest (tabs or spaces between fields; every other line is ignored):
//   INFO  jepsen.util - 3	:invoke	:cas	[3 0]
//   INFO  jepsen.util - 3	:ok	:read	nil
// `:fail` operations did not happen and are dropped; `:info` ones have an unknown outcome.

import { HistoryRecorder } from './history';
import type { Operation } from './model';
import type { RegisterInput, RegisterOutput, RegisterValue } from './models/register';

const EVENT_LINE = /jepsen\.util - (\d+)\s+:(invoke|ok|fail|info)\s+:(read|write|cas)\s+(.*?)\s*$/;

export interface JepsenParseOptions {
  /**
   * What a `:fail :cas` means. 'dropped' (default) takes `:fail` literally: the operation
   * did not happen. 'compare-failed' reads it as etcd's "compare failed" reply: the cas ran
   * and saw a value other than the expected one, which constrains the history further.
   */
  failedCas?: 'dropped' | 'compare-failed';
}

function parseRegisterValue(text: string): RegisterValue {
  if (text === 'nil') return null;
  const number = Number(text);
  if (text === '' || Number.isNaN(number)) throw new SyntaxError(`not a register value: ${JSON.stringify(text)}`);
  return number;
}

function parseInput(f: string, argument: string): RegisterInput {
  switch (f) {
    case 'read':
      return { op: 'read' };
    case 'write':
      return { op: 'write', value: parseRegisterValue(argument) };
    default: {
      const pair = /^\[(\S+)\s+(\S+)\]$/.exec(argument);
      if (!pair) throw new SyntaxError(`cas needs [expected next], got ${JSON.stringify(argument)}`);
      return { op: 'cas', expected: parseRegisterValue(pair[1]), next: parseRegisterValue(pair[2]) };
    }
  }
}

export function parseJepsenLog(text: string, options: JepsenParseOptions = {}): Operation<RegisterInput, RegisterOutput>[] {
  const recorder = new HistoryRecorder<RegisterInput, RegisterOutput>();
  const lines = text.split('\n');
  for (let lineNumber = 1; lineNumber <= lines.length; lineNumber++) {
    const match = EVENT_LINE.exec(lines[lineNumber - 1]);
    if (!match) continue;
    const [, process, type, f, argument] = match;
    const clientId = Number(process);
    try {
      switch (type) {
        case 'invoke':
          recorder.invoke(clientId, parseInput(f, argument));
          break;
        case 'ok':
          recorder.ok(clientId, f === 'read' ? { value: parseRegisterValue(argument) } : f === 'cas' ? { ok: true } : {});
          break;
        case 'fail':
          if (f === 'cas' && options.failedCas === 'compare-failed') recorder.ok(clientId, { ok: false });
          else recorder.fail(clientId);
          break;
        case 'info':
          recorder.info(clientId);
          break;
      }
    } catch (error) {
      throw new SyntaxError(`line ${lineNumber}: ${(error as Error).message}`, { cause: error });
    }
  }
  return recorder.operations();
}
