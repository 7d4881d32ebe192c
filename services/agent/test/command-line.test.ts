// kcm-agent as an operator meets it, run as a process: --help and --version answer and exit 0;
// a mistake in a flag or a KCM_AGENT_* variable (what /etc/kcm/agent.env sets for the unit) is
// exactly one line on stderr naming it, exit 2, never a stack trace; a failure to start from
// them, one line and exit 1. None of these runs binds a port or touches an engine.

import { describe, expect, it } from 'vitest';
import { versionLine } from '@kcm/common';
import { programFromSource, runProgram, expectOneStderrLine } from '../../../test/helpers/run-program';

const AGENT = programFromSource('agent');
/** No KCM_AGENT_* from the environment the tests run in. */
const clean = Object.fromEntries(Object.keys(process.env).filter((name) => name.startsWith('KCM_AGENT_')).map((name) => [name, undefined]));
const run = (args: string[], env: Record<string, string> = {}) => runProgram(AGENT, args, { ...clean, ...env });

async function expectOneLine(args: string[], env: Record<string, string>, code: number, expected: RegExp) {
  expectOneStderrLine(await run(args, env), code, expected);
}

describe('kcm-agent command line', () => {
  it('--help prints the usage, each flag with its KCM_AGENT_* variable, exit 0', async () => {
    const r = await run(['--help']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^kcm-agent: .*\n\nusage: kcm-agent /);
    for (const [flag, variable] of [['--host <address>', 'KCM_AGENT_HOST'], ['--port <port>', 'KCM_AGENT_PORT'], ['--tls-cert <file>', 'KCM_AGENT_TLS_CERT'], ['--metrics-port <port>', 'KCM_AGENT_METRICS_PORT']]) {
      expect(r.stdout).toMatch(new RegExp(`${flag} .*\\(env ${variable}\\)`));
    }
  });

  it('--version prints `kcm-agent <release> (kcm-protocol N)`, exit 0', async () => {
    expect(await run(['--version'])).toEqual({ code: 0, stdout: `${versionLine('kcm-agent')}\n`, stderr: '' });
  });

  it('an unknown flag and a flag without its value are one line naming the flag, exit 2', async () => {
    await expectOneLine(['--prot', '58100'], {}, 2, /^kcm-agent: unknown flag --prot; see kcm-agent --help$/);
    await expectOneLine(['--port'], {}, 2, /^kcm-agent: --port needs a value$/);
  });

  it('a bad port names the flag or the variable it came from, exit 2', async () => {
    await expectOneLine(['--port', '99999'], {}, 2, /^kcm-agent: --port: must be a port number \(1-65535\), got "99999"$/);
    await expectOneLine([], { KCM_AGENT_PORT: 'abc' }, 2, /^kcm-agent: KCM_AGENT_PORT: must be a port number \(1-65535\), got "abc"$/);
  });

  it('a misspelt KCM_AGENT_ variable is named instead of ignored, exit 2', async () => {
    await expectOneLine([], { KCM_AGENT_TLS_CRT: '/etc/kcm/tls/agent.pem' }, 2, /^kcm-agent: unknown environment variable KCM_AGENT_TLS_CRT; known: .*KCM_AGENT_TLS_CERT/);
  });

  it('no TLS files and not --insecure is one line, exit 1, before any port is bound', async () => {
    await expectOneLine(['--host', '127.0.0.1', '--port', '58199'], {}, 1, /^kcm-agent: TLS is required: name the ca, cert, key files \(--tls-ca, --tls-cert, --tls-key, or KCM_AGENT_TLS_CA, _CERT, _KEY\), or start with --insecure explicitly$/);
  });
});
