// `kcm` is a real command: npm links services/cli's bin into node_modules/.bin, so `npx kcm`
// works from the repository (the Makefile and README call it that way).

import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { versionLine } from '@kcm/common';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

function run(file: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: REPO_ROOT, timeout: 30_000 }, (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }));
  });
}

describe('the kcm command', () => {
  it('node_modules/.bin/kcm runs the CLI: usage on --help, exit 0', async () => {
    const r = await run(path.join(REPO_ROOT, 'node_modules/.bin/kcm'), ['--help']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^kcm: send jobs to a kcm manager group/);
  });

  it('--version prints `kcm <release> (kcm-protocol N)`, exit 0', async () => {
    const r = await run(path.join(REPO_ROOT, 'node_modules/.bin/kcm'), ['--version']);
    expect(r).toEqual({ code: 0, stdout: `${versionLine('kcm')}\n`, stderr: '' });
  });

  it('passes its arguments through: an unknown command is a usage error (exit 2)', async () => {
    const r = await run(path.join(REPO_ROOT, 'node_modules/.bin/kcm'), ['no-such-command']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no-such-command/);
  });
});
