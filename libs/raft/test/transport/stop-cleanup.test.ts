import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const fixture = fileURLToPath(new URL('./fixtures/exchange-then-stop.ts', import.meta.url));

describe('GrpcTransport.stop', () => {
  it('leaves no handles behind: a process that used every stream exits by itself after stop()', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', fixture, String(randomInt(20, 250))], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exit = await new Promise<{ code: number | null; at: number }>((resolve) => {
      const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      child.on('exit', (code) => {
        clearTimeout(killer);
        resolve({ code, at: Date.now() });
      });
    });
    expect(stderr).toBe('');
    expect(exit.code).toBe(0); // SIGKILL after 20 s would give null
    const stoppedAt = Number(/STOPPED (\d+)/.exec(stdout)?.[1]);
    expect(exit.at - stoppedAt).toBeLessThan(2_000); // exits promptly once stopped, no lingering timer
  });
});
