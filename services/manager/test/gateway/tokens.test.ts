// Tokens made by create_token: the acknowledgement carries the token once, the state only
// its digest; the token then authenticates with its role until delete_token (a real
// one-member manager running its jobs).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authHeader } from '../../../../test/helpers/tokens';
import { startInProcessManager, type InProcessManager } from '../helpers/in-process-manager';
import { envelope } from './helpers';

let kcm: InProcessManager;
beforeAll(async () => {
  kcm = await startInProcessManager({ leaderServices: true });
});
afterAll(() => kcm?.close());

async function runJob(body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const ack = await kcm.emit(body);
  expect(ack.reply.status, ack.reply.error_info).toBe('accept');
  for (let i = 0; i < 200; i++) {
    const { reply } = await kcm.emit(envelope('get_status', {}, { job_id: ack.reply.job_id }));
    if (reply.status === 'done' || reply.status === 'failed') return { ...reply, ack: ack.reply };
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('job did not end');
}

describe('create_token, list_tokens, delete_token', () => {
  it('gives the token once, keeps only its digest, and the token works with its role until deleted', async () => {
    const created = await runJob(envelope('create_token', { name: 'ci-robot', role: 'operator' }));
    expect(created.status).toBe('done');
    const token = (created.ack as { attachment: { token: string } }).attachment.token;
    expect(token).toMatch(/^kcm_[A-Za-z0-9_-]{43}$/);
    expect(JSON.stringify(kcm.manager.store.state())).not.toContain(token);
    expect(kcm.manager.store.state().tokens['ci-robot']).toMatchObject({ role: 'operator', createdBy: 'test-admin' });

    const asRobot = { authorization: `Bearer ${token}` };
    expect((await kcm.emit(envelope('get_cluster_summary'), asRobot)).status).toBe(200);
    expect((await kcm.emit(envelope('list_tokens'), asRobot)).status).toBe(403); // admin only

    const listed = (await kcm.emit(envelope('list_tokens'))).reply.attachment as { list_token: Record<string, string>[] };
    expect(listed.list_token.map((t) => `${t.name}:${t.role}:${t.source}`)).toEqual(['test-admin:admin:config', 'test-operator:operator:config', 'test-viewer:viewer:config', 'ci-robot:operator:replicated']);
    expect(JSON.stringify(listed)).not.toMatch(/[0-9a-f]{64}/);

    expect((await runJob(envelope('delete_token', { name: 'ci-robot' }))).status).toBe('done');
    expect((await kcm.emit(envelope('get_cluster_summary'), asRobot)).status).toBe(401);
  });

  it('refuses a second token of the same name, and a viewer may not make one', async () => {
    await runJob(envelope('create_token', { name: 'twice', role: 'viewer' }));
    const again = await kcm.emit(envelope('create_token', { name: 'twice', role: 'viewer' }));
    expect(again.reply).toMatchObject({ error_code: '1006', status: 'failed' });
    expect(again.reply.attachment).toBeNull();
    expect((await kcm.emit(envelope('create_token', { name: 'x', role: 'admin' }), authHeader('viewer'))).status).toBe(403);
  });
});

describe('create_token retried with its request_id', () => {
  const tokenOf = (reply: { attachment: unknown }) => (reply.attachment as { token?: string } | null)?.token;

  it('answers the same job and the same token to its submitter, and records one token', async () => {
    const body = envelope('create_token', { name: 'retried', role: 'viewer' }, { request_id: 'create-token-retry-1' });
    const first = await kcm.emit(body);
    expect(first.reply.status, first.reply.error_info).toBe('accept');
    const token = tokenOf(first.reply);
    expect(token).toMatch(/^kcm_[A-Za-z0-9_-]{43}$/);
    // The client lost the reply and sends the same body again: before the job ran, and after.
    const retry = await kcm.emit(body);
    expect(retry.reply, retry.reply.error_info).toMatchObject({ status: 'accept', error_code: '0', job_id: first.reply.job_id });
    expect(tokenOf(retry.reply)).toBe(token);
    const done = await runJob(body);
    expect(done.status).toBe('done');
    expect(done.job_id).toBe(first.reply.job_id);
    expect(tokenOf(done.ack as { attachment: unknown })).toBe(token);

    const state = kcm.manager.store.state();
    expect(Object.keys(state.tokens).filter((name) => name === 'retried')).toEqual(['retried']);
    expect(JSON.stringify(state)).not.toContain(String(token));
    expect((await kcm.emit(envelope('get_cluster_summary'), { authorization: `Bearer ${token}` })).status).toBe(200);
  });

  it('another admin sending the same request_id and body gets CONFLICT, not the token', async () => {
    const second = await runJob(envelope('create_token', { name: 'second-admin', role: 'admin' }));
    const secondAdmin = { authorization: `Bearer ${tokenOf(second.ack as { attachment: unknown })}` };
    const body = envelope('create_token', { name: 'mine', role: 'viewer' }, { request_id: 'create-token-retry-2' });
    const first = await kcm.emit(body);
    expect(first.reply.status).toBe('accept');
    const other = await kcm.emit(body, secondAdmin);
    expect(other.reply).toMatchObject({ status: 'failed', error_code: '1006', attachment: null });
    expect(JSON.stringify(other.reply)).not.toContain(String(tokenOf(first.reply)));
  });

  it('the same request_id with another body is still CONFLICT', async () => {
    const first = await kcm.emit(envelope('create_token', { name: 'one-body', role: 'viewer' }, { request_id: 'create-token-retry-3' }));
    expect(first.reply.status).toBe('accept');
    const other = await kcm.emit(envelope('create_token', { name: 'one-body', role: 'operator' }, { request_id: 'create-token-retry-3' }));
    expect(other.reply).toMatchObject({ status: 'failed', error_code: '1006', attachment: null });
    expect(other.reply.error_info).toMatch(/request_id: create-token-retry-3 was already used/);
  });
});
