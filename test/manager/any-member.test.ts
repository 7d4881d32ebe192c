// Three real manager processes (127.0.1.71-73), no agents. Every member serves the gateway:
// the leader answers a submission itself, a follower passes it on unvalidated and relays
// the leader's answer. Whichever member a client reaches, bad input gets the same error
// (code, message, HTTP status), a valid job gets a job id, and one request_id is one job.

import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError, parseRequest, type ReplyEnvelope } from '@kcm/protocol';
import { requestEnvelope } from './helpers/emit-client';
import { authHeader } from '../helpers/tokens';
import { loadFixture } from '../../libs/protocol/test/fixtures';
import { LocalGroup, createMachineParas } from './helpers/group';

const MEMBERS = ['127.0.1.71:18350', '127.0.1.72:18350', '127.0.1.73:18350'];
const AGENT_PORT = 18395;

async function post(member: string, envelope: Record<string, unknown>, headers: Record<string, string> = authHeader()): Promise<{ status: number; body: ReplyEnvelope }> {
  const res = await fetch(`http://${member}/HttpService/Emit`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(envelope) });
  return { status: res.status, body: (await res.json()) as ReplyEnvelope };
}

/** The message parseRequest gives `envelope` (the one validation path every member must end in). */
function validationMessage(envelope: Record<string, unknown>): string {
  const parsed = parseRequest(envelope);
  if (parsed.ok) throw new Error('fixture should be invalid');
  return parsed.error.message;
}

describe('any member serves the gateway', () => {
  let group: LocalGroup;
  let leader = '';
  let followers: string[] = [];
  /** Loopback hosts nobody serves: the accepted jobs fail fast at their first step. */
  let nextHost = 1;
  const unservedHost = () => `127.3.71.${nextHost++}`;
  const baseDir = () => path.join(group.dir, 'unused');

  beforeAll(async () => {
    group = new LocalGroup({ name: 'any-member', members: MEMBERS, agentHosts: [], agentPort: AGENT_PORT });
    await group.start();
    leader = await group.waitForLeader();
    followers = MEMBERS.filter((m) => m !== leader);
  }, 90_000);

  afterAll(async () => {
    await group?.stop();
  }, 30_000);

  it('answers bad input with the same error from the leader and from each follower', async () => {
    const badParas = requestEnvelope('create_machine', createMachineParas('not-an-address', '/tmp/unused'));
    const badEnvelope = { ...requestEnvelope('create_machine', createMachineParas('127.3.71.250', '/tmp/unused')), timestamp: 'yesterday' };
    for (const member of [leader, ...followers]) {
      const paras = await post(member, badParas);
      expect({ member, http: paras.status, reply: paras.body }).toMatchObject({
        member,
        http: 200,
        reply: { status: 'failed', error_code: String(KcmError.of('INVALID_PARAS', '').code), error_info: validationMessage(badParas), job_type: 'create_machine' },
      });
      const envelope = await post(member, badEnvelope);
      expect({ member, http: envelope.status, reply: envelope.body }).toMatchObject({
        member,
        http: 400,
        reply: { status: 'failed', error_code: String(KcmError.of('BAD_ENVELOPE', '').code), error_info: validationMessage(badEnvelope) },
      });
    }
  });

  it('accepts a valid job at every member, and one request_id sent to every member is one job', async () => {
    for (const member of [leader, ...followers]) {
      const accepted = await post(member, requestEnvelope('create_machine', createMachineParas(unservedHost(), baseDir())));
      expect(accepted.body).toMatchObject({ error_code: '0', status: 'accept', job_type: 'create_machine' });
      expect(accepted.body.job_id).toMatch(/^[0-9]+$/);
    }
    const once = requestEnvelope('create_machine', createMachineParas(unservedHost(), baseDir()), { requestId: 'any-member-once' });
    const ids = [];
    for (const member of [...followers, leader]) ids.push((await post(member, once)).body.job_id);
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toMatch(/^[0-9]+$/);
  });

  it('refuses a request without a token with 401, and a token without the role with 403, at every member, with the envelope', async () => {
    const machine = requestEnvelope('create_machine', createMachineParas(unservedHost(), baseDir()));
    const cluster = requestEnvelope('create_cluster', loadFixture('create_cluster').paras);
    const mission = requestEnvelope('raft_mission', { task_type: 'transfer_leader', target_leader: leader });
    for (const member of [leader, ...followers]) {
      const anonymous = await post(member, machine, {});
      expect({ member, http: anonymous.status, reply: anonymous.body }).toMatchObject({ member, http: 401, reply: { version: '1.0', status: 'failed', error_code: '3000', attachment: null } });
      const viewer = await post(member, cluster, authHeader('viewer'));
      expect({ member, http: viewer.status, reply: viewer.body }).toMatchObject({ member, http: 403, reply: { status: 'failed', error_code: '3001', job_type: 'create_cluster' } });
      const operator = await post(member, mission, authHeader('operator'));
      expect({ member, http: operator.status, reply: operator.body }).toMatchObject({ member, http: 403, reply: { status: 'failed', error_code: '3001', job_type: 'raft_mission' } });
    }
  });
});
