import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError, parseRequest, type ValidRequest } from '@kcm/protocol';
import { RoutingService } from '../src/routing-service';
import type { JobService } from '../src/gateway/job-service';

const notHere: JobService = {
  submitJob: async () => Promise.reject(new Error('a follower must not submit locally')),
  getStatus: async () => Promise.reject(new Error('unused')),
  runQuery: async () => Promise.reject(new Error('unused')),
};

function request(): ValidRequest {
  const parsed = parseRequest({ version: '1.0', job_id: '', job_type: 'delete_machine', timestamp: '1', user_name: 't', paras: { hostaddr: '127.9.0.1', machine_type: 'storage' } });
  if (!parsed.ok) throw parsed.error;
  return parsed.request;
}

describe('RoutingService on a follower', () => {
  const seen: { headers: http.IncomingHttpHeaders; body: unknown }[] = [];
  let reply: Record<string, unknown> = {};
  let leader = '';
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString()) });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(reply));
    });
  });

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    leader = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("forwards a submission to the leader with the request's id and its own name, and relays the job id", async () => {
    const routing = new RoutingService({ local: notHere, self: '127.0.1.2:18330', leader: () => leader, token: 'tok' });
    reply = { error_code: '0', error_info: '', job_id: '41', status: 'accept' };
    await expect(routing.submitJob(request(), { requestId: 'req-abc' })).resolves.toEqual({ jobId: '41' });
    expect(seen.at(-1)?.headers).toMatchObject({ 'x-request-id': 'req-abc', 'x-kcm-forwarded-by': '127.0.1.2:18330', authorization: 'Bearer tok' });
    expect(seen.at(-1)?.body).toMatchObject({ job_type: 'delete_machine', paras: { hostaddr: '127.9.0.1' } });
    routing.close();
  });

  it("relays the leader's error as the same catalog error", async () => {
    const routing = new RoutingService({ local: notHere, self: '127.0.1.2:18330', leader: () => leader });
    reply = { error_code: String(KcmError.of('NOT_FOUND', 'x').code), error_info: 'machine 127.9.0.1 is not registered as storage', job_id: '', status: 'failed' };
    await expect(routing.submitJob(request())).rejects.toSatisfy((err) => KcmError.is(err, 'NOT_FOUND') && String((err as Error).message).includes('not registered'));
    routing.close();
  });

  it('answers NO_LEADER when the leader does not answer, and when a forwarded request reaches a non-leader', async () => {
    const gone = new RoutingService({ local: notHere, self: '127.0.1.2:18330', leader: () => '127.0.0.1:1', forwardTimeoutMs: 2000 });
    await expect(gone.submitJob(request())).rejects.toSatisfy((err) => KcmError.is(err, 'NO_LEADER'));
    gone.close();
    const stale = new RoutingService({ local: notHere, self: '127.0.1.2:18330', leader: () => leader });
    await expect(stale.submitJob(request(), { forwardedBy: '127.0.1.3:18330' })).rejects.toSatisfy((err) => KcmError.is(err, 'NO_LEADER'));
    stale.close();
  });
});
