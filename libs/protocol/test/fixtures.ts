/** Loads the request fixtures in test/fixtures/emit: one valid request per canonical job type. */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const FIXTURE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../../test/fixtures/emit');

export type Envelope = Record<string, unknown> & { paras: Record<string, unknown> };

export function fixtureNames(): string[] {
  return readdirSync(FIXTURE_DIR)
    .filter((f) => f.endsWith('.json'))
    .map((f) => basename(f, '.json'))
    .sort();
}

/** A fresh deep copy each call, so a test may mutate it. */
export function loadFixture(jobType: string): Envelope {
  return JSON.parse(readFileSync(resolve(FIXTURE_DIR, `${jobType}.json`), 'utf8')) as Envelope;
}
