import { describe, expect, it } from 'vitest';
import { parseRequest, parseRequestJson, PROTOCOL_VERSION, unknownParas } from '../src/index';
import { loadFixture } from './fixtures';

function rejection(body: unknown) {
  const result = parseRequest(body);
  if (result.ok) throw new Error(`accepted ${JSON.stringify(body)}`);
  return result.error;
}

describe('request envelope (spec 2.1)', () => {
  it.each([
    ['null', null],
    ['an array', [{ version: '1.0' }]],
    ['a string', 'create_cluster'],
    ['a number', 42],
    ['a boolean', true],
  ])('rejects a body that is %s with BAD_ENVELOPE naming the body', (got, body) => {
    const error = rejection(body);
    expect(error.errorName).toBe('BAD_ENVELOPE');
    expect(error.field).toBe('body');
    expect(error.message).toBe(`body: must be a JSON object (the request envelope), got ${got}`);
    expect(error.httpStatus).toBe(400);
  });

  it('reports text that is not JSON as BAD_JSON and parses text that is', () => {
    const bad = parseRequestJson('{"version": "1.0",');
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect([bad.error.errorName, bad.error.field, bad.error.httpStatus]).toEqual(['BAD_JSON', 'body', 400]);
    const good = parseRequestJson(JSON.stringify(loadFixture('get_meta_mode')));
    expect(good.ok).toBe(true);
  });

  it('requires version and accepts only 1.0, saying which version it speaks', () => {
    const missing = loadFixture('get_meta_mode');
    delete missing.version;
    expect(rejection(missing).message).toBe('version: is required');
    const newer = { ...loadFixture('get_meta_mode'), version: '2.0' };
    expect(rejection(newer).message).toBe(`version: must be "${PROTOCOL_VERSION}" (the protocol version kcm speaks), got "2.0"`);
  });

  it('requires job_type as a non-empty string and names unknown ones as UNKNOWN_JOB_TYPE', () => {
    const body = loadFixture('get_meta_mode');
    delete body.job_type;
    expect(rejection(body)).toMatchObject({ errorName: 'BAD_ENVELOPE', field: 'job_type', message: 'job_type: is required' });
    expect(rejection({ ...body, job_type: '' })).toMatchObject({ errorName: 'BAD_ENVELOPE', field: 'job_type' });
    expect(rejection({ ...body, job_type: 7 })).toMatchObject({ errorName: 'BAD_ENVELOPE', message: 'job_type: must be a string, got 7' });
    const unknown = rejection({ ...body, job_type: 'drop_everything' });
    expect(unknown).toMatchObject({ errorName: 'UNKNOWN_JOB_TYPE', field: 'job_type', httpStatus: 200 });
    expect(unknown.message).toBe('job_type: is not a known job type, got "drop_everything"');
  });

  it('requires timestamp as Unix seconds in digits', () => {
    for (const timestamp of ['1700000000.5', '', '-1', 'now']) {
      expect(rejection({ ...loadFixture('get_meta_mode'), timestamp }).field).toBe('timestamp');
    }
    expect(rejection({ ...loadFixture('get_meta_mode'), timestamp: 1700000000 }).message).toBe('timestamp: must be a string, got 1700000000');
  });

  it('defaults absent paras to {} and rejects paras that are not an object', () => {
    const body = loadFixture('get_cluster_summary');
    delete (body as Record<string, unknown>).paras;
    const result = parseRequest(body);
    expect(result.ok && result.request.envelope.paras).toEqual({});
    for (const paras of [null, 'x', [], 3]) {
      expect(rejection({ ...body, paras })).toMatchObject({ errorName: 'BAD_ENVELOPE', field: 'paras' });
    }
  });

  it('validates paras even when absent, so a job with required paras names its first missing field', () => {
    const body = loadFixture('create_machine');
    delete (body as Record<string, unknown>).paras;
    expect(rejection(body)).toMatchObject({ errorName: 'INVALID_PARAS', field: 'paras.hostaddr' });
  });

  it('requires a non-empty job_id only for get_status; other jobs ignore it', () => {
    expect(rejection({ ...loadFixture('get_status'), job_id: '' }).message).toBe('job_id: is required for get_status (the job to query)');
    const issued = parseRequest({ ...loadFixture('delete_cluster'), job_id: '' });
    expect(issued.ok).toBe(true);
    const status = parseRequest(loadFixture('get_status'));
    expect(status.ok && status.request.envelope.job_id).toBe('42');
  });

  it('accepts request_id of 1..128 printable characters and keeps it in the envelope', () => {
    const ok = parseRequest({ ...loadFixture('delete_cluster'), request_id: 'retry-7f3a' });
    expect(ok.ok && ok.request.envelope.request_id).toBe('retry-7f3a');
    for (const request_id of ['', 'x'.repeat(129), 'has space', 12]) {
      expect(rejection({ ...loadFixture('delete_cluster'), request_id }).field).toBe('request_id');
    }
    expect(parseRequest({ ...loadFixture('delete_cluster'), request_id: 'x'.repeat(128) }).ok).toBe(true);
  });

  it('accepts an absent or empty user_name and rejects one with control characters', () => {
    const body = loadFixture('delete_cluster');
    delete body.user_name;
    expect(parseRequest(body).ok).toBe(true);
    expect(parseRequest({ ...body, user_name: '' }).ok).toBe(true);
    expect(rejection({ ...body, user_name: 'a\nb' }).field).toBe('user_name');
  });

  it('ignores unknown envelope fields and unknown paras, and unknownParas lists the latter', () => {
    const body = loadFixture('delete_cluster');
    body.trace = 'abc';
    body.paras.future_option = '1';
    const result = parseRequest(body);
    if (!result.ok) throw result.error;
    expect(result.request.paras).toEqual({ cluster_id: '1' });
    expect(result.request.envelope).not.toHaveProperty('trace');
    expect(unknownParas('delete_cluster', body.paras)).toEqual(['future_option']);
  });
});

describe('validation messages', () => {
  it('name the field and rule and quote the value: paras.nodes: must be >= 3, got "2"', () => {
    const body = loadFixture('create_cluster');
    body.paras.nodes = '2';
    expect(rejection(body).message).toBe('paras.nodes: must be >= 3, got "2"');
  });

  it('join several problems with "; " in the order the fields are declared', () => {
    const body = loadFixture('create_cluster');
    body.paras.comps = '0';
    body.paras.ha_mode = 'x';
    delete body.paras.nick_name;
    const error = rejection(body);
    expect(error.message).toBe(
      'paras.nick_name: is required; paras.ha_mode: must be one of "rbr", "mgr", got "x"; paras.comps: must be >= 1, got "0"',
    );
    expect(error.field).toBe('paras.nick_name');
  });

  it('shorten a huge value instead of echoing it', () => {
    const body = loadFixture('delete_cluster');
    body.paras.cluster_id = '9'.repeat(10_000);
    const error = rejection(body);
    expect(error.message.length).toBeLessThan(200);
    expect(error.message).toContain('...');
  });

  it('cap the number of problems listed', () => {
    const body = loadFixture('create_cluster');
    body.paras = {};
    const error = rejection(body);
    expect(error.message.split('; ').length).toBe(9);
    expect(error.message).toMatch(/and \d+ more problem\(s\)$/);
  });
});
