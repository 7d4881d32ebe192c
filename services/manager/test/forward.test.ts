// A follower's RoutingService forwarding submissions to a leader's Forward service over
// real gRPC (the leader's side is forwardServiceImplementation in front of a JobService
// that records what reached it).

import * as grpc from '@grpc/grpc-js';
import { serverCredentials } from '@kcm/agent-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError, parseRequest, type ValidRequest } from '@kcm/protocol';
import { silentLogger } from '@kcm/common';
import { RoutingService } from '../src/submit/routing-service';
import type { JobService, SubmitContext } from '../src/gateway/job-service';
import { forwardServiceDefinition } from '../src/submit/forward/forward-proto';
import { answerForwarded, forwardServiceImplementation } from '../src/submit/forward/forward-server';

const FOLLOWER = '127.0.1.2:18330';
/** What the follower's gateway authenticated; the leader applies it. */
const OPERATOR = { name: 'ops', role: 'operator' } as const;
const AS_OPERATOR = { identity: OPERATOR };

const notHere: JobService = {
  submitJob: async () => Promise.reject(new Error('a follower must not submit locally')),
  getStatus: async () => Promise.reject(new Error('unused')),
  runQuery: async () => Promise.reject(new Error('unused')),
};

function request(hostaddr = '127.9.0.1'): ValidRequest {
  const parsed = parseRequest({ version: '1.0', job_id: '', job_type: 'delete_machine', timestamp: '1', user_name: 't', paras: { hostaddr, machine_type: 'storage' } });
  if (!parsed.ok) throw parsed.error;
  return parsed.request;
}

/** The leader's job service: records each submission; hostaddr 127.9.0.99 is refused, 127.9.0.98 throws a plain Error. */
class RecordingLeader implements JobService {
  readonly seen: { req: ValidRequest; context: SubmitContext | undefined }[] = [];
  private nextJob = 41;
  async submitJob(req: ValidRequest, context?: SubmitContext): Promise<{ jobId: string }> {
    this.seen.push({ req, context });
    const host = (req.paras as { hostaddr: string }).hostaddr;
    if (host === '127.9.0.99') throw KcmError.of('NOT_FOUND', `machine ${host} is not registered as storage`);
    if (host === '127.9.0.98') throw new Error('disk on fire');
    const jobId = String(this.nextJob++);
    // Answers come back out of order.
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 5));
    return { jobId };
  }
  getStatus = notHere.getStatus;
  runQuery = notHere.runQuery;
}

describe('forwarding submissions from a follower to the leader', () => {
  const leaderService = new RecordingLeader();
  const server = new grpc.Server();
  /** The leader's member id: its Raft (and Forward) address is the next port. */
  let leader = '';

  beforeAll(async () => {
    server.addService(forwardServiceDefinition, forwardServiceImplementation(() => leaderService, silentLogger()));
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', serverCredentials(), (err, p) => (err ? reject(err) : resolve(p))));
    leader = `127.0.0.1:${port - 1}`;
  });
  afterAll(() => server.forceShutdown());

  it("hands the envelope, the request's id and its own name to the leader, and relays the job id", async () => {
    const routing = new RoutingService({ local: notHere, self: FOLLOWER, leader: () => leader });
    await expect(routing.submitJob(request(), { requestId: 'req-abc', identity: OPERATOR, clientAddress: '127.0.0.9' })).resolves.toEqual({ jobId: '41' });
    const last = leaderService.seen.at(-1)!;
    expect(last.context).toEqual({ forwardedBy: FOLLOWER, requestId: 'req-abc', identity: OPERATOR, clientAddress: '127.0.0.9', receivedBy: FOLLOWER });
    expect(last.req.jobType).toBe('delete_machine');
    expect(last.req.paras).toEqual({ hostaddr: '127.9.0.1', machine_type: 'storage' });
    routing.close();
  });

  it('matches many submissions in flight on one stream to their own replies', async () => {
    const routing = new RoutingService({ local: notHere, self: FOLLOWER, leader: () => leader });
    const hosts = Array.from({ length: 50 }, (_, i) => `127.9.1.${i + 1}`);
    const before = leaderService.seen.length;
    const replies = await Promise.all(hosts.map((h) => routing.submitJob(request(h), AS_OPERATOR)));
    const jobOf = new Map(leaderService.seen.slice(before).map((s, i) => [(s.req.paras as { hostaddr: string }).hostaddr, String(41 + before + i)]));
    expect(replies.map((r) => r.jobId)).toEqual(hosts.map((h) => jobOf.get(h)));
    routing.close();
  });

  it("relays the leader's refusal as the same catalog error, and masks an unexpected failure as INTERNAL", async () => {
    const routing = new RoutingService({ local: notHere, self: FOLLOWER, leader: () => leader });
    await expect(routing.submitJob(request('127.9.0.99'), AS_OPERATOR)).rejects.toSatisfy((err) => KcmError.is(err, 'NOT_FOUND') && String((err as Error).message).includes('not registered'));
    await expect(routing.submitJob(request('127.9.0.98'), AS_OPERATOR)).rejects.toSatisfy((err) => KcmError.is(err, 'INTERNAL') && !String((err as Error).message).includes('fire'));
    routing.close();
  });

  it('relays an envelope unvalidated: the leader validates it and its refusal comes back as the same error', async () => {
    const routing = new RoutingService({ local: notHere, self: FOLLOWER, leader: () => leader });
    const envelope = { ...request().envelope, job_type: 'create_machine', paras: { hostaddr: 'not an address' } };
    const relayed = routing.relaySubmission(envelope, { requestId: 'req-raw', ...AS_OPERATOR });
    expect(relayed).not.toBeNull();
    await expect(relayed).rejects.toSatisfy((err) => KcmError.is(err, 'INVALID_PARAS') && String((err as Error).message).includes('hostaddr'));
    const valid = { ...request('127.9.2.1').envelope };
    await expect(routing.relaySubmission(valid, AS_OPERATOR)).resolves.toMatchObject({ jobId: expect.any(String) });
    expect(leaderService.seen.at(-1)!.req.paras).toEqual({ hostaddr: '127.9.2.1', machine_type: 'storage' });
    routing.close();
  });

  it('relays nothing when it leads, when no leader is known, or when the envelope was forwarded to it', () => {
    const envelope = request().envelope as unknown as Record<string, unknown>;
    expect(new RoutingService({ local: notHere, self: FOLLOWER, leader: () => FOLLOWER }).relaySubmission(envelope, {})).toBeNull();
    expect(new RoutingService({ local: notHere, self: FOLLOWER, leader: () => null }).relaySubmission(envelope, {})).toBeNull();
    expect(new RoutingService({ local: notHere, self: FOLLOWER, leader: () => leader }).relaySubmission(envelope, { forwardedBy: '127.0.1.3:18330' })).toBeNull();
  });

  it('answers NO_LEADER when the leader cannot be reached, and when a forwarded submission reaches a non-leader', async () => {
    const gone = new RoutingService({ local: notHere, self: FOLLOWER, leader: () => '127.0.0.1:1', forwardTimeoutMs: 2000 });
    await expect(gone.submitJob(request(), AS_OPERATOR)).rejects.toSatisfy((err) => KcmError.is(err, 'NO_LEADER') && String((err as Error).message).includes('retry'));
    gone.close();
    const stale = new RoutingService({ local: notHere, self: FOLLOWER, leader: () => leader });
    await expect(stale.submitJob(request(), { forwardedBy: '127.0.1.3:18330' })).rejects.toSatisfy((err) => KcmError.is(err, 'NO_LEADER'));
    stale.close();
  });

  it('validates a forwarded envelope again at the leader', async () => {
    const before = leaderService.seen.length;
    const bad = await answerForwarded({ id: 7, envelope_json: JSON.stringify({ ...request().envelope, paras: { hostaddr: 'not an address' } }), request_id: 'r', forwarded_by: FOLLOWER, identity_name: 'ops', identity_role: 'operator', client_address: '' }, leaderService, silentLogger());
    expect(bad).toMatchObject({ id: 7, job_id: '', error_code: KcmError.of('INVALID_PARAS', '').code });
    expect(await answerForwarded({ id: 8, envelope_json: '{', request_id: 'r', forwarded_by: FOLLOWER, identity_name: 'ops', identity_role: 'operator', client_address: '' }, leaderService, silentLogger())).toMatchObject({ id: 8, error_code: KcmError.of('BAD_JSON', '').code });
    expect(leaderService.seen.length).toBe(before);
  });

  it("carries the identity the follower authenticated, and the leader applies that identity's role", async () => {
    const routing = new RoutingService({ local: notHere, self: FOLLOWER, leader: () => leader });
    const before = leaderService.seen.length;
    // raft_mission requires admin: the leader refuses the operator the follower vouched for.
    const raftMission = parseRequest({ version: '1.0', job_id: '', job_type: 'raft_mission', timestamp: '1', user_name: 't', paras: { task_type: 'transfer_leader', target_leader: '127.0.1.1:58000' } });
    if (!raftMission.ok) throw raftMission.error;
    const envelope = raftMission.request.envelope as unknown as Record<string, unknown>;
    await expect(routing.relaySubmission(envelope, AS_OPERATOR)).rejects.toSatisfy((err) => KcmError.is(err, 'FORBIDDEN') && String((err as Error).message).includes('token "ops" has role operator'));
    await expect(routing.relaySubmission(envelope, { identity: { name: 'boss', role: 'admin' } })).resolves.toMatchObject({ jobId: expect.any(String) });
    expect(leaderService.seen.slice(before).map((s) => s.context?.identity)).toEqual([{ name: 'boss', role: 'admin' }]);
    routing.close();
  });

  it('refuses a forwarded submission that carries no identity', async () => {
    const before = leaderService.seen.length;
    const reply = await answerForwarded({ id: 9, envelope_json: JSON.stringify(request().envelope), request_id: 'r', forwarded_by: FOLLOWER, identity_name: '', identity_role: '', client_address: '' }, leaderService, silentLogger());
    expect(reply).toMatchObject({ id: 9, job_id: '', error_code: KcmError.of('UNAUTHENTICATED', '').code });
    expect(leaderService.seen.length).toBe(before);
  });
});
