// Manager peers over mutual TLS, with real processes (127.0.1.161-164): a caller without a
// manager certificate of the cluster CA cannot send Raft messages (a stream of forged
// heartbeats with a high term deposes no one), cannot submit through the forward service,
// and a member whose certificate is another CA's, added by raft_mission, never catches up.

import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '@kcm/raft';
import { raftClientConstructor } from '../../libs/raft/src/grpc/raft-proto';
import { forwardServiceDefinition } from '@kcm/manager';
import { testCert } from '../helpers/pki';
import { emit, emitRaw, metrics, requestEnvelope, submitJob } from '../helpers/emit-client';
import { LocalGroup, createMachineParas } from './helpers/group';
import { sleep, waitFor } from './helpers/processes';

const MEMBERS = ['127.0.1.161:18460', '127.0.1.162:18460', '127.0.1.163:18460'];
const JOINER = '127.0.1.164:18460';
const raftAddress = (member: string) => `${member.slice(0, member.lastIndexOf(':'))}:18461`;

type Caller = 'no certificate' | 'another CA' | 'agent role' | 'manager role';

function credentialsOf(caller: Caller): grpc.ChannelCredentials {
  const ca = readFileSync(testCert('manager', ['127.0.1.161']).ca);
  if (caller === 'no certificate') return grpc.credentials.createSsl(ca);
  const files = caller === 'another CA' ? testCert('manager', ['127.0.9.9'], 'other') : testCert(caller === 'agent role' ? 'agent' : 'manager', ['127.0.9.9']);
  return grpc.credentials.createSsl(ca, readFileSync(files.key), readFileSync(files.cert));
}

/** Streams forged heartbeats (term 5000, from a made-up member) at every member for `ms`; the errors seen. */
async function forgeHeartbeats(caller: Caller, ms: number): Promise<Set<string>> {
  const RaftClient = raftClientConstructor();
  const errors = new Set<string>();
  const until = Date.now() + ms;
  while (Date.now() < until) {
    await Promise.all(MEMBERS.map(async (to) => {
      const client = new RaftClient(raftAddress(to), credentialsOf(caller));
      await new Promise<void>((resolve) => {
        const call = client.sendMessages({ deadline: Date.now() + 2000 }, (err) => {
          if (err) errors.add(grpc.status[err.code] ?? String(err.code));
          resolve();
        });
        call.on('error', () => {});
        const forged: Message = { type: 'Heartbeat', from: '127.0.1.199:18460', to, term: 5000, commit: 0 };
        for (let i = 0; i < 20; i++) call.write([forged]);
        call.end();
      });
      client.close();
    }));
    await sleep(50);
  }
  return errors;
}

async function raftView(): Promise<{ leader: string; terms: number[] }> {
  const all = await Promise.all(MEMBERS.map((m) => metrics(m)));
  const leaders = MEMBERS.filter((_, i) => all[i]!.get('kcm_raft_is_leader') === 1);
  return { leader: leaders.join(','), terms: all.map((m) => m.get('kcm_raft_term')!) };
}

describe('manager peers over mutual TLS', () => {
  let group: LocalGroup;

  beforeAll(async () => {
    group = new LocalGroup({
      name: 'tls-peers',
      members: [...MEMBERS, JOINER],
      joiners: [JOINER],
      agentHosts: [],
      agentPort: 18495,
      // debug: the leader logs each failed attempt to reach a peer (the joiner's are awaited below).
      managerConfig: { logLevel: 'debug' },
      // The joiner's certificate is valid, but of another CA: its peers must not trust it.
      memberConfig: { [JOINER]: { tls: testCert('manager', ['127.0.1.164'], 'other') } },
    });
    await group.start(MEMBERS);
    await group.waitForLeader(MEMBERS);
  }, 90_000);

  afterAll(async () => {
    await group?.stop();
  }, 30_000);

  for (const caller of ['no certificate', 'another CA', 'agent role'] as const) {
    it(`refuses Raft messages from a caller with ${caller}: forged heartbeats depose no one`, async () => {
      const before = await raftView();
      const errors = await forgeHeartbeats(caller, 3000);
      expect(errors.size).toBeGreaterThan(0);
      if (caller === 'agent role') expect([...errors]).toEqual(['PERMISSION_DENIED']);
      expect(await raftView()).toEqual(before);
    });
  }

  for (const caller of ['no certificate', 'agent role'] as const) {
    it(`refuses a forward submission from a caller with ${caller}`, async () => {
      const Forward = grpc.makeGenericClientConstructor(forwardServiceDefinition, 'Forward');
      const { leader } = await raftView();
      const client = new Forward(raftAddress(leader), credentialsOf(caller)) as unknown as { Submit(): grpc.ClientDuplexStream<unknown, unknown> } & grpc.Client;
      const call = client.Submit();
      const replies: unknown[] = [];
      const code = await new Promise<number>((resolve) => {
        call.on('data', (r) => replies.push(r));
        call.on('error', (err: grpc.ServiceError) => resolve(err.code));
        call.on('end', () => resolve(grpc.status.OK));
        const envelope = requestEnvelope('create_machine', createMachineParas('127.3.161.1', group.dir));
        call.write({ requests: [{ id: 1, envelope_json: JSON.stringify(envelope), request_id: 'forged', forwarded_by: '127.0.1.199:18460' }] });
        call.end();
      });
      client.close();
      expect(code).not.toBe(grpc.status.OK);
      if (caller === 'agent role') expect(code).toBe(grpc.status.PERMISSION_DENIED);
      expect(replies).toEqual([]);
      const machines = (await emit(leader, 'get_machine_summary', {})).attachment;
      expect(JSON.stringify(machines)).not.toContain('127.3.161.1');
    });
  }

  it('never lets a member with another CA’s certificate catch up, though raft_mission adds it', async () => {
    await group.startManager(JOINER);
    const addedAt = Date.now();
    await submitJob(MEMBERS, 'raft_mission', { task_type: 'add_peer', peer: JOINER }, { requestId: `tls-join-${process.pid}` });
    // The leader had its chances: it tried to reach the joiner again and again, and each attempt failed.
    const { leader } = await raftView();
    const failedAttempts = await waitFor('the leader to fail to reach the joiner 3 times', () => {
      const lines = group.manager(leader).logLines().filter((l) => l.msg === 'raft peer unreachable' && l.peer === JOINER && Date.parse(String(l.time)) >= addedAt);
      return lines.length >= 3 ? lines : undefined;
    }, 30_000, 200);
    // The joiner listens (its gateway answered above): the leader's connections fail at the TLS handshake.
    expect(new Set(failedAttempts.map((l) => l.reason))).toEqual(new Set(['connection failed']));
    const joiner = await metrics(JOINER);
    expect(joiner.get('kcm_raft_applied_index') ?? 0).toBe(0);
    expect(joiner.get('kcm_raft_is_leader')).toBe(0);
    // It never heard from the leader: it knows no leader (a member that caught up would).
    expect((await emitRaw(JOINER, 'get_meta_mode')).error_info).toContain('no leader is known');
  });

  it('lets a manager-role certificate through: the same forged heartbeats from it do raise the term', async () => {
    // The control: what the refusals above prevent does happen to a trusted caller.
    const before = await raftView();
    await forgeHeartbeats('manager role', 1500);
    const after = await raftView();
    expect(Math.max(...after.terms)).toBeGreaterThanOrEqual(5000);
    expect(after.terms).not.toEqual(before.terms);
  });
});
