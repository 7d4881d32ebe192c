import { describe, expect, it } from 'vitest';
import { assertAuthForListenHost } from '../../src/gateway/index';
import { MACHINE_PARAS, emit, envelope, testGateway } from './helpers';

describe('bearer authentication', () => {
  const auth = { tokens: ['token-a', 'token-b'] };

  it('without a token Emit is refused with a 401 envelope and a Bearer challenge, and the body is not processed', async () => {
    const { app, service } = testGateway({ auth });
    const { status, headers, body } = await emit(app, envelope('create_machine', MACHINE_PARAS));
    expect(status).toBe(401);
    expect(headers['www-authenticate']).toBe('Bearer');
    expect(body).toMatchObject({ status: 'failed', error_code: '3000', error_info: 'missing "Authorization: Bearer <token>" header' });
    expect(service.submitted).toHaveLength(0);
  });

  it('a wrong token or a non-Bearer scheme is refused with 401', async () => {
    const { app } = testGateway({ auth });
    const wrong = await emit(app, envelope('get_meta_mode'), { authorization: 'Bearer token-c' });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error_info).toBe('the bearer token is not valid');
    const basic = await emit(app, envelope('get_meta_mode'), { authorization: 'Basic dG9rZW4tYQ==' });
    expect(basic.status).toBe(401);
  });

  it('any configured token is accepted', async () => {
    const { app } = testGateway({ auth });
    for (const token of auth.tokens) {
      const { status, body } = await emit(app, envelope('get_meta_mode'), { authorization: `Bearer ${token}` });
      expect(status).toBe(200);
      expect(body.status).toBe('done');
    }
  });

  it('metrics and health need no token', async () => {
    const { app } = testGateway({ auth });
    expect((await app.inject({ url: '/metrics' })).statusCode).toBe(200);
    expect((await app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' });
  });

  it('without tokens the gateway warns once that it runs in loopback dev mode', async () => {
    const { app, logLines } = testGateway();
    await emit(app, envelope('get_meta_mode'));
    await emit(app, envelope('get_meta_mode'));
    const warnings = logLines().filter((l) => String(l.msg).includes('authentication is off'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0].level).toBe(40);
  });

  it('listening beyond loopback without tokens is refused', () => {
    expect(() => assertAuthForListenHost('0.0.0.0', undefined)).toThrow(/without auth tokens/);
    expect(() => assertAuthForListenHost('127.0.1.1', undefined)).not.toThrow();
    expect(() => assertAuthForListenHost('10.1.2.3', { tokens: ['t'] })).not.toThrow();
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
    const { app } = testGateway({ auth: { tokens: ['t'] }, bodyLimitBytes: 200 });
    await emit(app, envelope('get_meta_mode'));
    await emit(app, envelope('create_machine', MACHINE_PARAS), { authorization: 'Bearer t' });
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
    const { app, logLines } = testGateway({ auth: { tokens: ['sekrit-token'] } });
    await emit(app, envelope('create_machine', { ...MACHINE_PARAS, rack_id: 'r'.repeat(5000), total_mem: 'x' }), { authorization: 'Bearer sekrit-token' });
    await emit(app, envelope('get_meta_mode'), { authorization: 'Bearer wrong' });
    const lines = logLines().filter((l) => l.msg === 'emit');
    expect(lines.map((l) => l.outcome)).toEqual(['invalid_paras', 'unauthenticated']);
    expect(String(lines[0].error_info).length).toBeLessThan(400);
    expect(JSON.stringify(logLines())).not.toContain('sekrit-token');
  });
});
