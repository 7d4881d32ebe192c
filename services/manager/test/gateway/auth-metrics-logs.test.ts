import { describe, expect, it } from 'vitest';
import { REQUIRED_ROLE, type JobType } from '@kcm/protocol';
import { TEST_TOKENS, authHeader, testTokenLookup } from '../../../../test/helpers/tokens';
import { loadFixture } from '../../../../libs/protocol/test/fixtures';
import { MACHINE_PARAS, emit, envelope, testGateway } from './helpers';

const auth = { lookup: testTokenLookup() };

describe('bearer authentication', () => {
  it('without a token Emit is refused with a 401 envelope and a Bearer challenge, and the body is not processed', async () => {
    const { app, service } = testGateway({ auth });
    const { status, headers, body } = await emit(app, envelope('create_machine', MACHINE_PARAS));
    expect(status).toBe(401);
    expect(headers['www-authenticate']).toBe('Bearer');
    expect(body).toMatchObject({ version: '1.0', status: 'failed', error_code: '3000', error_info: 'missing "Authorization: Bearer <token>" header', job_id: '', attachment: null });
    expect(service.submitted).toHaveLength(0);
  });

  it('a wrong token or a non-Bearer scheme is refused with 401', async () => {
    const { app } = testGateway({ auth });
    const wrong = await emit(app, envelope('get_meta_mode'), { authorization: 'Bearer token-c' });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error_info).toBe('the bearer token is not valid');
    const basic = await emit(app, envelope('get_meta_mode'), { authorization: `Basic ${Buffer.from(TEST_TOKENS.admin).toString('base64')}` });
    expect(basic.status).toBe(401);
  });

  it('a viewer token on create_cluster gets 403 with the envelope, and nothing is submitted', async () => {
    const { app, service } = testGateway({ auth });
    const { status, body } = await emit(app, loadFixture('create_cluster'), authHeader('viewer'));
    expect(status).toBe(403);
    expect(body).toMatchObject({ version: '1.0', status: 'failed', error_code: '3001', job_type: 'create_cluster', attachment: null });
    expect(body.error_info).toBe('token "test-viewer" has role viewer; create_cluster requires role operator or above');
    expect(service.submitted).toHaveLength(0);
  });

  it('an operator token on raft_mission gets 403 with the envelope; an admin token is accepted', async () => {
    const { app, service } = testGateway({ auth });
    const refused = await emit(app, loadFixture('raft_mission'), authHeader('operator'));
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error_code: '3001', status: 'failed', job_type: 'raft_mission' });
    expect(service.submitted).toHaveLength(0);
    const accepted = await emit(app, loadFixture('raft_mission'), authHeader('admin'));
    expect(accepted.status).toBe(200);
    expect(accepted.body.status).toBe('accept');
  });

  it('the role is checked before the paras: a viewer learns nothing about a create_cluster it may not send', async () => {
    const { app } = testGateway({ auth });
    const { status, body } = await emit(app, envelope('create_cluster', { nick_name: 'x' }), authHeader('viewer'));
    expect(status).toBe(403);
    expect(body.error_code).toBe('3001');
  });

  it('every job type is refused to the roles below its REQUIRED_ROLE and served to its own', async () => {
    const { app } = testGateway({ auth });
    const below = { viewer: [], operator: ['viewer'], admin: ['viewer', 'operator'] } as const;
    for (const [jobType, required] of Object.entries(REQUIRED_ROLE) as [JobType, keyof typeof below][]) {
      for (const role of below[required]) {
        expect((await emit(app, loadFixture(jobType), authHeader(role))).status, `${jobType} as ${role}`).toBe(403);
      }
      expect((await emit(app, loadFixture(jobType), authHeader(required))).status, `${jobType} as ${required}`).not.toBe(403);
    }
  });

  it('metrics and health need no token', async () => {
    const { app } = testGateway({ auth });
    expect((await app.inject({ url: '/metrics' })).statusCode).toBe(200);
    expect((await app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' });
  });

  it('insecure mode serves everyone as an admin and warns once', async () => {
    const { app, logLines } = testGateway({ auth: { insecure: true } });
    expect((await emit(app, loadFixture('raft_mission'))).status).toBe(200);
    const warnings = logLines().filter((l) => String(l.msg).includes('authentication is OFF'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0].level).toBe(40);
  });
});

describe('metrics', () => {
  async function metricsText(app: ReturnType<typeof testGateway>['app']): Promise<string> {
    const response = await app.inject({ url: '/metrics' });
    expect(response.headers['content-type']).toContain('text/plain');
    return response.body;
  }

  it('counts Emit requests by canonical job type and outcome', async () => {
    const { app } = testGateway();
    await emit(app, envelope('delete_shard', { cluster_id: '1', shard_id: '2' }));
    await emit(app, envelope('delete_shards', { cluster_id: '1', shard_id: '3' }));
    await emit(app, envelope('create_machine', { ...MACHINE_PARAS, total_mem: 'x' }));
    const text = await metricsText(app);
    expect(text).toContain('kcm_emit_requests_total{job_type="delete_shards",outcome="ok"} 2');
    expect(text).toContain('kcm_emit_requests_total{job_type="create_machine",outcome="invalid_paras"} 1');
    expect(text).toMatch(/kcm_emit_request_duration_seconds_count\{job_type="delete_shards",outcome="ok"\} 2/);
  });

  it('buckets unknown job types and unreadable bodies under "unknown"', async () => {
    const { app } = testGateway();
    for (let i = 0; i < 5; i++) await emit(app, envelope(`made_up_${i}`));
    await emit(app, '{not json');
    await emit(app, JSON.stringify({ version: '1.0', job_type: 'x'.repeat(10_000), timestamp: '1' }));
    const text = await metricsText(app);
    expect(text).toContain('kcm_emit_requests_total{job_type="unknown",outcome="unknown_job_type"} 6');
    expect(text).toContain('kcm_emit_requests_total{job_type="unknown",outcome="bad_json"} 1');
    expect(text).not.toContain('made_up');
  });

  it('counts refused (401) and oversized (413) requests too', async () => {
    const { app } = testGateway({ auth, bodyLimitBytes: 200 });
    await emit(app, envelope('get_meta_mode'));
    await emit(app, envelope('create_machine', MACHINE_PARAS), authHeader());
    const text = await metricsText(app);
    expect(text).toContain('kcm_emit_requests_total{job_type="unknown",outcome="unauthenticated"} 1');
    expect(text).toContain('kcm_emit_requests_total{job_type="unknown",outcome="body_too_large"} 1');
  });
});

describe('request ids and the Emit log line', () => {
  it('honours an incoming x-request-id and writes one line per Emit with job type, outcome, code and duration', async () => {
    const { app, logLines } = testGateway();
    const { headers } = await emit(app, envelope('create_machine', MACHINE_PARAS), { 'x-request-id': 'cli-42' });
    expect(headers['x-request-id']).toBe('cli-42');
    const lines = logLines().filter((l) => l.msg === 'emit');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ request_id: 'cli-42', job_type: 'create_machine', outcome: 'ok', error_code: '0', job_id: '1', status_code: 200 });
    expect(typeof lines[0].duration_ms).toBe('number');
  });

  it('replaces an unsafe incoming request id with a generated one', async () => {
    const { app } = testGateway();
    const { headers } = await emit(app, envelope('get_meta_mode'), { 'x-request-id': 'bad id\twith spaces' });
    expect(headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('logs the error of a failed Emit, clipped, and never the authorization header', async () => {
    const { app, logLines } = testGateway({ auth });
    await emit(app, envelope('create_machine', { ...MACHINE_PARAS, rack_id: 'r'.repeat(5000), total_mem: 'x' }), authHeader());
    await emit(app, envelope('get_meta_mode'), { authorization: 'Bearer wrong' });
    const lines = logLines().filter((l) => l.msg === 'emit');
    expect(lines.map((l) => l.outcome)).toEqual(['invalid_paras', 'unauthenticated']);
    expect(String(lines[0].error_info).length).toBeLessThan(400);
    expect(JSON.stringify(logLines())).not.toContain(TEST_TOKENS.admin);
  });
});
