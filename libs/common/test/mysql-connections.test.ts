// Every mysql2 connection kcm's services open carries ONE_SHOT_MYSQL_OPTIONS: without it
// mysql2 allocates a 16,000-entry prepared-statement cache per connection, ~10x the CPU of
// the connection itself (see mysql-connections.ts). A new call site that forgets it fails here.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(__dirname, '../../..');

function sourcesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return name === 'test' || name === 'node_modules' ? [] : sourcesUnder(full);
    return full.endsWith('.ts') ? [full] : [];
  });
}

describe('mysql2 connections opened by kcm services', () => {
  const sites = [...sourcesUnder(path.join(ROOT, 'services')), ...sourcesUnder(path.join(ROOT, 'libs'))].flatMap((file) =>
    [...readFileSync(file, 'utf8').matchAll(/mysql\.create(?:Connection|Pool)\(\{([^]*?)\}\)/g)].map((m) => ({ file: path.relative(ROOT, file), options: m[1] })),
  );

  it('are found (the scan itself works)', () => {
    expect(sites.length).toBeGreaterThanOrEqual(5);
  });

  it('carry ONE_SHOT_MYSQL_OPTIONS (a prepared-statement cache of one)', () => {
    expect(sites.filter((s) => !s.options.includes('...ONE_SHOT_MYSQL_OPTIONS')).map((s) => s.file)).toEqual([]);
  });
});
