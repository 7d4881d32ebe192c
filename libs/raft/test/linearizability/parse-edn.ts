// Reads the key-value histories of the corpus: one EDN map per line, e.g.
//   {:process 9, :type :invoke, :f :append, :key "0", :value "x 9 0 y"}
// The EDN reader covers what such histories use: maps with keyword keys, vectors and
// lists, keywords, strings, integers, nil and booleans. Commas are whitespace in EDN.

import { HistoryRecorder } from './history';
import type { Operation } from './model';
import type { KvInput, KvOutput } from './models/kv';

export class EdnKeyword {
  constructor(readonly name: string) {}
}

export type EdnValue = null | boolean | number | string | EdnKeyword | EdnValue[] | { [key: string]: EdnValue };

const DELIMITERS = new Set([' ', '\t', '\n', '\r', ',', '{', '}', '[', ']', '(', ')', '"']);
const STRING_ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\' };

class EdnReader {
  private position = 0;
  constructor(private readonly text: string) {}

  readTopLevel(): EdnValue {
    const value = this.read();
    this.skipWhitespace();
    if (this.position < this.text.length) this.fail('trailing characters');
    return value;
  }

  private read(): EdnValue {
    this.skipWhitespace();
    const c = this.text[this.position];
    if (c === undefined) this.fail('unexpected end');
    if (c === '{') return this.readMap();
    if (c === '[' || c === '(') return this.readSequence(c === '[' ? ']' : ')');
    if (c === '"') return this.readString();
    const token = this.readToken();
    if (token.startsWith(':')) return new EdnKeyword(token.slice(1));
    if (token === 'nil') return null;
    if (token === 'true' || token === 'false') return token === 'true';
    if (/^[-+]?\d+$/.test(token)) return Number(token);
    return this.fail(`unsupported token ${JSON.stringify(token)}`);
  }

  private readMap(): { [key: string]: EdnValue } {
    this.position++; // {
    const map: { [key: string]: EdnValue } = {};
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.position] === '}') {
        this.position++;
        return map;
      }
      const key = this.read();
      if (!(key instanceof EdnKeyword)) return this.fail('only keyword map keys are supported');
      map[key.name] = this.read();
    }
  }

  private readSequence(close: string): EdnValue[] {
    this.position++; // [ or (
    const items: EdnValue[] = [];
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.position] === close) {
        this.position++;
        return items;
      }
      items.push(this.read());
    }
  }

  private readString(): string {
    let result = '';
    for (this.position++; ; this.position++) {
      const c = this.text[this.position];
      if (c === undefined) this.fail('unterminated string');
      if (c === '"') break;
      if (c === '\\') {
        const escaped = STRING_ESCAPES[this.text[++this.position]];
        if (escaped === undefined) this.fail('unsupported escape');
        result += escaped;
      } else {
        result += c;
      }
    }
    this.position++;
    return result;
  }

  private readToken(): string {
    const start = this.position;
    while (this.position < this.text.length && !DELIMITERS.has(this.text[this.position])) this.position++;
    if (this.position === start) this.fail(`unexpected ${JSON.stringify(this.text[start])}`);
    return this.text.slice(start, this.position);
  }

  private skipWhitespace(): void {
    while (this.position < this.text.length && /[\s,]/.test(this.text[this.position])) this.position++;
  }

  private fail(why: string): never {
    throw new SyntaxError(`EDN: ${why} at offset ${this.position}`);
  }
}

/** Parse one EDN value (the whole text must be that value). */
export function parseEdn(text: string): EdnValue {
  return new EdnReader(text).readTopLevel();
}

function keywordField(event: { [key: string]: EdnValue }, field: string): string {
  const value = event[field];
  if (!(value instanceof EdnKeyword)) throw new SyntaxError(`:${field} must be a keyword`);
  return value.name;
}

function stringField(event: { [key: string]: EdnValue }, field: string): string {
  const value = event[field];
  if (typeof value !== 'string') throw new SyntaxError(`:${field} must be a string`);
  return value;
}

/**
 * Parse a key-value history, one event map per line. `:ok` gets carry the value read
 * (nil counts as ''); `:fail` operations are dropped; `:info` ones have an unknown outcome.
 */
export function parseKvHistory(text: string): Operation<KvInput, KvOutput>[] {
  const recorder = new HistoryRecorder<KvInput, KvOutput>();
  const lines = text.split('\n');
  for (let lineNumber = 1; lineNumber <= lines.length; lineNumber++) {
    const line = lines[lineNumber - 1].trim();
    if (line === '') continue;
    try {
      const event = parseEdn(line);
      if (event === null || typeof event !== 'object' || Array.isArray(event) || event instanceof EdnKeyword) {
        throw new SyntaxError('each line must be a map');
      }
      const process = event.process;
      if (typeof process !== 'number') throw new SyntaxError(':process must be an integer');
      const type = keywordField(event, 'type');
      const f = keywordField(event, 'f');
      if (f !== 'get' && f !== 'put' && f !== 'append') throw new SyntaxError(`unknown :f ${f}`);
      const value = event.value === null ? '' : stringField(event, 'value');
      switch (type) {
        case 'invoke':
          recorder.invoke(process, { op: f, key: stringField(event, 'key'), value: f === 'get' ? '' : value });
          break;
        case 'ok':
          recorder.ok(process, { value: f === 'get' ? value : '' });
          break;
        case 'fail':
          recorder.fail(process);
          break;
        case 'info':
          recorder.info(process);
          break;
        default:
          throw new SyntaxError(`unknown :type ${type}`);
      }
    } catch (error) {
      throw new SyntaxError(`line ${lineNumber}: ${(error as Error).message}`, { cause: error });
    }
  }
  return recorder.operations();
}
