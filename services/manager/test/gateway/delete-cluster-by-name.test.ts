// delete_cluster names its cluster by cluster_id (spec) or by cluster_name, as
// get_cluster_detail does; a real one-member manager commits the job with the id.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError } from '@kcm/protocol';
import { CommandKind } from '../../src/meta/commands';
import { startInProcessManager, type InProcessManager } from '../helpers/in-process-manager';
import { envelope } from './helpers';
import { storedAccount } from '../../../../test/helpers/secrets';

const code = (name: Parameters<typeof KcmError.of>[0]) => String(KcmError.of(name, '').code);
const account = storedAccount({ user: 'u', password: 'p' });

let kcm: InProcessManager;
let clusterName: string;

beforeAll(async () => {
  kcm = await startInProcessManager();
  await kcm.registerMachine('127.0.2.1');
  await kcm.commit({
    kind: CommandKind.ClusterCreated, at: Date.now(), jobId: '0', nickName: 'shop',
    options: { haMode: 'rbr', maxStorageSizeGb: 1, maxConnections: 10, cpuCores: 1, cpuLimitNode: 'quota', innodbSizeMb: 64, rocksdbBlockCacheSizeMb: 0, dbcfg: 0, fullsyncLevel: 0 },
    accounts: { admin: account, replication: account, storage: account, computer: account },
    placement: { newShards: [{ hosts: ['127.0.2.1'] }], newNodes: [], newComps: [] },
  });
  clusterName = kcm.manager.store.state().clusters['1'].name;
});
afterAll(() => kcm?.close());

describe('delete_cluster by cluster_name', () => {
  it('is accepted and committed with the cluster id, under that cluster lock', async () => {
    const { reply } = await kcm.emit(envelope('delete_cluster', { cluster_name: clusterName }, { request_id: 'delete-by-name' }));
    expect(reply).toMatchObject({ error_code: '0', status: 'accept' });
    const job = kcm.manager.store.state().jobs[reply.job_id];
    expect(job).toMatchObject({ jobType: 'delete_cluster', paras: { cluster_name: clusterName, cluster_id: '1' }, lockKey: 'cluster:1' });
    const retry = await kcm.emit(envelope('delete_cluster', { cluster_name: clusterName }, { request_id: 'delete-by-name' }));
    expect(retry.reply.job_id).toBe(reply.job_id);
  });

  it('of no cluster, or disagreeing with cluster_id, is NOT_FOUND naming paras.cluster_name', async () => {
    const jobs = kcm.manager.store.state().counters.job;
    const unknown = await kcm.emit(envelope('delete_cluster', { cluster_name: 'cluster_1_000099' }));
    expect(unknown.reply).toMatchObject({ error_code: code('NOT_FOUND'), error_info: 'paras.cluster_name: no cluster is named cluster_1_000099' });
    const both = await kcm.emit(envelope('delete_cluster', { cluster_name: clusterName, cluster_id: '7' }));
    expect(both.reply).toMatchObject({ error_code: code('NOT_FOUND') });
    expect(both.reply.error_info).toBe(`paras.cluster_name: ${clusterName} is cluster 1, not paras.cluster_id 7; no cluster has both`);
    expect(kcm.manager.store.state().counters.job).toBe(jobs);
  });

  it('without either field is INVALID_PARAS naming paras.cluster_id', async () => {
    const { reply } = await kcm.emit(envelope('delete_cluster', {}));
    expect(reply).toMatchObject({ error_code: code('INVALID_PARAS'), error_info: 'paras.cluster_id: is required (or paras.cluster_name)' });
  });
});
