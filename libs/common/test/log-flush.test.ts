import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const fixture = path.join(import.meta.dirname, 'fixtures', 'log-then-wait.ts');

describe('buffered log lines', () => {
  it('lines followed by flushLogSoon() survive a SIGKILL right after it resolves', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', fixture], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KCM_LOG_LEVEL: 'info' } });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    await new Promise<void>((resolve, reject) => {
      child.stderr.on('data', (chunk: Buffer) => chunk.toString().includes('flushed') && resolve());
      child.once('exit', (code) => reject(new Error(`fixture exited early with ${code}`)));
    });
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('close', resolve));
    const lines = stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { n: number });
    expect(lines.map((l) => l.n).slice(0, 2)).toEqual([1, 2]);
  });
});
