// Runs one of kcm's programs as a process, the way an operator does, and hands back what it
// printed: from the repository through tsx (`programFromSource`) or a built release bundle.
// For the command-line tests of kcm, kcm-manager and kcm-agent.

import { execFile } from 'node:child_process';
import { expect } from 'vitest';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface ProgramRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** argv that runs a program's main.ts through the tsx loader in one process. */
export function programFromSource(program: 'manager' | 'agent' | 'cli'): string[] {
  return [process.execPath, '--import', 'tsx', path.join(REPO_ROOT, 'services', program, 'src/main.ts')];
}

/** Runs `command args`, with `env` added to (or, given as undefined, removed from) this process's environment. */
export function runProgram(command: string[], args: string[], env: Record<string, string | undefined> = {}): Promise<ProgramRun> {
  const fullEnv = { ...process.env, ...env };
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete fullEnv[name];
  return new Promise((resolve) => {
    execFile(command[0], [...command.slice(1), ...args], { cwd: REPO_ROOT, env: fullEnv, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** The lines a run wrote to stderr, and whether any of them is a stack frame. */
export function stderrLines(run: ProgramRun): { lines: string[]; hasStack: boolean } {
  const lines = run.stderr.split('\n').filter((line) => line !== '');
  return { lines, hasStack: lines.some((line) => /^\s+at /.test(line)) };
}

/** The run wrote exactly one stderr line, matching `expected`, with no stack trace, and exited with `code`. */
export function expectOneStderrLine(run: ProgramRun, code: number, expected: RegExp): void {
  const { lines, hasStack } = stderrLines(run);
  expect(hasStack, run.stderr).toBe(false);
  expect(lines, run.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(expected);
  expect(run.code).toBe(code);
}
