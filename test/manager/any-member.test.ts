// Three real manager processes (127.0.1.71-73), no agents. Every member serves the gateway:
// the leader answers a submission itself, a follower passes it on unvalidated and relays
// the leader's answer. Whichever member a client reaches, bad input gets the same error
// (code, message, HTTP status), a valid job gets a job id, and one request_id is one job.

import { execFile } from 'node:child_process';
import { cp } from 'node:fs/promises';
import path from 'node:path';
import { Level } from 'level';
import { decodeEntryValue, encodeEntryValue } from '../../libs/raft/src/codec/entry-codec';
import { entryIndexOfKey, entryKeyRange } from '../../libs/raft/src/level-keys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KcmError, parseRequest, type ReplyEnvelope } from '@kcm/protocol';
import { requestEnvelope } from '../helpers/emit-client';
import { authHeader } from '../helpers/tokens';
import { loadFixture } from '../../libs/protocol/test/fixtures';
import { LocalGroup, createMachineParas } from './helpers/group';
import { REPO_ROOT, waitFor } from './helpers/processes';

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

  it('one create_token request_id sent to every member is one job, and every reply carries the same token (issue 35, item 7)', async () => {
    const once = requestEnvelope('create_token', { name: 'any-member-robot', role: 'viewer' }, { requestId: 'any-member-token' });
    const replies: ReplyEnvelope[] = [];
    for (const member of [...followers, leader, ...followers]) replies.push((await post(member, once)).body);
    for (const reply of replies) expect(reply, reply.error_info).toMatchObject({ status: 'accept', error_code: '0' });
    expect(new Set(replies.map((r) => r.job_id)).size).toBe(1);
    const tokens = new Set(replies.map((r) => (r.attachment as { token?: string } | null)?.token));
    expect(tokens.size).toBe(1);
    const [token] = tokens;
    expect(token).toMatch(/^kcm_/);
    // The one token recorded is that one: it authenticates, with its role, at every member.
    await waitFor('the token to be recorded', async () => (await post(leader, requestEnvelope('get_meta_mode'), { authorization: `Bearer ${token}` })).status === 200, 20_000);
    for (const member of MEMBERS) expect((await post(member, requestEnvelope('get_meta_mode'), { authorization: `Bearer ${token}` })).status).toBe(200);
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

  it("carries the identity the follower authenticated to the leader, which applies its role and records its name", async () => {
    const follower = followers[0];
    const viewer = await post(follower, requestEnvelope('create_machine', createMachineParas(unservedHost(), baseDir())), authHeader('viewer'));
    expect(viewer.status).toBe(403);
    const accepted = await post(follower, requestEnvelope('create_machine', createMachineParas(unservedHost(), baseDir())), authHeader('operator'));
    expect(accepted.body).toMatchObject({ error_code: '0', status: 'accept' });
    const audit = (await post(leader, requestEnvelope('get_audit', { limit: '50' }))).body.attachment as { list_audit: Record<string, string>[] };
    const record = audit.list_audit.find((r) => r.job_id === accepted.body.job_id);
    expect(record).toMatchObject({ by: 'test-operator', role: 'operator', via: follower, job_type: 'create_machine' });
    expect(record?.client).toMatch(/^127\./);
    // A viewer's refused request changed nothing, so it is in no record.
    expect(audit.list_audit.filter((r) => r.by === 'test-viewer')).toEqual([]);
  });

  it('audit verify finds the chain whole in a copy of a stopped member, and names a record altered in it', async () => {
    const follower = followers[1];
    const manager = group.manager(follower);
    await waitFor('the follower to apply every record', async () => {
      const tip = ((await post(leader, requestEnvelope('get_audit', { limit: '1' }))).body.attachment as { tip_seq: string }).tip_seq;
      const there = ((await post(follower, requestEnvelope('get_audit', { limit: '1' }))).body.attachment as { tip_seq: string }).tip_seq;
      return tip === there && Number(tip) >= 3;
    }, 10_000);
    await manager.kill();
    const copy = path.join(group.dir, 'verify-copy');
    await cp(path.join(path.dirname(manager.logFile), 'data'), copy, { recursive: true });

    const clean = await kcm(['audit', 'verify', '--data-dir', copy]);
    expect(clean.stderr).toBe('');
    expect(clean.code).toBe(0);
    expect(clean.stdout).toMatch(/^audit chain OK: /);

    // Change who sent one record, in the LevelDB value of its log entry.
    const altered = await alterFirstRecordOf(path.join(copy, 'raft'), 'test-operator');
    const broken = await kcm(['audit', 'verify', '--data-dir', copy]);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain(`record ${altered.seq} (log index ${altered.index}) was changed: its content does not match its hash`);
  });
});

/** Rewrites the first log entry whose audit record was sent by `by`, naming someone else; returns that record's number and log index. */
async function alterFirstRecordOf(raftDir: string, by: string): Promise<{ seq: number; index: number }> {
  const db = new Level<Uint8Array, Uint8Array>(raftDir, { keyEncoding: 'view', valueEncoding: 'view' });
  await db.open();
  try {
    for await (const [key, value] of db.iterator({ gte: entryKeyRange.gte, lt: entryKeyRange.lt })) {
      const index = entryIndexOfKey(key);
      const entry = decodeEntryValue(index, value);
      const text = new TextDecoder().decode(entry.data);
      const at = text.indexOf(`"by":"${by}"`);
      if (at < 0) continue;
      const seq = Number(/"seq":([0-9]+)/.exec(text.slice(text.lastIndexOf('"audit":', at)))?.[1]);
      const changed = text.slice(0, at) + `"by":"${by.slice(0, -1)}X"` + text.slice(at + `"by":"${by}"`.length);
      await db.put(key, encodeEntryValue({ ...entry, data: new TextEncoder().encode(changed) }));
      return { seq, index };
    }
    throw new Error(`no audit record by ${by} in ${raftDir}`);
  } finally {
    await db.close();
  }
}

function kcm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'services/cli/src/main.ts'), ...args], { cwd: REPO_ROOT, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}
