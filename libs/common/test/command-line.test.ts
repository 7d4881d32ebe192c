// parseCommandLine: what kcm-manager and kcm-agent do with their flags and variables, decided
// without I/O. The programs themselves are run as processes in their own packages' tests.

import { describe, expect, it } from 'vitest';
import { checkPort, parseCommandLine, versionLine, type CommandSpec } from '../src/command-line';
import { KCM_PROTOCOL, KCM_VERSION } from '../src/kcm-protocol';

const SPEC: CommandSpec = {
  program: 'kcm-test',
  summary: 'a program under test',
  synopsis: '[--port <port>] [--insecure]',
  envPrefix: 'KCM_TEST_',
  options: {
    port: { type: 'string', value: '<port>', env: 'KCM_TEST_PORT', default: '58100', check: checkPort, help: 'the port' },
    dir: { type: 'string', value: '<dir>', env: 'KCM_TEST_DIR', help: 'a folder' },
    insecure: { type: 'boolean', env: 'KCM_TEST_INSECURE', help: 'no TLS' },
  },
};

const problem = (argv: string[], env: Record<string, string> = {}) => {
  const outcome = parseCommandLine(SPEC, argv, env);
  if (outcome.kind !== 'exit') throw new Error(`expected an exit, got values ${JSON.stringify(outcome.values)}`);
  return outcome;
};

describe('parseCommandLine', () => {
  it('--version prints `<program> <release> (kcm-protocol N)` on stdout, exit 0', () => {
    expect(problem(['--version'])).toEqual({ kind: 'exit', code: 0, stream: 'stdout', text: `kcm-test ${KCM_VERSION} (kcm-protocol ${KCM_PROTOCOL})\n` });
    expect(versionLine('kcm')).toBe(`kcm ${KCM_VERSION} (kcm-protocol ${KCM_PROTOCOL})`);
  });

  it('--help prints the usage with every flag, its variable and default, exit 0, even beside a bad flag', () => {
    const help = problem(['--nonsense', '--help']);
    expect(help).toMatchObject({ code: 0, stream: 'stdout' });
    expect(help.text).toContain('usage: kcm-test [--port <port>] [--insecure]');
    expect(help.text).toMatch(/--port <port> +the port \(env KCM_TEST_PORT\) \[default 58100\]/);
    expect(help.text).toMatch(/--version +print the version and exit/);
  });

  it('an unknown flag, a flag without its value and a stray argument are one line naming them, exit 2', () => {
    expect(problem(['--prot', '1'])).toEqual({ kind: 'exit', code: 2, stream: 'stderr', text: 'kcm-test: unknown flag --prot; see kcm-test --help\n' });
    expect(problem(['--port'])).toMatchObject({ code: 2, text: 'kcm-test: --port needs a value\n' });
    expect(problem(['--insecure=yes'])).toMatchObject({ code: 2, text: 'kcm-test: --insecure takes no value\n' });
    expect(problem(['extra'])).toMatchObject({ code: 2, text: 'kcm-test: unexpected argument extra; see kcm-test --help\n' });
  });

  it('a bad value names where it came from: the flag, or the variable behind it', () => {
    expect(problem(['--port', '70000']).text).toBe('kcm-test: --port: must be a port number (1-65535), got "70000"\n');
    expect(problem([], { KCM_TEST_PORT: 'abc' }).text).toBe('kcm-test: KCM_TEST_PORT: must be a port number (1-65535), got "abc"\n');
    expect(problem([], { KCM_TEST_INSECURE: 'yes' }).text).toBe('kcm-test: KCM_TEST_INSECURE: must be 1 or 0, got "yes"\n');
  });

  it('a variable with the program prefix that is no option is refused by name, not ignored', () => {
    const out = problem([], { KCM_TEST_PORT: '1', KCM_TEST_DIRR: '/x', OTHER: 'y' });
    expect(out).toMatchObject({ code: 2, stream: 'stderr' });
    expect(out.text).toMatch(/^kcm-test: unknown environment variable KCM_TEST_DIRR; known: KCM_TEST_DIR, KCM_TEST_INSECURE, KCM_TEST_PORT\n$/);
  });

  it('a flag wins over its variable, which wins over the default', () => {
    expect(parseCommandLine(SPEC, ['--port', '1', '--insecure'], { KCM_TEST_PORT: '2', KCM_TEST_DIR: '/d' })).toEqual({ kind: 'run', values: { port: '1', dir: '/d', insecure: true } });
    expect(parseCommandLine(SPEC, [], { KCM_TEST_PORT: '2', KCM_TEST_INSECURE: '1' })).toEqual({ kind: 'run', values: { port: '2', dir: undefined, insecure: true } });
    expect(parseCommandLine(SPEC, [], {})).toEqual({ kind: 'run', values: { port: '58100', dir: undefined, insecure: false } });
  });
});
