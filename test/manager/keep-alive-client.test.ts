import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeepAliveClient } from './helpers/keep-alive-client';

interface Seen {
  body: string;
  headers: http.IncomingHttpHeaders;
}

describe('KeepAliveClient', () => {
  const seen: Seen[] = [];
  let connections = 0;
  let member = '';
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ body: Buffer.concat(chunks).toString(), headers: req.headers });
      if (req.url === '/silent') return; // never answers
      if (req.url === '/not-json') return void res.writeHead(502).end('<html>bad gateway</html>');
      res.writeHead(req.url === '/busy' ? 503 : 200, { 'content-type': 'application/json' }).end(JSON.stringify({ error_code: req.url === '/busy' ? '20' : '0', echo: seen.length }));
    });
  });
  server.on('connection', () => connections++);

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    member = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('posts the JSON body with the given headers and resolves with the parsed reply', async () => {
    const client = new KeepAliveClient();
    const reply = await client.postJson(member, '/HttpService/Emit', '{"job_type":"create_machine"}', { headers: { 'x-request-id': 'req-1' }, timeoutMs: 5000 });
    expect(reply).toEqual({ error_code: '0', echo: seen.length });
    expect(seen.at(-1)).toMatchObject({ body: '{"job_type":"create_machine"}', headers: { 'content-type': 'application/json', 'x-request-id': 'req-1' } });
    client.close();
  });

  it('relays an error envelope whatever its HTTP status', async () => {
    const client = new KeepAliveClient();
    expect(await client.postJson(member, '/busy', '{}', { headers: {}, timeoutMs: 5000 })).toMatchObject({ error_code: '20' });
    client.close();
  });

  it('reuses its connections across requests instead of opening one per request', async () => {
    const client = new KeepAliveClient();
    const before = connections;
    for (let i = 0; i < 20; i++) await client.postJson(member, '/HttpService/Emit', '{}', { headers: {}, timeoutMs: 5000 });
    // undici's pool may open a second connection while the first is still being released.
    expect(connections - before).toBeLessThanOrEqual(2);
    client.close();
  });

  it('rejects a reply that is not JSON, and a leader that does not answer within the timeout', async () => {
    const client = new KeepAliveClient();
    await expect(client.postJson(member, '/not-json', '{}', { headers: {}, timeoutMs: 5000 })).rejects.toThrow(/HTTP 502 with a body that is not JSON/);
    const started = Date.now();
    await expect(client.postJson(member, '/silent', '{}', { headers: {}, timeoutMs: 200 })).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(3000);
    client.close();
  });
});
