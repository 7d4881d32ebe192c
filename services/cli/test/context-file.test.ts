import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ContextFileError, contextFilePath, loadContext, readContextFile, saveContext, useContext } from '../src/context-file';

function scratch(): string {
  return mkdtempSync(path.join(tmpdir(), 'kcm-context-'));
}

describe('the CLI context file', () => {
  it('is $KCM_CONFIG, else ~/.config/kcm/config.json', () => {
    expect(contextFilePath({ KCM_CONFIG: '/x/kcm.json', HOME: '/home/a' })).toBe('/x/kcm.json');
    expect(contextFilePath({ HOME: '/home/a' })).toBe('/home/a/.config/kcm/config.json');
  });

  it('saves a context (0600, absolute paths), makes the first one current and loads it back', () => {
    const dir = scratch();
    const file = path.join(dir, 'sub', 'config.json');
    saveContext({ name: 'prod', endpoints: ['https://10.0.0.1:58000/', 'https://10.0.0.2:58000'], caFile: path.join(dir, 'ca.pem'), tokenFile: path.join(dir, 'token') }, file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({
      current: 'prod',
      contexts: { prod: { endpoints: ['https://10.0.0.1:58000', 'https://10.0.0.2:58000'], ca: path.join(dir, 'ca.pem'), token_file: path.join(dir, 'token') } },
    });
    expect(loadContext(undefined, file)).toEqual({
      name: 'prod',
      endpoints: ['https://10.0.0.1:58000', 'https://10.0.0.2:58000'],
      caFile: path.join(dir, 'ca.pem'),
      tokenFile: path.join(dir, 'token'),
    });
  });

  it('a second context keeps the first current unless makeCurrent; use switches', () => {
    const file = path.join(scratch(), 'config.json');
    saveContext({ name: 'prod', endpoints: ['https://a:1'] }, file);
    saveContext({ name: 'local', endpoints: ['http://127.0.1.1:58000'] }, file);
    expect(loadContext(undefined, file)?.name).toBe('prod');
    expect(loadContext('local', file)?.endpoints).toEqual(['http://127.0.1.1:58000']);
    useContext('local', file);
    expect(readContextFile(file).current).toBe('local');
    saveContext({ name: 'staging', endpoints: ['https://s:1'], makeCurrent: true }, file);
    expect(readContextFile(file).current).toBe('staging');
    expect([...readContextFile(file).contexts.keys()]).toEqual(['prod', 'local', 'staging']);
  });

  it('no file is no context; an unknown name is an error naming the file', () => {
    const file = path.join(scratch(), 'absent.json');
    expect(loadContext(undefined, file)).toBeUndefined();
    expect(() => loadContext('prod', file)).toThrow(`${file}: no context "prod" (it has none)`);
    expect(() => useContext('prod', file)).toThrow(ContextFileError);
  });

  it('relative ca and token_file are read from the file\'s directory', () => {
    const dir = scratch();
    const file = path.join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ current: 'x', contexts: { x: { endpoints: ['https://h:1'], ca: 'ca.pem', token_file: 'tok' } } }));
    expect(loadContext(undefined, file)).toMatchObject({ caFile: path.join(dir, 'ca.pem'), tokenFile: path.join(dir, 'tok') });
  });

  it.each([
    ['not JSON', '{', 'not JSON'],
    ['an endpoint that is no URL', { contexts: { prod: { endpoints: ['10.0.0.1:58000'] } } }, 'contexts.prod.endpoints[0]: must be an http:// or https:// URL'],
    ['no endpoints', { contexts: { prod: { ca: 'x' } } }, 'contexts.prod.endpoints: must be a non-empty list'],
    ['a misspelt field', { contexts: { prod: { endpoints: ['https://h:1'], token: 'abc' } } }, 'contexts.prod.token: unknown field'],
    ['a current naming no context', { current: 'prod', contexts: {} }, 'current: names "prod", which is not in contexts'],
    ['a name like __proto__', '{"contexts":{"__proto__":{"endpoints":["https://h:1"]}}}', 'contexts.__proto__: bad context name'],
    ['a ca that is no path', { contexts: { prod: { endpoints: ['https://h:1'], ca: 3 } } }, 'contexts.prod.ca: must be the path of a PEM file'],
  ])('a bad file (%s) is one error naming the file and the field', (_what, content, message) => {
    const file = path.join(scratch(), 'config.json');
    writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
    let error: unknown;
    try {
      loadContext(undefined, file);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ContextFileError);
    expect((error as Error).message).toContain(`${file}: ${message}`);
    expect((error as Error).message).not.toContain('\n');
  });
});
