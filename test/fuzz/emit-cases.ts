// Fuzz cases for Emit, built from every request in test/fixtures/emit: mutated envelopes
// (fields dropped, duplicated, retyped, huge, prototype names as keys and values, deep
// nesting, wrong or prototype job_type, unicode), broken JSON, wrong content types, giant
// bodies, bad or missing tokens, and random bytes. Seeded, so a failing case replays.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../manager/helpers/processes';

export interface FuzzCase {
  /** What was done to the fixture, for the report of a failing case. */
  what: string;
  body: string;
  contentType: string | null;
  /** 'admin' | 'viewer' | 'none' | 'bad': which Authorization header goes with it. */
  auth: 'admin' | 'viewer' | 'none' | 'bad';
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export function loadFixtures(): { name: string; envelope: Record<string, Json> }[] {
  const dir = path.join(REPO_ROOT, 'test/fixtures/emit');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ name: f.replace(/\.json$/, ''), envelope: JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as Record<string, Json> }));
}

const PROTO_NAMES = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__', 'isPrototypeOf'];
const UNICODE = ['\u0000', '\uFEFF', '\u202E', '\uD800', '😀', 'é', '\u0301', 'ﬀ', '\u2028', '𝔘𝔫𝔦'];
const ODD_VALUES: Json[] = [null, true, false, 0, -1, 1e308, -0, 1.5, '', ' ', '0', '-1', '99999999999999999999', 'NaN', 'Infinity', [], {}, [null], { a: 1 }];

export class CaseMaker {
  private readonly fixtures = loadFixtures();
  constructor(private readonly rnd: () => number) {}

  private pick<T>(list: readonly T[]): T {
    return list[Math.floor(this.rnd() * list.length)];
  }

  private chance(p: number): boolean {
    return this.rnd() < p;
  }

  private oddString(): string {
    switch (Math.floor(this.rnd() * 6)) {
      case 0: return this.pick(PROTO_NAMES);
      case 1: return Array.from({ length: 1 + Math.floor(this.rnd() * 8) }, () => this.pick(UNICODE)).join('');
      case 2: return 'x'.repeat(1 + Math.floor(this.rnd() * 100_000));
      case 3: return `${this.pick(['127.0.2.1', '../../etc', '/tmp/$(id)', "'; DROP TABLE x;--", '%s%n', '${x}'])}${this.pick(UNICODE)}`;
      case 4: return String(Math.floor(this.rnd() * 1e6) - 1000);
      default: return this.pick(['rbr', 'mgr', 'quota', 'share', 'storage', 'computer', 'running', 'dead', '1', '-1', 'add_peer', 'get_status']);
    }
  }

  private oddValue(depth = 0): Json {
    const r = this.rnd();
    if (r < 0.3) return this.oddString();
    if (r < 0.55) return this.pick(ODD_VALUES);
    if (r < 0.7 && depth < 3) return Array.from({ length: Math.floor(this.rnd() * 4) }, () => this.oddValue(depth + 1));
    if (r < 0.8) return this.deep(1 + Math.floor(this.rnd() * 500));
    if (depth < 3) {
      const o: Record<string, Json> = Object.create(null);
      for (let i = 0; i < 3; i++) o[this.chance(0.5) ? this.pick(PROTO_NAMES) : this.oddString().slice(0, 40)] = this.oddValue(depth + 1);
      return o;
    }
    return this.oddString();
  }

  /** {"a":{"a":...}} or [[[...]]] `levels` deep. */
  private deep(levels: number): Json {
    let v: Json = this.chance(0.5) ? 'bottom' : null;
    const arrays = this.chance(0.5);
    for (let i = 0; i < levels; i++) v = arrays ? [v] : { a: v };
    return v;
  }

  /** One mutation of an object in place (keys chosen among its own). */
  private mutateObject(o: Record<string, Json>): string {
    const keys = Object.keys(o);
    const key = keys.length > 0 ? this.pick(keys) : this.pick(PROTO_NAMES);
    switch (Math.floor(this.rnd() * 7)) {
      case 0:
        delete o[key];
        return `drop ${key}`;
      case 1:
        o[key] = this.oddValue();
        return `retype ${key}`;
      case 2: {
        const name = this.pick(PROTO_NAMES);
        Object.defineProperty(o, name, { value: this.oddValue(), enumerable: true, configurable: true, writable: true });
        return `add ${name}`;
      }
      case 3:
        o[key] = this.pick(PROTO_NAMES);
        return `${key} = prototype name`;
      case 4:
        o[`${key}${this.pick(UNICODE)}`] = o[key] ?? null;
        return `unicode twin of ${key}`;
      case 5:
        o[this.oddString().slice(0, 60)] = this.oddValue();
        return 'extra field';
      default:
        if (typeof o[key] === 'string') o[key] = `${o[key] as string}${this.pick(UNICODE)}`;
        return `unicode in ${key}`;
    }
  }

  /** A mutated envelope as JSON text (with a duplicated key now and then, which JSON.stringify cannot make). */
  private mutatedEnvelope(): { what: string; body: string } {
    const fixture = this.pick(this.fixtures);
    const env = structuredClone(fixture.envelope);
    // raft_mission with a valid task changes the group itself: its mutations keep task_type invalid.
    const what: string[] = [fixture.name];
    const rounds = 1 + Math.floor(this.rnd() * 3);
    for (let i = 0; i < rounds; i++) {
      const target = this.chance(0.6) && env.paras && typeof env.paras === 'object' && !Array.isArray(env.paras) ? (env.paras as Record<string, Json>) : env;
      what.push(this.mutateObject(target));
    }
    if (this.chance(0.15)) {
      env.job_type = this.chance(0.5) ? this.pick(PROTO_NAMES) : this.pick(this.fixtures).name;
      what.push(`job_type ${String(env.job_type)}`);
    }
    if (env.job_type === 'raft_mission' && env.paras && typeof env.paras === 'object' && !Array.isArray(env.paras)) {
      const task = (env.paras as Record<string, Json>).task_type;
      (env.paras as Record<string, Json>).task_type = `no_${typeof task === 'string' ? task : 'task'}`;
    }
    let body = JSON.stringify(env);
    if (this.chance(0.05)) {
      body = body.replace(/^\{/, `{"job_type":${JSON.stringify(this.pick(PROTO_NAMES))},`);
      what.push('duplicate job_type key');
    }
    return { what: what.join('; '), body };
  }

  private brokenJson(): { what: string; body: string } {
    const text = JSON.stringify(this.pick(this.fixtures).envelope);
    switch (Math.floor(this.rnd() * 6)) {
      case 0: return { what: 'truncated JSON', body: text.slice(0, Math.floor(this.rnd() * text.length)) };
      case 1: return { what: 'trailing garbage', body: `${text}}${this.pick(UNICODE)}` };
      case 2: return { what: 'not an object', body: JSON.stringify(this.oddValue()) };
      case 3: return { what: 'empty body', body: '' };
      case 4: return { what: 'random bytes', body: Buffer.from(Array.from({ length: Math.floor(this.rnd() * 300) }, () => Math.floor(this.rnd() * 256))).toString('latin1') };
      default: {
        // Built as text: deeper than JSON.stringify itself can go.
        const levels = 1 + Math.floor(this.rnd() * 100_000);
        const [open, close] = this.chance(0.5) ? ['{"a":', '}'] : ['[', ']'];
        const env = JSON.stringify({ ...this.pick(this.fixtures).envelope, paras: 'DEEP' });
        return { what: `deep nesting ${levels}`, body: env.replace('"DEEP"', `${open.repeat(levels)}1${close.repeat(levels)}`) };
      }
    }
  }

  next(): FuzzCase {
    const r = this.rnd();
    const { what, body } =
      r < 0.7 ? this.mutatedEnvelope()
      : r < 0.9 ? this.brokenJson()
      : r < 0.91 ? { what: 'giant body', body: JSON.stringify({ ...this.pick(this.fixtures).envelope, user_name: 'y'.repeat(1_100_000) }) }
      : { what: 'fixture as is', body: JSON.stringify(this.pick(this.fixtures).envelope, (k, v) => (k === 'task_type' ? `no_${v}` : v)) };
    const c = this.rnd();
    const contentType = c < 0.85 ? 'application/json' : this.pick([null, 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', 'application/JSON', '*/*', '']);
    const a = this.rnd();
    const auth = a < 0.9 ? 'admin' : a < 0.95 ? 'viewer' : a < 0.98 ? 'none' : 'bad';
    return { what: `${what} [${contentType ?? 'no content-type'}, ${auth}]`, body, contentType, auth };
  }
}
