import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ConfigError, createLogger, createShutdown, envInt, envList, envString, isLoopbackHost, silentLogger } from '../src/index';

function captureLines(): { stream: Writable; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return { stream, lines: () => chunks.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

describe('logger', () => {
  it('writes one JSON line per call with the component name and an ISO time', () => {
    const out = captureLines();
    const logger = createLogger({ name: 'gateway', level: 'info', destination: out.stream });
    logger.info({ job_type: 'get_status' }, 'emit');
    const [line] = out.lines();
    expect(line).toMatchObject({ name: 'gateway', msg: 'emit', job_type: 'get_status', level: 30 });
    expect(String(line.time)).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('never writes an authorization header', () => {
    const out = captureLines();
    const logger = createLogger({ name: 'gateway', level: 'info', destination: out.stream });
    logger.info({ req: { headers: { authorization: 'Bearer secret-token' } } }, 'request');
    expect(JSON.stringify(out.lines())).not.toContain('secret-token');
  });

  it('a silent logger accepts calls and writes nothing', () => {
    expect(() => silentLogger().error('nothing')).not.toThrow();
  });
});

describe('config from the environment', () => {
  it('falls back when a variable is unset or empty', () => {
    expect(envString({ KCM_URL: '' }, 'KCM_URL', 'http://x')).toBe('http://x');
    expect(envString({}, 'KCM_URL')).toBeUndefined();
  });

  it('rejects a non-integer or out-of-range value naming the variable and value', () => {
    expect(() => envInt({ PORT: '5x' }, 'PORT', 1)).toThrow(new ConfigError('PORT: must be an integer, got "5x"'));
    expect(() => envInt({ PORT: '0' }, 'PORT', 1, { min: 1 })).toThrow('PORT: must be >= 1, got "0"');
    expect(envInt({ PORT: '58000' }, 'PORT', 1, { min: 1, max: 65535 })).toBe(58000);
  });

  it('splits a comma-separated list and drops blanks', () => {
    expect(envList({ KCM_TOKENS: ' a, ,b ' }, 'KCM_TOKENS')).toEqual(['a', 'b']);
    expect(envList({}, 'KCM_TOKENS')).toEqual([]);
  });

  it('recognises loopback hosts only', () => {
    expect(['127.0.1.1', 'localhost', '::1', '[::1]'].map(isLoopbackHost)).toEqual([true, true, true, true]);
    expect(['0.0.0.0', '10.0.0.1', '128.0.0.1'].map(isLoopbackHost)).toEqual([false, false, false]);
  });
});

describe('shutdown ordering', () => {
  it('runs steps once, last registered first, and survives a failing or stuck step', async () => {
    const order: string[] = [];
    const shutdown = createShutdown(silentLogger(), 50);
    shutdown.add('raft', () => void order.push('raft'));
    shutdown.add('stuck', () => new Promise<void>(() => {}));
    shutdown.add('broken', () => {
      throw new Error('boom');
    });
    shutdown.add('http', async () => void order.push('http'));
    await Promise.all([shutdown.run('SIGTERM'), shutdown.run('SIGINT')]);
    expect(order).toEqual(['http', 'raft']);
  });
});
