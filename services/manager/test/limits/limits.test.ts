// Limits: Emit's request rate per caller, and unfinished jobs per cluster. Above either the
// reply is OVERLOADED (HTTP 429) in the envelope, and nothing is committed.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError } from '@kcm/protocol';
import { RateLimiter } from '../../src/gateway/rate-limit';
import { CommandKind } from '../../src/meta/commands';
import { startInProcessManager, type InProcessManager } from '../helpers/in-process-manager';
import { storedAccount } from '../../../../test/helpers/secrets';
import { envelope, testGateway } from '../gateway/helpers';

const OVERLOADED = String(KcmError.of('OVERLOADED', '').code);

describe('RateLimiter', () => {
  it('allows a burst, then one request per refill interval, per key', () => {
    let now = 0;
    const limiter = new RateLimiter({ ratePerSecond: 10, burst: 3, now: () => now });
    expect([limiter.take('a'), limiter.take('a'), limiter.take('a')]).toEqual([0, 0, 0]);
    expect(limiter.take('a')).toBe(100);
    expect(limiter.take('b')).toBe(0);
    now += 100;
    expect(limiter.take('a')).toBe(0);
    expect(limiter.take('a')).toBeGreaterThan(0);
  });
});

describe('Emit above the request rate', () => {
  it('is refused OVERLOADED with HTTP 429 and the envelope; another caller is still served', async () => {
    const { app } = testGateway({ rateLimit: { ratePerSecond: 0.001, burst: 2 } });
    const send = (ip: string) =>
      app.inject({ method: 'POST', url: '/HttpService/Emit', remoteAddress: ip, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(envelope('get_meta_mode', {})) });
    expect((await send('10.1.1.1')).statusCode).toBe(200);
    expect((await send('10.1.1.1')).statusCode).toBe(200);
    const refused = await send('10.1.1.1');
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBeDefined();
    expect(refused.json()).toMatchObject({ version: '1.0', error_code: OVERLOADED, status: 'failed', attachment: null });
    expect(refused.json().error_info).toMatch(/request rate limit/);
    expect((await send('10.1.1.2')).statusCode).toBe(200);
  });
});

describe('a cluster at maxJobsPerCluster', () => {
  let kcm: InProcessManager;
  beforeAll(async () => {
    kcm = await startInProcessManager({ config: { maxJobsPerCluster: 2 } });
    await kcm.registerMachine('127.0.2.1');
    const account = storedAccount({ user: 'u', password: 'p' });
    await kcm.commit({
      kind: CommandKind.ClusterCreated, at: Date.now(), jobId: '0', nickName: 'busy',
      options: { haMode: 'rbr', maxStorageSizeGb: 1, maxConnections: 10, cpuCores: 1, cpuLimitNode: 'quota', innodbSizeMb: 64, rocksdbBlockCacheSizeMb: 0, dbcfg: 0, fullsyncLevel: 0 },
      accounts: { admin: account, replication: account, storage: account, computer: account },
      placement: { newShards: [{ hosts: ['127.0.2.1'] }], newNodes: [], newComps: [] },
    });
    await kcm.commit({ kind: CommandKind.ClusterStatusSet, at: Date.now(), clusterId: '1', status: 'ready' });
  });
  afterAll(() => kcm?.close());

  it('refuses another job on it clearly (OVERLOADED, 429, the envelope) and commits nothing; other clusters are not affected', async () => {
    // The job runner is stopped: accepted jobs stay unfinished on the cluster's queue.
    for (let i = 0; i < 2; i++) expect((await kcm.emit(envelope('delete_cluster', { cluster_id: '1' }))).reply.error_code).toBe('0');
    const jobsBefore = kcm.manager.store.state().counters.job;
    const { status, reply } = await kcm.emit(envelope('delete_cluster', { cluster_id: '1' }));
    expect(status).toBe(429);
    expect(reply).toMatchObject({ error_code: OVERLOADED, status: 'failed', job_id: '' });
    expect(reply.error_info).toMatch(/cluster 1 already has 2 unfinished jobs \(maxJobsPerCluster 2\)/);
    expect(kcm.manager.store.state().counters.job).toBe(jobsBefore);
  });
});
