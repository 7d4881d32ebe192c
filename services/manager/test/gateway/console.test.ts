// The web console's server side (issue 19): /ui/ is static and needs no token, while the
// data it shows comes only from Emit queries a viewer token may run: list_jobs (the job
// history with progress, newest first) and get_meta_mode (members, leader, term).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KCM_PROTOCOL, KCM_VERSION } from '@kcm/common';
import { CommandKind } from '../../src/meta/commands';
import { startInProcessManager, type InProcessManager } from '../helpers/in-process-manager';
import { authHeader } from '../../../../test/helpers/tokens';

const T0 = 1_700_000_000_000;
let nowMs = T0;

const query = (jobType: string, paras: Record<string, unknown> = {}) => ({ version: '1.0', job_type: jobType, timestamp: '1700000000', user_name: 'console', paras });
const submitted = (at: number, jobType: string, stepNames: string[], lockKey: string | null, submittedBy: string) =>
  ({ kind: CommandKind.JobSubmitted, at, jobType, sentJobType: jobType, paras: { cluster_id: '7' }, requestId: null, lockKey, stepNames, submittedBy }) as const;

describe('the web console at /ui/', () => {
  let m: InProcessManager;

  beforeAll(async () => {
    m = await startInProcessManager({ clock: () => nowMs });
  });
  afterAll(async () => {
    await m?.close();
  });

  it('serves the page, its scripts and lit-html without a token, under a strict content security policy', async () => {
    const page = await m.manager.gateway.inject({ method: 'GET', url: '/ui/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body).toContain('<script type="importmap">');
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+'/);
    expect(csp).toContain("connect-src 'self'");
    for (const file of ['app.js', 'views.js', 'api.js', 'format.js', 'style.css', 'vendor/lit-html/lit-html.js']) {
      const reply = await m.manager.gateway.inject({ method: 'GET', url: `/ui/${file}` });
      expect(reply.statusCode, file).toBe(200);
    }
    expect((await m.manager.gateway.inject({ method: 'GET', url: '/ui' })).headers.location).toBe('/ui/');
    // Only the library's scripts are served from its package, nothing else of node_modules.
    expect((await m.manager.gateway.inject({ method: 'GET', url: '/ui/vendor/lit-html/package.json' })).statusCode).toBe(404);
    expect((await m.manager.gateway.inject({ method: 'GET', url: '/ui/vendor/lit-html/../../../package.json' })).statusCode).toBe(404);
  });

  it('list_jobs shows a viewer every job newest first: queued, step k/n with units and elapsed, and a failed job with its error', async () => {
    const idOf = (jobType: string) => Object.values(m.manager.store.state().jobs).find((j) => j.jobType === jobType)!.id;
    await m.commit(submitted(T0, 'create_cluster', ['place', 'install storage nodes', 'start'], 'cluster:7', 'test-operator'));
    const running = idOf('create_cluster');
    await m.commit({ kind: CommandKind.JobStepDone, at: T0 + 1000, jobId: running, step: 0, output: {} });
    await m.commit({ kind: CommandKind.JobProgress, at: T0 + 2000, jobId: running, step: 1, unitsDone: 2, unitsTotal: 3 });
    await m.commit(submitted(T0 + 3000, 'add_comps', ['place', 'install'], null, 'test-operator'));
    const failing = idOf('add_comps');
    await m.commit({ kind: CommandKind.JobFinished, at: T0 + 4000, jobId: failing, outcome: { ok: false, errorCode: 2000, errorInfo: 'agent 127.0.2.9 <unreachable>', attachment: null } });
    // Behind the running job on the same cluster: it waits, and its steps are named when it starts.
    await m.commit(submitted(T0 + 5000, 'add_shards', ['place', 'install'], 'cluster:7', 'test-operator'));
    const queued = idOf('add_shards');
    nowMs = T0 + 12_500;

    const { status, reply } = await m.emit(query('list_jobs', { limit: '3' }), authHeader('viewer'));
    expect(status, reply.error_info).toBe(200);
    const jobs = (reply.attachment as { list_job: Record<string, string>[] }).list_job;
    expect(jobs.map((j) => j.job_id)).toEqual([queued, failing, running]);
    expect(jobs[0]).toMatchObject({ job_type: 'add_shards', status: 'started', step: '0', steps: '0', elapsed_ms: '7500', cluster_id: '7' });
    expect(jobs[1]).toMatchObject({ status: 'failed', error_code: '2000', error_info: 'agent 127.0.2.9 <unreachable>', step: '1', steps: '2', elapsed_ms: '1000', finished_at: '1700000004' });
    expect(jobs[2]).toMatchObject({ status: 'ongoing', step: '2', steps: '3', step_name: 'install storage nodes', done: '2', total: '3', elapsed_ms: '12500', submitted_by: 'test-operator' });
  });

  it('get_meta_mode names the members, the leader and the term, and each member\'s kcm protocol and release', async () => {
    const { reply } = await m.emit(query('get_meta_mode'), authHeader('viewer'));
    const member = m.manager.config.member;
    expect(reply.attachment).toMatchObject({ mode: 'no_rep', leader: member, term: String(m.manager.raft.status().term), answered_by: member });
    expect((reply.attachment as { list_member: unknown[] }).list_member).toEqual([{ member, role: 'leader', match: expect.stringMatching(/^\d+$/), replication: 'replicate', protocol: String(KCM_PROTOCOL), kcm_version: KCM_VERSION }]);
  });

  it('answers the data queries only with a token', async () => {
    const { status, reply } = await m.emit(query('list_jobs'), {});
    expect(status).toBe(401);
    expect(reply.error_code).toBe('3000');
  });
});
