// Well-formed paras that the state disagrees with are refused as NOT_FOUND, CONFLICT or
// NO_RESOURCES, never INVALID_PARAS (which means the paras themselves are malformed), by a
// real one-member manager.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError } from '@kcm/protocol';
import { startInProcessManager, type InProcessManager } from '../helpers/in-process-manager';
import { envelope } from './helpers';

const code = (name: Parameters<typeof KcmError.of>[0]) => String(KcmError.of(name, '').code);

let kcm: InProcessManager;
beforeAll(async () => {
  kcm = await startInProcessManager();
});
afterAll(() => kcm?.close());

describe('raft_mission', () => {
  it('transfer_leader to a host that is not a member is NOT_FOUND naming paras.target_leader, and creates no job', async () => {
    const jobs = kcm.manager.store.state().counters.job;
    const { status, reply } = await kcm.emit(envelope('raft_mission', { task_type: 'transfer_leader', target_leader: '127.0.1.9:58000' }));
    expect(status).toBe(200);
    expect(reply).toMatchObject({ error_code: code('NOT_FOUND'), status: 'failed' });
    expect(reply.error_info).toMatch(/^paras\.target_leader: 127\.0\.1\.9:58000 is not a voting member \(members: /);
    expect(kcm.manager.store.state().counters.job).toBe(jobs);
  });

  it('a malformed target_leader is still INVALID_PARAS', async () => {
    const { reply } = await kcm.emit(envelope('raft_mission', { task_type: 'transfer_leader', target_leader: 'not an address' }));
    expect(reply).toMatchObject({ error_code: code('INVALID_PARAS') });
  });
});
