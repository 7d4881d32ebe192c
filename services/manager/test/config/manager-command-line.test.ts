// kcm-manager as an operator meets it, run as a process: --help and --version answer and exit 0;
// a mistake in its flags or its config is exactly one line on stderr naming the flag or key,
// exit 2 (command line) or 1 (configuration), never a stack trace.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { versionLine } from '@kcm/common';
import { programFromSource, runProgram, expectOneStderrLine } from '../../../../test/helpers/run-program';

const MANAGER = programFromSource('manager');
const run = (args: string[], env: Record<string, string | undefined> = {}) => runProgram(MANAGER, args, { KCM_MANAGER_CONFIG: undefined, ...env });

function configFile(config: unknown): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'kcm-manager-cli-')), 'manager.json');
  writeFileSync(file, typeof config === 'string' ? config : JSON.stringify(config));
  return file;
}

/** The run printed exactly `expected` (a string or pattern) as its one stderr line and exited with `code`. */
async function expectOneLine(args: string[], code: number, expected: RegExp, env: Record<string, string | undefined> = {}) {
  const r = await run(args, env);
  expectOneStderrLine(r, code, expected);
  expect(r.stdout).toBe('');
}

describe('kcm-manager command line', () => {
  it('--help prints the usage with each flag on stdout, exit 0', async () => {
    const r = await run(['--help']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('usage: kcm-manager --config <file.json> [--insecure] [--restore-meta <backup>]');
    for (const flag of ['--config <file.json>', '--insecure', '--restore-meta <backup>', '--version']) expect(r.stdout).toContain(flag);
  });

  it('--version prints `kcm-manager <release> (kcm-protocol N)`, exit 0', async () => {
    const r = await run(['--version']);
    expect(r).toEqual({ code: 0, stdout: `${versionLine('kcm-manager')}\n`, stderr: '' });
  });

  it('an unknown flag is one line naming it, exit 2', async () => {
    await expectOneLine(['--confg', '/etc/kcm/m.json'], 2, /^kcm-manager: unknown flag --confg; see kcm-manager --help$/);
  });

  it('no config is one line naming --config and its variable, exit 2', async () => {
    await expectOneLine([], 2, /^kcm-manager: --config <file\.json> is required \(or KCM_MANAGER_CONFIG\)/);
  });

  it('a misspelt KCM_MANAGER_ variable is named, exit 2', async () => {
    await expectOneLine([], 2, /^kcm-manager: unknown environment variable KCM_MANAGER_CONFG; known: KCM_MANAGER_CONFIG$/, { KCM_MANAGER_CONFG: '/etc/kcm/m.json' });
  });

  it('a config with a misspelt key is one line naming the file and the key, exit 1', async () => {
    const file = configFile({ member: '127.0.0.1:58000', dataDir: '/nonexistent', insecure: true, agentPrt: 58100 });
    await expectOneLine(['--config', file], 1, new RegExp(`^kcm-manager: config ${file}: unknown key "agentPrt" \\(did you mean agentPort\\?\\)$`));
  });

  it('an unreadable config, one that is not JSON and a bad value are each one line, exit 1', async () => {
    await expectOneLine(['--config', '/nonexistent/manager.json'], 1, /^kcm-manager: config \/nonexistent\/manager\.json: cannot read it \(ENOENT\)$/);
    const broken = configFile('{ "member": ');
    await expectOneLine(['--config', broken], 1, new RegExp(`^kcm-manager: config ${broken}: not valid JSON`));
    const badPort = configFile({ member: '127.0.0.1:58000', dataDir: '/nonexistent', agentPort: 'x' });
    await expectOneLine([], 1, /^kcm-manager: config .*: agentPort: /, { KCM_MANAGER_CONFIG: badPort });
  });

  it('a config that is well-formed but cannot start (no TLS files, not insecure) is one line, exit 1', async () => {
    const file = configFile({ member: '127.0.0.1:58000', dataDir: '/nonexistent' });
    await expectOneLine(['--config', file], 1, /^kcm-manager: TLS is required: name the ca, cert, key files \(tls\.ca, tls\.cert, tls\.key in the config\), or set insecure: true explicitly$/);
  });
});
