// Issue 12, defect 3: a member fails over its in-flight submissions when it learns of a new
// leader. Two leaders over real gRPC (forwardServiceImplementation in front of fake
// JobServices that share one idempotency table, as the replicated state machine does): a
// cut-off leader that never answers, and the next leader.

import * as grpc from '@grpc/grpc-js';
import { serverCredentials } from '@kcm/agent-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError, parseRequest, type ValidRequest } from '@kcm/protocol';
import { silentLogger } from '@kcm/common';
import { AUTO_REQUEST_ID_PREFIX, RoutingService } from '../src/submit/routing-service';
import type { JobService } from '../src/gateway/job-service';
import { forwardServiceDefinition } from '../src/submit/forward/forward-proto';
import { forwardServiceImplementation } from '../src/submit/forward/forward-server';

/** What the receiving member's gateway authenticated; every forward carries it. */
const AS_OPERATOR = { identity: { name: 'ops', role: 'operator' } } as const;

const SELF = '127.0.1.2:18330';

function request(requestId?: string): ValidRequest {
  const envelope: Record<string, unknown> = { version: '1.0', job_id: '', job_type: 'delete_machine', timestamp: '1', user_name: 't', paras: { hostaddr: '127.9.0.1', machine_type: 'storage' } };
  if (requestId !== undefined) envelope.request_id = requestId;
  const parsed = parseRequest(envelope);
  if (!parsed.ok) throw parsed.error;
  return parsed.request;
}

/** The replicated job table both leaders see: one job per request_id, like applyJobSubmitted. */
class JobTable {
  readonly byRequestId = new Map<string, string>();
  created = 0;
  commit(req: ValidRequest): string {
    const key = req.envelope.request_id;
    if (key === undefined) throw new Error('a submission reached a leader without an idempotency key');
    const earlier = this.byRequestId.get(key);
    if (earlier !== undefined) return earlier;
    const jobId = String(100 + ++this.created);
    this.byRequestId.set(key, jobId);
    return jobId;
  }
}

/** A leader's JobService. `cutOff`: commits what it receives, then never answers (partitioned right after). */
class FakeLeader implements JobService {
  readonly seen: ValidRequest[] = [];
  cutOff = false;
  constructor(private readonly table: JobTable) {}
  async submitJob(req: ValidRequest): Promise<{ jobId: string }> {
    this.seen.push(req);
    const jobId = this.table.commit(req);
    if (this.cutOff) return new Promise(() => {});
    return { jobId };
  }
  getStatus = async () => Promise.reject(new Error('unused'));
  runQuery = async () => Promise.reject(new Error('unused'));
}

async function serve(service: JobService): Promise<{ member: string; server: grpc.Server }> {
  const server = new grpc.Server();
  server.addService(forwardServiceDefinition, forwardServiceImplementation(() => service, silentLogger()));
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', serverCredentials(), (err, p) => (err ? reject(err) : resolve(p))));
  return { member: `127.0.0.1:${port - 1}`, server }; // a member's Forward service is on its Raft port, the next one
}

/** What RaftNode tells a member: who leads, and each change. */
class LeaderView {
  private listeners: (() => void)[] = [];
  constructor(public current: string | null) {}
  move(to: string | null): void {
    this.current = to;
    for (const l of this.listeners) l();
  }
  deps() {
    return { leader: () => this.current, onLeaderChange: (l: () => void) => void this.listeners.push(l) };
  }
}

const until = async (check: () => boolean, timeoutMs = 3_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('a member following the leader with its in-flight submissions', () => {
  let table: JobTable;
  let oldLeader: FakeLeader;
  let newLeader: FakeLeader;
  let oldAt: { member: string; server: grpc.Server };
  let newAt: { member: string; server: grpc.Server };
  const notHere: JobService = { submitJob: () => Promise.reject(new Error('not the leader')), getStatus: () => Promise.reject(new Error('unused')), runQuery: () => Promise.reject(new Error('unused')) };

  beforeAll(async () => {
    table = new JobTable();
    oldLeader = new FakeLeader(table);
    oldLeader.cutOff = true;
    newLeader = new FakeLeader(table);
    oldAt = await serve(oldLeader);
    newAt = await serve(newLeader);
  });
  afterAll(() => {
    oldAt.server.forceShutdown();
    newAt.server.forceShutdown();
  });

  it('re-sends a forward in flight to a cut-off leader to the new leader as soon as it is known, and relays the one job it made', async () => {
    const view = new LeaderView(oldAt.member);
    const routing = new RoutingService({ local: notHere, self: SELF, ...view.deps(), forwardTimeoutMs: 15_000 });
    const seenBefore = oldLeader.seen.length;
    const createdBefore = table.created;
    const started = Date.now();
    const submitted = routing.submitJob(request(), AS_OPERATOR); // the client sent no request_id
    await until(() => oldLeader.seen.length === seenBefore + 1); // committed there, never answered
    view.move(newAt.member);
    const { jobId } = await submitted;
    expect(Date.now() - started).toBeLessThan(2_000); // not the 15 s forward timeout
    const first = oldLeader.seen.at(-1)!;
    const resent = newLeader.seen.at(-1)!;
    // One key, made by the member, on both sends: the new leader returned the job the old one committed.
    expect(first.envelope.request_id).toMatch(new RegExp(`^${AUTO_REQUEST_ID_PREFIX}[0-9a-f-]{36}$`));
    expect(resent.envelope.request_id).toBe(first.envelope.request_id);
    expect(table.created).toBe(createdBefore + 1);
    expect(jobId).toBe(table.byRequestId.get(first.envelope.request_id!));
    routing.close();
  });

  it("keeps the client's own request_id on every send", async () => {
    const view = new LeaderView(oldAt.member);
    const routing = new RoutingService({ local: notHere, self: SELF, ...view.deps(), forwardTimeoutMs: 15_000 });
    const seenBefore = oldLeader.seen.length;
    const submitted = routing.relaySubmission(request('client-key-7').envelope as unknown as Record<string, unknown>, AS_OPERATOR)!;
    await until(() => oldLeader.seen.length === seenBefore + 1);
    view.move(null); // an election: nobody known for a moment
    view.move(newAt.member);
    await expect(submitted).resolves.toEqual({ jobId: table.byRequestId.get('client-key-7') });
    expect(oldLeader.seen.at(-1)!.envelope.request_id).toBe('client-key-7');
    expect(newLeader.seen.at(-1)!.envelope.request_id).toBe('client-key-7');
    routing.close();
  });

  it('submits a relayed envelope itself, keyed as first sent, when it becomes the new leader', async () => {
    const view = new LeaderView(oldAt.member);
    const here = new FakeLeader(table);
    const routing = new RoutingService({ local: here, self: SELF, ...view.deps(), forwardTimeoutMs: 15_000 });
    const seenBefore = oldLeader.seen.length;
    const createdBefore = table.created;
    const submitted = routing.relaySubmission(request().envelope as unknown as Record<string, unknown>, AS_OPERATOR)!;
    await until(() => oldLeader.seen.length === seenBefore + 1);
    view.move(SELF);
    const { jobId } = await submitted;
    expect(here.seen).toHaveLength(1); // validated and submitted here, by this member's own JobService
    expect(here.seen[0].envelope.request_id).toBe(oldLeader.seen.at(-1)!.envelope.request_id);
    expect(jobId).toBe(table.byRequestId.get(here.seen[0].envelope.request_id!));
    expect(table.created).toBe(createdBefore + 1);
    routing.close();
  });

  it('forwards its own submission to the new leader when it loses leadership with the entry pending', async () => {
    const view = new LeaderView(SELF);
    const pendingHere: ValidRequest[] = [];
    const local: JobService = {
      ...notHere,
      // The proposal is pending when leadership moves; RaftMetaStore then fails it with NO_LEADER.
      submitJob: (req) => {
        pendingHere.push(req);
        table.commit(req);
        return new Promise((_, reject) => setTimeout(() => reject(KcmError.of('NO_LEADER', 'leadership moved while the command was pending; its outcome is unknown')), 300));
      },
    };
    const routing = new RoutingService({ local, self: SELF, ...view.deps(), forwardTimeoutMs: 15_000 });
    const createdBefore = table.created;
    const submitted = routing.submitJob(request(), AS_OPERATOR);
    await until(() => pendingHere.length === 1);
    view.move(newAt.member);
    const { jobId } = await submitted;
    expect(newLeader.seen.at(-1)!.envelope.request_id).toBe(pendingHere[0].envelope.request_id);
    expect(jobId).toBe(table.byRequestId.get(pendingHere[0].envelope.request_id!));
    expect(table.created).toBe(createdBefore + 1);
    routing.close();
  });

  it("keeps TIMEOUT as the code when the last leader's commit timed out", async () => {
    const view = new LeaderView(SELF);
    const local: JobService = { ...notHere, submitJob: () => Promise.reject(KcmError.of('TIMEOUT', 'outcome unknown: proposal timed out after 10000 ms; retry with the same request_id')) };
    const routing = new RoutingService({ local, self: SELF, ...view.deps(), forwardTimeoutMs: 500 });
    const err = await routing.submitJob(request('client-key-9'), AS_OPERATOR).catch((e: unknown) => e);
    expect(KcmError.is(err, 'TIMEOUT')).toBe(true);
    expect((err as Error).message).toBe(
      'outcome unknown: the job may or may not have been created (this member did not answer: proposal timed out after 10000 ms; retry with the same request_id); ' +
        'retry with request_id "client-key-9": a retry with the same request_id returns that job and never creates a second one',
    );
    routing.close();
  });

  it('says plainly that the outcome is unknown, naming the request_id to retry with, when no leader answers in time', async () => {
    const view = new LeaderView(oldAt.member);
    const routing = new RoutingService({ local: notHere, self: SELF, ...view.deps(), forwardTimeoutMs: 600 });
    const err = await routing.submitJob(request(), AS_OPERATOR).catch((e: unknown) => e);
    const key = oldLeader.seen.at(-1)!.envelope.request_id!;
    expect(KcmError.is(err, 'NO_LEADER')).toBe(true);
    expect((err as Error).message).toMatch(/^outcome unknown: /);
    expect((err as Error).message).toContain(`retry with request_id "${key}"`);
    // That retry, with the key, returns the job the cut-off leader committed.
    const retry = new RoutingService({ local: notHere, self: SELF, leader: () => newAt.member, forwardTimeoutMs: 5_000 });
    await expect(retry.submitJob(request(key), AS_OPERATOR)).resolves.toEqual({ jobId: table.byRequestId.get(key) });
    routing.close();
    retry.close();
  });
});
