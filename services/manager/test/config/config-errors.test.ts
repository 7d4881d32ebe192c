// A manager's config is checked strictly: a misspelt key is named (with the key it probably
// meant) instead of being ignored while its default silently applies, and every problem is
// one message naming the file and the key.

import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadManagerConfig, managerConfigSchema, parseManagerConfig } from '../../src/config';

const BASE = { member: '127.0.0.1:58000', dataDir: '/var/lib/kcm/manager' };
const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

function fileWith(text: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'kcm-config-')), 'manager.json');
  writeFileSync(file, text);
  return file;
}

describe('manager config errors', () => {
  it('a misspelt top-level key is refused by name, with the key it resembles', () => {
    expect(() => parseManagerConfig({ ...BASE, agentPrt: 58100 }, 'config m.json')).toThrow('config m.json: unknown key "agentPrt" (did you mean agentPort?)');
    expect(() => parseManagerConfig({ ...BASE, healthintervalms: 1 }, 'm')).toThrow('m: unknown key "healthintervalms" (did you mean healthIntervalMs?)');
    expect(() => parseManagerConfig({ ...BASE, colour: 'blue' }, 'm')).toThrow(/^m: unknown key "colour"$/);
  });

  it('unknown keys inside tls and a token are named with their path', () => {
    const tokens = [{ name: 'admin', role: 'admin', sha256: 'a'.repeat(64), secret: 'x' }];
    expect(() => parseManagerConfig({ ...BASE, tokens }, 'm')).toThrow('m: unknown key "tokens.0.secret"');
    expect(() => parseManagerConfig({ ...BASE, tls: { ca: 'a', cert: 'b', key: 'c', kye: 'd' } }, 'm')).toThrow('m: unknown key "tls.kye"');
  });

  it('the unknown key comes before the "required" its misspelling causes', () => {
    expect(() => parseManagerConfig({ member: BASE.member, dataDirr: '/x' }, 'm')).toThrow('m: unknown key "dataDirr" (did you mean dataDir?); dataDir: required, missing');
  });

  it('a bad value names its key', () => {
    expect(() => parseManagerConfig({ ...BASE, agentPort: 70000 }, 'm')).toThrow(/^m: agentPort: .*65535/);
  });

  it('an unreadable file and a file that is not JSON are one message naming the file', () => {
    expect(() => loadManagerConfig('/nonexistent/kcm/manager.json')).toThrow('config /nonexistent/kcm/manager.json: cannot read it (ENOENT)');
    const broken = fileWith('{ "member": ');
    expect(() => loadManagerConfig(broken)).toThrow(new RegExp(`^config ${broken}: not valid JSON \\(`));
    expect(loadManagerConfig(fileWith(JSON.stringify(BASE))).dataDir).toBe(BASE.dataDir);
  });

  it('the sample configs in deploy/config use only known keys', () => {
    for (const name of ['manager-m1.json', 'manager-m2.json', 'manager-m3.json']) {
      const sample = JSON.parse(readFileSync(path.join(REPO_ROOT, 'deploy/config', name), 'utf8')) as unknown;
      const issues = managerConfigSchema.safeParse(sample).error?.issues ?? [];
      expect(issues.filter((issue) => issue.code === 'unrecognized_keys'), name).toEqual([]);
    }
  });
});
