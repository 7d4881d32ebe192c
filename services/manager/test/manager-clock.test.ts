// buildManager's `clock` is what stamps the commands the manager proposes: a manager built
// with a fixed clock records a job's submission and its end at that time.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startInProcessManager, type InProcessManager } from './helpers/in-process-manager';
import { envelope } from './gateway/helpers';

const FIXED = Date.UTC(2001, 0, 2, 3, 4, 5);

let kcm: InProcessManager;
beforeAll(async () => {
  kcm = await startInProcessManager({ clock: () => FIXED, leaderServices: true });
  await kcm.registerMachine('127.0.2.1');
});
afterAll(() => kcm?.close());

describe('a manager built with a fixed clock', () => {
  it("stamps a job's submittedAt and finishedAt from it", async () => {
    const { reply } = await kcm.emit(envelope('delete_machine', { hostaddr: '127.0.2.1', machine_type: 'storage' }));
    expect(reply).toMatchObject({ error_code: '0', status: 'accept' });
    const deadline = Date.now() + 10_000;
    while (kcm.manager.store.state().jobs[reply.job_id]?.finishedAt == null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const job = kcm.manager.store.state().jobs[reply.job_id];
    expect(job).toMatchObject({ submittedAt: FIXED, finishedAt: FIXED });
    expect(job.result).toMatchObject({ ok: true });
  });
});
