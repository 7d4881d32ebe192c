import { describe, expect, it } from 'vitest';
import { KcmError, parseRequest } from '@kcm/protocol';
import { FakeJobService } from './fake-job-service';
import { MACHINE_PARAS, emit, envelope, testGateway } from './helpers';

describe('Emit dispatch by job mode', () => {
  it('an async job is submitted and acknowledged with status accept, a job id and a null attachment', async () => {
    const { app, service } = testGateway();
    const { status, body } = await emit(app, envelope('create_machine', MACHINE_PARAS));
    expect(status).toBe(200);
    expect(body).toEqual({ version: '1.0', error_code: '0', error_info: '', status: 'accept', job_id: '1', job_type: 'create_machine', attachment: null });
    expect(service.submitted).toHaveLength(1);
    expect(service.submitted[0].jobType).toBe('create_machine');
    expect(service.submitted[0].paras).toMatchObject({ hostaddr: '127.0.2.1' });
  });

  it('a reply echoes the alias spelling the client sent while the service sees the canonical type', async () => {
    const { app, service } = testGateway();
    const { body } = await emit(app, envelope('delete_shard', { cluster_id: '1', shard_id: '2' }));
    expect(body).toMatchObject({ error_code: '0', status: 'accept', job_type: 'delete_shard' });
    expect(service.submitted[0].jobType).toBe('delete_shards');
    expect(service.submitted[0].sentJobType).toBe('delete_shard');
  });

  it('a sync query is answered directly with status done and the service attachment', async () => {
    const { app, service } = testGateway();
    service.queryAnswers.get_cluster_summary = { list_cluster: [{ cluster_id: '1', cluster_name: 'cluster_1_000001', nick_name: 'shop', shards: '2', comps: '1' }] };
    const { status, body } = await emit(app, envelope('get_cluster_summary'));
    expect(status).toBe(200);
    expect(body).toMatchObject({ error_code: '0', status: 'done', job_id: '', job_type: 'get_cluster_summary' });
    expect(body.attachment).toEqual(service.queryAnswers.get_cluster_summary);
    expect(service.submitted).toHaveLength(0);
  });

  it('get_status reports the job as the service sees it, naming the job type it was submitted with', async () => {
    const { app } = testGateway();
    const accepted = await emit(app, envelope('create_machine', MACHINE_PARAS));
    const jobId = String(accepted.body.job_id);
    const first = await emit(app, envelope('get_status', {}, { job_id: jobId }));
    expect(first.body).toMatchObject({ error_code: '0', status: 'started', job_id: jobId, job_type: 'create_machine' });
    const second = await emit(app, envelope('get_status', {}, { job_id: jobId }));
    expect(second.body).toMatchObject({ status: 'ongoing', attachment: { progress: { step: 1, steps: 3 } } });
  });

  it('get_status of an unknown job is a NOT_FOUND envelope with HTTP 200', async () => {
    const { app } = testGateway();
    const { status, body } = await emit(app, envelope('get_status', {}, { job_id: '999' }));
    expect(status).toBe(200);
    expect(body).toMatchObject({ status: 'failed', error_code: String(KcmError.of('NOT_FOUND', '').code), job_id: '999', job_type: 'get_status' });
    expect(body.error_info).toBe('job 999 does not exist');
  });
});

describe('a follower relays async submissions to its leader unvalidated', () => {
  /** A service that relays async jobs (as a follower's RoutingService does) to a "leader" answering with `answer`. */
  function relayingGateway(answer: (envelope: Record<string, unknown>) => Promise<{ jobId: string }> | null) {
    const relayed: Record<string, unknown>[] = [];
    const service = Object.assign(new FakeJobService(), {
      relaySubmission: (envelope: Record<string, unknown>) => {
        const reply = answer(envelope);
        if (reply) relayed.push(envelope);
        return reply;
      },
    });
    return { ...testGateway({ service }), service, relayed };
  }

  it("passes an async job's envelope on as it came and answers with the leader's job id or error", async () => {
    const { app, service, relayed } = relayingGateway(async (env) => {
      if ((env.paras as Record<string, unknown>).total_mem === 'lots') throw KcmError.of('INVALID_PARAS', 'paras.total_mem: must be a number');
      return { jobId: '77' };
    });
    const accepted = await emit(app, envelope('create_machine', MACHINE_PARAS));
    expect(accepted.body).toMatchObject({ error_code: '0', status: 'accept', job_id: '77', job_type: 'create_machine' });
    const refused = await emit(app, envelope('create_machine', { ...MACHINE_PARAS, total_mem: 'lots' }));
    expect(refused.status).toBe(200);
    expect(refused.body).toMatchObject({ status: 'failed', error_code: String(KcmError.of('INVALID_PARAS', '').code), error_info: 'paras.total_mem: must be a number', job_type: 'create_machine' });
    expect(relayed.map((e) => (e.paras as Record<string, unknown>).total_mem)).toEqual([MACHINE_PARAS.total_mem, 'lots']);
    expect(service.submitted).toHaveLength(0);
  });

  it('answers queries, get_status and unknown job types itself, and validates what the service does not relay', async () => {
    const { app, service, relayed } = relayingGateway(() => null);
    const invalid = await emit(app, envelope('create_machine', { ...MACHINE_PARAS, port_range: '9-1' }));
    expect(invalid.body).toMatchObject({ status: 'failed', error_code: String(KcmError.of('INVALID_PARAS', '').code) });
    expect((await emit(app, envelope('create_machine', MACHINE_PARAS))).body).toMatchObject({ status: 'accept', job_id: '1' });
    expect(service.submitted).toHaveLength(1);
    const relayAll = relayingGateway(async () => ({ jobId: '5' }));
    expect((await emit(relayAll.app, envelope('get_cluster_summary'))).body).toMatchObject({ status: 'done' });
    expect((await emit(relayAll.app, envelope('get_status', {}, { job_id: '5' }))).body).toMatchObject({ error_code: String(KcmError.of('NOT_FOUND', '').code) });
    expect((await emit(relayAll.app, envelope('no_such_job'))).body).toMatchObject({ error_code: String(KcmError.of('UNKNOWN_JOB_TYPE', '').code) });
    expect(relayed).toHaveLength(0);
    expect(relayAll.relayed).toHaveLength(0);
  });
});

describe('Emit validation uses parseRequest from @kcm/protocol', () => {
  it('invalid paras get HTTP 200, INVALID_PARAS and exactly the protocol message', async () => {
    const { app, service } = testGateway();
    const request = envelope('create_machine', { ...MACHINE_PARAS, total_mem: 'lots', port_range: '9-1' });
    const expected = parseRequest(request);
    if (expected.ok) throw new Error('fixture should be invalid');
    const { status, body } = await emit(app, request);
    expect(status).toBe(200);
    expect(body).toMatchObject({ status: 'failed', error_code: String(expected.error.code), error_info: expected.error.message, job_type: 'create_machine' });
    expect(expected.error.errorName).toBe('INVALID_PARAS');
    expect(service.submitted).toHaveLength(0);
  });

  it('an unknown job type is UNKNOWN_JOB_TYPE with the spelling echoed', async () => {
    const { app } = testGateway();
    const { status, body } = await emit(app, envelope('create_clutser', {}));
    expect(status).toBe(200);
    expect(body).toMatchObject({ status: 'failed', error_code: String(KcmError.of('UNKNOWN_JOB_TYPE', '').code), job_type: 'create_clutser' });
  });

  it('an envelope missing its version is BAD_ENVELOPE with HTTP 400', async () => {
    const { app } = testGateway();
    const { version: _dropped, ...withoutVersion } = envelope('get_meta_mode');
    const { status, body } = await emit(app, withoutVersion);
    expect(status).toBe(400);
    expect(body).toMatchObject({ status: 'failed', error_code: String(KcmError.of('BAD_ENVELOPE', '').code) });
    expect(String(body.error_info)).toContain('version');
  });
});

describe('errors from the job service', () => {
  it('NO_LEADER becomes an envelope with HTTP 503', async () => {
    const { app, service } = testGateway();
    service.nextError = KcmError.of('NO_LEADER', 'no leader is known; retry later');
    const { status, body } = await emit(app, envelope('create_machine', MACHINE_PARAS));
    expect(status).toBe(503);
    expect(body).toMatchObject({ status: 'failed', error_code: '4000', error_info: 'no leader is known; retry later', job_type: 'create_machine' });
  });

  it('a plain error becomes INTERNAL (HTTP 500) without leaking its message, which goes to the log instead', async () => {
    const { app, service, logLines } = testGateway();
    service.nextError = new Error('leveldb: corruption at /secret/path');
    const response = await emit(app, envelope('get_machine_summary'), { 'x-request-id': 'req-internal-1' });
    expect(response.status).toBe(500);
    expect(response.body).toMatchObject({ status: 'failed', error_code: '5000', job_type: 'get_machine_summary' });
    expect(JSON.stringify(response.body)).not.toContain('secret');
    expect(String(response.body.error_info)).toContain('req-internal-1');
    const logged = logLines().find((l) => l.msg === 'job service failed');
    expect(JSON.stringify(logged)).toContain('/secret/path');
    expect(logged?.request_id).toBe('req-internal-1');
  });

  it('an attachment that cannot be serialised becomes an INTERNAL envelope, not a broken reply', async () => {
    const { app, service, registry } = testGateway();
    service.queryAnswers.get_meta_mode = { mode: BigInt(1) } as unknown as Record<string, unknown>;
    const { status, body } = await emit(app, envelope('get_meta_mode'));
    expect(status).toBe(500);
    expect(body).toMatchObject({ status: 'failed', error_code: '5000', job_type: 'get_meta_mode' });
    expect(await registry.metrics()).toContain('kcm_emit_requests_total{job_type="get_meta_mode",outcome="internal"} 1');
  });
});
