// The audit trail: records chained by the leader, linked in apply, kept through snapshots.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authHeader } from '../../../../test/helpers/tokens';
import { GENESIS_TIP, linkOf, redactParas, sealRecord } from '../../src/audit/chain';
import { restoreMeta, snapshotMeta } from '../../src/meta/snapshot/image';
import { startInProcessManager, type InProcessManager } from '../helpers/in-process-manager';
import { MACHINE_PARAS, envelope } from '../gateway/helpers';

const fields = (by: string) => ({ at: 1, by, role: 'admin', client: '127.0.0.9', via: 'm1', jobType: 'create_machine', sentJobType: 'create_machine', paras: { a: '1' }, requestId: null }) as const;

describe('the audit chain', () => {
  it('links a record that follows the tip, and names what is wrong with one that does not', () => {
    const first = sealRecord(GENESIS_TIP, fields('alice'));
    const second = sealRecord({ seq: first.seq, hash: first.hash }, fields('bob'));
    expect(linkOf(GENESIS_TIP, first)).toBe('linked');
    expect(linkOf({ seq: 1, hash: first.hash }, second)).toBe('linked');
    expect(linkOf(GENESIS_TIP, second)).toBe('gap');
    expect(linkOf({ seq: 1, hash: first.hash }, first)).toBe('stale');
    expect(linkOf({ seq: 1, hash: 'f'.repeat(64) }, second)).toBe('forked');
    expect(linkOf({ seq: 1, hash: first.hash }, { ...second, by: 'mallory' })).toBe('altered');
  });

  it('redacts secret-looking paras at any depth', () => {
    expect(redactParas({ name: 'x', token_sha256: 'abc', nested: [{ password: 'p', ok: 1 }] })).toEqual({ name: 'x', token_sha256: '<redacted>', nested: [{ password: '<redacted>', ok: 1 }] });
  });
});

describe('the audit trail of a real one-member manager', () => {
  let kcm: InProcessManager;
  beforeAll(async () => {
    kcm = await startInProcessManager();
  });
  afterAll(() => kcm?.close());

  it('records each accepted submission with who, what, when and from where, chained, and keeps it through a snapshot', async () => {
    const before = Date.now();
    const a = await kcm.emit(envelope('create_machine', MACHINE_PARAS), authHeader('operator'));
    const b = await kcm.emit(envelope('create_token', { name: 'robot', role: 'viewer' }), authHeader('admin'));
    expect(b.reply.attachment).toMatchObject({ name: 'robot', role: 'viewer', token: expect.stringMatching(/^kcm_/) });
    const audit = kcm.manager.store.state().audit;
    const [first, second] = audit.records.slice(-2);
    expect(first).toMatchObject({ by: 'test-operator', role: 'operator', jobType: 'create_machine', jobId: a.reply.job_id, via: kcm.manager.config.member, paras: MACHINE_PARAS });
    expect(first.at).toBeGreaterThanOrEqual(before);
    expect(second).toMatchObject({ by: 'test-admin', jobType: 'create_token', paras: { name: 'robot', role: 'viewer', token_sha256: '<redacted>' }, prevHash: first.hash, seq: first.seq + 1 });
    expect(audit.tip).toEqual({ seq: second.seq, hash: second.hash });
    expect(restoreMeta(snapshotMeta(kcm.manager.store.state())).audit).toEqual(audit);
    // get_audit lists them for an admin, and a viewer may not read it.
    const listed = await kcm.emit(envelope('get_audit', { limit: '2' }));
    expect((listed.reply.attachment as { list_audit: { by: string }[] }).list_audit.map((r) => r.by)).toEqual(['test-operator', 'test-admin']);
    expect((await kcm.emit(envelope('get_audit', {}), authHeader('viewer'))).status).toBe(403);
  });

  it('refuses a record that does not follow the chain, changing nothing', async () => {
    const state = kcm.manager.store.state();
    const stale = sealRecord({ seq: state.audit.tip.seq - 1, hash: 'f'.repeat(64) }, fields('mallory'));
    const jobs = state.counters.job;
    const outcome = await kcm.manager.store.propose({ kind: 4, at: 1, jobType: 'set_machine', sentJobType: 'set_machine', paras: {}, requestId: null, lockKey: null, audit: stale });
    expect(outcome).toMatchObject({ ok: false, refusal: 'NO_LEADER' });
    expect(kcm.manager.store.state().counters.job).toBe(jobs);
  });
});
