// The console's pure helpers (services/manager/console/format.js), run in Node: the browser
// code is plain ES modules with no build step, so the test imports the very file the page loads.

import { describe, expect, it } from 'vitest';

type Job = { status: string; step: string; steps: string; step_name: string; done: string; total: string };
interface ConsoleFormat {
  readFragment(hash: string): { token: string; refreshMs: number; rest: string };
  envelope(jobType: string, paras?: Record<string, unknown>, nowMs?: number): Record<string, unknown>;
  formatElapsed(ms: string): string;
  jobProgressText(job: Job): string;
  jobFraction(job: Job): number;
  statusTone(status: string): string;
  refusalText(httpStatus: number, reply: unknown, jobType: string): string;
  DEFAULT_REFRESH_MS: number;
  buildText(member: { protocol: string; kcm_version: string } | undefined): string;
}

const format = (await import(new URL('../../console/format.js', import.meta.url).href)) as ConsoleFormat;
const job = (over: Partial<Job>): Job => ({ status: 'ongoing', step: '3', steps: '7', step_name: 'install storage nodes', done: '', total: '', ...over });

describe('console format helpers', () => {
  it('take the token out of the fragment and keep the other settings', () => {
    expect(format.readFragment('#token=abc%2Bdef&refresh=500')).toEqual({ token: 'abc+def', refreshMs: 500, rest: 'refresh=500' });
    expect(format.readFragment('')).toEqual({ token: '', refreshMs: format.DEFAULT_REFRESH_MS, rest: '' });
    // A refresh below 250 ms (or not a number) would hammer the manager: the default instead.
    expect(format.readFragment('#refresh=10').refreshMs).toBe(format.DEFAULT_REFRESH_MS);
    expect(format.readFragment('#refresh=x').refreshMs).toBe(format.DEFAULT_REFRESH_MS);
  });

  it('build the envelope the CLI sends', () => {
    expect(format.envelope('list_jobs', { limit: '30' }, 1_700_000_000_500)).toEqual({
      version: '1.0', job_type: 'list_jobs', job_id: '', timestamp: '1700000000', user_name: 'console', paras: { limit: '30' },
    });
  });

  it('show elapsed times a person reads at a glance', () => {
    expect(format.formatElapsed('850')).toBe('850 ms');
    expect(format.formatElapsed('12345')).toBe('12.3 s');
    expect(format.formatElapsed('185000')).toBe('3 min 05 s');
    expect(format.formatElapsed('7380000')).toBe('2 h 03 min');
    expect(format.formatElapsed('')).toBe('');
  });

  it('say where a job is: step k/n, units, queued, done, or where it failed', () => {
    expect(format.jobProgressText(job({}))).toBe('step 3/7 install storage nodes');
    expect(format.jobProgressText(job({ done: '2', total: '3' }))).toBe('step 3/7 install storage nodes, 2/3 units');
    expect(format.jobProgressText(job({ status: 'started', step: '0' }))).toBe('queued');
    expect(format.jobProgressText(job({ status: 'done', step: '7' }))).toBe('7/7 steps done');
    expect(format.jobProgressText(job({ status: 'failed', step: '4', step_name: 'start' }))).toBe('failed at step 4/7 start');
    expect(format.jobFraction(job({ done: '1', total: '2' }))).toBeCloseTo(2.5 / 7);
    expect(format.jobFraction(job({ status: 'done' }))).toBe(1);
  });

  it('colour only the status words it knows, and show any other word plain', () => {
    expect(format.statusTone('online')).toBe('ok');
    expect(format.statusTone('failed')).toBe('bad');
    expect(format.statusTone('__proto__')).toBe('plain');
  });

  it('explain 401 and 403 to the person at the console', () => {
    expect(format.refusalText(401, { error_code: '3000', error_info: 'the bearer token is not valid' }, 'list_jobs')).toBe(
      'The manager refused the token (401): the bearer token is not valid. Enter a valid token.',
    );
    expect(format.refusalText(403, { error_code: '3001', error_info: 'viewer may not' }, 'list_tokens')).toBe('This token may not run list_tokens (403): viewer may not.');
    expect(format.refusalText(502, null, 'get_meta_mode')).toBe('get_meta_mode: HTTP 502');
  });

  it('name a member\'s build in the words of kcm-manager --version', () => {
    expect(format.buildText({ protocol: '2', kcm_version: '0.2.0' })).toBe('kcm 0.2.0 (kcm-protocol 2)');
    expect(format.buildText({ protocol: '1', kcm_version: '' })).toBe('kcm before 0.2.0 (kcm-protocol 1)');
    expect(format.buildText({ protocol: '', kcm_version: '' })).toBe('not known yet');
    expect(format.buildText(undefined)).toBe('not known yet');
  });
});
