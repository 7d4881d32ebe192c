// Whatever arrives, the gateway answers with the envelope and keeps serving.

import { createConnection } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { errorEntryByCode } from '@kcm/protocol';
import { jsonNestingDepth } from '../../src/gateway/json-body';
import { MACHINE_PARAS, emit, envelope, testGateway } from './helpers';

const BAD_JSON = '1000';
const BAD_ENVELOPE = '1001';

function expectEnvelope(body: Record<string, unknown>, errorCode: string): void {
  expect(Object.keys(body).sort()).toEqual(['attachment', 'error_code', 'error_info', 'job_id', 'job_type', 'status', 'version']);
  expect(body).toMatchObject({ version: '1.0', status: 'failed', error_code: errorCode, attachment: null });
  expect(typeof body.error_info).toBe('string');
  expect(String(body.error_info)).not.toBe('');
}

/** Writes `request` as raw bytes on a new connection and returns all the server wrote back before it closed. */
function rawExchange(port: number, request: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port }, () => socket.write(request));
    let data = '';
    socket.on('data', (chunk) => (data += chunk));
    socket.on('end', () => resolve(data));
    socket.on('error', reject);
  });
}

/** The JSON body of a raw HTTP response. */
const bodyOf = (raw: string) => JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;

async function stillServes(app: ReturnType<typeof testGateway>['app']): Promise<void> {
  const { status, body } = await emit(app, envelope('get_meta_mode'));
  expect(status).toBe(200);
  expect(body.status).toBe('done');
}

describe('malformed bodies get the envelope', () => {
  it('truncated JSON is BAD_JSON (400) naming the parse problem', async () => {
    const { app } = testGateway();
    const text = JSON.stringify(envelope('get_meta_mode'));
    const { status, body } = await emit(app, text.slice(0, text.length - 7));
    expect(status).toBe(400);
    expectEnvelope(body, BAD_JSON);
    expect(String(body.error_info)).toMatch(/^body is not valid JSON: /);
    await stillServes(app);
  });

  it('an empty body is BAD_JSON', async () => {
    const { app } = testGateway();
    const { status, body } = await emit(app, '');
    expect(status).toBe(400);
    expectEnvelope(body, BAD_JSON);
  });

  it('a POST with no body and no content type is BAD_JSON', async () => {
    const { app } = testGateway();
    const response = await app.inject({ method: 'POST', url: '/HttpService/Emit' });
    expect(response.statusCode).toBe(400);
    expectEnvelope(response.json(), BAD_JSON);
    expect(response.json().error_info).toBe('body is empty; send a JSON request envelope');
  });

  it('JSON sent as application/x-www-form-urlencoded (curl -d) is parsed as JSON', async () => {
    const { app, service } = testGateway();
    const { status, body } = await emit(app, envelope('create_machine', MACHINE_PARAS), { 'content-type': 'application/x-www-form-urlencoded' });
    expect(status).toBe(200);
    expect(body.status).toBe('accept');
    expect(service.submitted).toHaveLength(1);
  });

  it('a JSON body without any content type is parsed as JSON', async () => {
    const { app } = testGateway();
    const response = await app.inject({ method: 'POST', url: '/HttpService/Emit', payload: JSON.stringify(envelope('get_meta_mode')) });
    expect(response.statusCode).toBe(200);
    expect(response.json().status).toBe('done');
  });

  it('a text/plain body that is not JSON is BAD_JSON, not 415', async () => {
    const { app } = testGateway();
    const { status, body } = await emit(app, 'job_type=create_cluster&nodes=3', { 'content-type': 'text/plain' });
    expect(status).toBe(400);
    expectEnvelope(body, BAD_JSON);
  });

  it('a 10 MB body is BODY_TOO_LARGE (413) with the envelope', async () => {
    const { app } = testGateway();
    const huge = JSON.stringify(envelope('create_cluster', { nick_name: 'x'.repeat(10 * 1024 * 1024) }));
    const { status, body } = await emit(app, huge);
    expect(status).toBe(413);
    expectEnvelope(body, '1002');
    expect(body.error_info).toBe('body exceeds the 1048576-byte limit');
    await stillServes(app);
  });

  it('the body limit is configurable', async () => {
    const { app } = testGateway({ bodyLimitBytes: 100 });
    const { status } = await emit(app, envelope('create_machine', MACHINE_PARAS));
    expect(status).toBe(413);
  });

  it('100k levels of nesting are refused before parsing, without overflowing the stack', async () => {
    const { app } = testGateway();
    const depth = 100_000;
    const deepParas = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const text = `{"version":"1.0","job_type":"create_cluster","timestamp":"1","paras":${deepParas}}`;
    const { status, body } = await emit(app, text);
    expect(status).toBe(400);
    expectEnvelope(body, BAD_JSON);
    expect(body.error_info).toBe('body nests objects/arrays deeper than 64 levels');
    const arrays = await emit(app, `${'['.repeat(depth)}${']'.repeat(depth)}`);
    expectEnvelope(arrays.body, BAD_JSON);
    await stillServes(app);
  });

  it('nesting just under the limit reaches validation and is rejected as paras, not as a crash', async () => {
    const { app } = testGateway();
    const nested = `${'{"a":'.repeat(60)}1${'}'.repeat(60)}`;
    const text = `{"version":"1.0","job_type":"create_machine","timestamp":"1","user_name":"u","paras":{"hostaddr":${nested}}}`;
    const { status, body } = await emit(app, text);
    expect(status).toBe(200);
    expectEnvelope(body, '1004');
    expect(String(body.error_info)).toContain('paras.hostaddr');
  });

  it('brackets inside strings, escaped quotes and trailing backslashes do not confuse the depth scan', () => {
    expect(jsonNestingDepth('{"a":"[[[[{{{{\\"]]]","b":[1,{"c":2}]}')).toBe(3);
    expect(jsonNestingDepth(String.raw`{"a":"ends with a backslash \\","b":[[1]]}`)).toBe(3);
    expect(jsonNestingDepth(String.raw`{"a":"\\\"[[[[","b":{}}`)).toBe(2);
    expect(jsonNestingDepth('{"a":"unterminated [[[[')).toBe(1);
    expect(jsonNestingDepth('[[[[[[', 3)).toBe(4);
  });

  it('a null body is BAD_ENVELOPE (400)', async () => {
    const { app } = testGateway();
    const { status, body } = await emit(app, 'null');
    expect(status).toBe(400);
    expectEnvelope(body, BAD_ENVELOPE);
  });

  it('an array body is BAD_ENVELOPE (400)', async () => {
    const { app } = testGateway();
    const { status, body } = await emit(app, JSON.stringify([envelope('get_meta_mode')]));
    expect(status).toBe(400);
    expectEnvelope(body, BAD_ENVELOPE);
  });

  it('a __proto__ key is refused as BAD_JSON', async () => {
    const { app } = testGateway();
    const { status, body } = await emit(app, '{"version":"1.0","job_type":"get_meta_mode","timestamp":"1","paras":{"__proto__":{"admin":true}}}');
    expect(status).toBe(400);
    expectEnvelope(body, BAD_JSON);
    expect(String(body.error_info)).toContain('__proto__');
  });

  it('unicode free text reaches the service intact and unicode job types are echoed intact', async () => {
    const { app, service } = testGateway();
    const rack = '机架-Ω-🚀';
    const accepted = await emit(app, envelope('create_machine', { ...MACHINE_PARAS, rack_id: rack }));
    expect(accepted.body.status).toBe('accept');
    expect((service.submitted[0].paras as { rack_id: string }).rack_id).toBe(rack);
    const unknown = await emit(app, envelope('créer_cluster_🚀'));
    expect(unknown.body).toMatchObject({ error_code: '1003', job_type: 'créer_cluster_🚀' });
  });

  it('a huge string under the body limit is answered with the envelope', async () => {
    const { app } = testGateway();
    const { status, body } = await emit(app, envelope('create_machine', { ...MACHINE_PARAS, rack_id: 'r'.repeat(900_000) }));
    expect(status).toBe(200);
    expectEnvelope(body, '1004');
    expect(String(body.error_info)).toContain('paras.rack_id');
  });
});

describe('non-Emit routes and raw HTTP get the envelope', () => {
  it('an unknown route is a 404 NOT_FOUND envelope', async () => {
    const { app } = testGateway();
    const response = await app.inject({ method: 'GET', url: '/nope' });
    expect(response.statusCode).toBe(404);
    expectEnvelope(response.json(), '1005');
  });

  it('GET on the Emit path is a 404 envelope that says to POST', async () => {
    const { app } = testGateway();
    const response = await app.inject({ method: 'GET', url: '/HttpService/Emit' });
    expect(response.statusCode).toBe(404);
    expect(response.json().error_info).toContain('POST /HttpService/Emit');
  });

  it('a malformed URL is a 400 BAD_ENVELOPE envelope', async () => {
    const { app } = testGateway();
    const response = await app.inject({ method: 'GET', url: '/%zz' });
    expect(response.statusCode).toBe(400);
    expectEnvelope(response.json(), BAD_ENVELOPE);
  });

  it('a 10 MB chunked upload on a real socket is cut off with a 413 envelope', async () => {
    const { app } = testGateway();
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = app.server.address() as AddressInfo;
      const chunk = 'a'.repeat(64 * 1024);
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < 160; i++) controller.enqueue(new TextEncoder().encode(chunk));
          controller.close();
        },
      });
      const response = await fetch(`http://127.0.0.1:${port}/HttpService/Emit`, { method: 'POST', body, duplex: 'half' } as RequestInit);
      expect(response.status).toBe(413);
      expectEnvelope((await response.json()) as Record<string, unknown>, '1002');
    } finally {
      await app.close();
    }
  });

  it('malformed HTTP on a real socket is answered with an envelope, and the server keeps serving', async () => {
    const { app } = testGateway();
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = app.server.address() as AddressInfo;
      const raw = await rawExchange(port, 'POST /HttpService/Emit HTTP/1.1\r\nContent-Length: zz\r\n\r\n{}');
      expect(raw).toMatch(/^HTTP\/1\.1 400/);
      expectEnvelope(bodyOf(raw), BAD_JSON);
      const followUp = await fetch(`http://127.0.0.1:${port}/HttpService/Emit`, { method: 'POST', body: JSON.stringify(envelope('get_meta_mode')) });
      expect(((await followUp.json()) as { status: string }).status).toBe('done');
    } finally {
      await app.close();
    }
  });

  it('headers too large on a real socket get 431 with an error_code the catalog maps to 431', async () => {
    const { app } = testGateway();
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = app.server.address() as AddressInfo;
      const raw = await rawExchange(port, `POST /HttpService/Emit HTTP/1.1\r\nHost: x\r\nX-Padding: ${'a'.repeat(64 * 1024)}\r\nContent-Length: 2\r\n\r\n{}`);
      expect(raw).toMatch(/^HTTP\/1\.1 431 /);
      const body = bodyOf(raw);
      const entry = errorEntryByCode(Number(body.error_code));
      expect(entry?.httpStatus, `error_code ${String(body.error_code)} is catalogued as ${entry?.name} (${entry?.httpStatus})`).toBe(431);
      expectEnvelope(body, String(entry?.code));
      expect(String(body.error_info)).toMatch(/headers are too large/);
    } finally {
      await app.close();
    }
  });
});
