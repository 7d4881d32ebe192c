// The identity the gateway authenticated reaches the job: its token name is recorded as
// submittedBy in the replicated job record (a real one-member manager).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authHeader } from '../../../../test/helpers/tokens';
import { startInProcessManager, type InProcessManager } from '../helpers/in-process-manager';
import { MACHINE_PARAS, envelope } from './helpers';

let kcm: InProcessManager;
beforeAll(async () => {
  kcm = await startInProcessManager();
});
afterAll(() => kcm?.close());

describe('submittedBy', () => {
  it("records the submitting token's name on the job", async () => {
    const { status, reply } = await kcm.emit(envelope('create_machine', MACHINE_PARAS), authHeader('operator'));
    expect(status).toBe(200);
    expect(kcm.manager.store.state().jobs[reply.job_id].submittedBy).toBe('test-operator');
  });

  it('a viewer cannot submit, and no job is recorded', async () => {
    const jobs = kcm.manager.store.state().counters.job;
    const { status, reply } = await kcm.emit(envelope('create_machine', { ...MACHINE_PARAS, hostaddr: '127.0.2.9' }), authHeader('viewer'));
    expect(status).toBe(403);
    expect(reply.error_code).toBe('3001');
    expect(kcm.manager.store.state().counters.job).toBe(jobs);
  });
});
