// What a real manager acknowledges for request ids and job ids clients choose: names that
// Object.prototype also has are ordinary ids, and a request id stands for one request.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError } from '@kcm/protocol';
import type { JobService } from '../../src/gateway/job-service';
import { RoutingService } from '../../src/submit/routing-service';
import { startInProcessManager, type InProcessManager } from '../helpers/in-process-manager';
import { envelope } from './helpers';

const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype'];
const code = (name: Parameters<typeof KcmError.of>[0]) => String(KcmError.of(name, '').code);

let kcm: InProcessManager;

beforeAll(async () => {
  kcm = await startInProcessManager();
  await kcm.registerMachine('127.0.2.1');
});
afterAll(() => kcm?.close());

describe('ids named like Object.prototype members', () => {
  it.each(PROTOTYPE_NAMES)('get_status of job %s answers NOT_FOUND, never INTERNAL', async (jobId) => {
    const { status, reply } = await kcm.emit(envelope('get_status', {}, { job_id: jobId }));
    expect(status).toBe(200);
    expect(reply).toMatchObject({ error_code: code('NOT_FOUND'), job_id: jobId, error_info: `job ${jobId} does not exist` });
  });

  it.each(PROTOTYPE_NAMES)('set_machine with request_id %s is acknowledged with a job that get_status finds', async (requestId) => {
    const sent = envelope('set_machine', { hostaddr: '127.0.2.1', node_stats: 'dead' }, { request_id: requestId });
    const { reply } = await kcm.emit(sent);
    expect(reply).toMatchObject({ error_code: '0', status: 'accept' });
    expect(reply.job_id).toMatch(/^[1-9][0-9]*$/);
    expect(kcm.manager.store.state().jobs[reply.job_id]).toMatchObject({ requestId, jobType: 'set_machine' });
    const status = await kcm.emit(envelope('get_status', {}, { job_id: reply.job_id }));
    expect(status.reply).toMatchObject({ error_code: '0', job_id: reply.job_id, job_type: 'set_machine' });
    expect((await kcm.emit(sent)).reply.job_id).toBe(reply.job_id);
  });
});

describe('a request id reused with a different body', () => {
  it('is CONFLICT and changes nothing; a retry with the same body gets the first job', async () => {
    const running = envelope('set_machine', { hostaddr: '127.0.2.1', node_stats: 'running' }, { request_id: 'reused-1' });
    const first = await kcm.emit(running);
    expect(first.reply).toMatchObject({ error_code: '0', status: 'accept' });
    const jobsBefore = kcm.manager.store.state().counters.job;

    const dead = await kcm.emit({ ...running, paras: { hostaddr: '127.0.2.1', node_stats: 'dead' } });
    expect(dead.status).toBe(200);
    expect(dead.reply).toMatchObject({ error_code: code('CONFLICT'), job_id: '' });
    expect(dead.reply.error_info).toContain(`request_id: reused-1 was already used for job ${first.reply.job_id}`);
    const otherType = await kcm.emit({ ...running, job_type: 'delete_machine', paras: { hostaddr: '127.0.2.1', machine_type: 'storage' } });
    expect(otherType.reply).toMatchObject({ error_code: code('CONFLICT') });
    expect(kcm.manager.store.state().counters.job).toBe(jobsBefore);

    const retry = await kcm.emit({ ...running, timestamp: String(Number(running.timestamp) + 5), paras: { node_stats: 'running', hostaddr: '127.0.2.1' } });
    expect(retry.reply).toMatchObject({ error_code: '0', job_id: first.reply.job_id });
  });
});

describe('a request id reused with a different body, forwarded by a follower', () => {
  it('is CONFLICT from the leader; the same body forwarded again gets the first job', async () => {
    const unused = {} as JobService; // a follower answers no submission itself
    const follower = new RoutingService({ local: unused, self: '127.0.99.251:1', leader: () => kcm.manager.config.member });
    try {
      const running = envelope('set_machine', { hostaddr: '127.0.2.1', node_stats: 'running' }, { request_id: 'forwarded-1' });
      const operator = { identity: { name: 'ops', role: 'operator' } } as const;
      const first = await follower.relaySubmission(running, operator);
      expect(first?.jobId).toMatch(/^[1-9][0-9]*$/);
      await expect(follower.relaySubmission({ ...running, paras: { node_stats: 'running', hostaddr: '127.0.2.1' } }, operator)).resolves.toEqual(first);
      const dead = follower.relaySubmission({ ...running, paras: { hostaddr: '127.0.2.1', node_stats: 'dead' } }, operator);
      await expect(dead).rejects.toSatisfy((err) => KcmError.is(err, 'CONFLICT') && String((err as Error).message).startsWith('request_id: forwarded-1 was already used'));
    } finally {
      follower.close();
    }
  });
});
