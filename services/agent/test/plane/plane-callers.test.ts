// Who may use an agent's bulk data plane, over real mutual TLS, and what it serves: the same
// rules as the agent's gRPC server (test/tls/agent-callers.test.ts). No client certificate
// or one of another CA never completes the handshake; another agent needs a manager's
// transfer ticket naming it and this agent, unexpired; a manager needs none. A stored
// object comes back whole, and one altered on disk ends with DATA_LOSS.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tls from 'node:tls';
import { randomBytes, createHash } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentCallError, AgentUnreachableError, loadTlsMaterial, mintTicket, planeReceive, planeStream, type PlaneCallOptions, type TlsMaterial } from '@kcm/agent-api';
import { silentLogger } from '@kcm/common';
import { startAgent, type RunningAgent } from '../../src/server';
import { FsObjectStore } from '../../src/capabilities/storage/object-store';
import { testCert, useTestTls } from '../../../../test/helpers/pki';

const HOST = '127.0.0.1';
const PEER = '127.0.0.2';
const KEY = 'cluster_1/backup_1/shard_1.mbstream';

let agent: RunningAgent;
let tmp: string;
let root: string;
let manager: TlsMaterial;
let peer: TlsMaterial;
let at: { host: string; port: number };
const object = randomBytes(3 * 1024 * 1024 + 17);

beforeAll(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'kcm-plane-'));
  root = path.join(tmp, 'storage');
  useTestTls([HOST], 'agent');
  manager = loadTlsMaterial(testCert('manager', ['127.0.1.1']), 'manager');
  peer = loadTlsMaterial(testCert('agent', [PEER]), 'agent');
  agent = await startAgent({ hostaddr: HOST, port: 0, logger: silentLogger(), stateDir: path.join(tmp, 'state') });
  at = { host: HOST, port: Number(agent.planeAddress!.split(':')[1]) };
  const writer = await new FsObjectStore(root).writer(KEY);
  await writer.write(object);
  await writer.commit({});
});

afterAll(async () => {
  await agent?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

async function get(options: Omit<PlaneCallOptions, 'at'>): Promise<{ bytes: Buffer } | { error: Error }> {
  const pieces: Buffer[] = [];
  try {
    for await (const piece of planeStream(agent.address, { op: 'get', root, key: KEY }, { at, ...options })) pieces.push(Buffer.from(piece));
    return { bytes: Buffer.concat(pieces) };
  } catch (err) {
    return { error: err as Error };
  }
}

const ticket = (payload: { holder: string; targets: string[]; exp: number }, signer = manager) => mintTicket(signer, { v: 1, ...payload });

function refusal(reply: { bytes: Buffer } | { error: Error }): { code: number; message: string } {
  if (!('error' in reply)) throw new Error('the transfer was not refused');
  return { code: reply.error instanceof AgentCallError ? reply.error.code : -1, message: reply.error.message };
}

/** A raw TLS connection: the handshake's outcome, with or without a client certificate. */
function handshake(client: { cert?: Buffer; key?: Buffer }): Promise<'refused' | 'accepted'> {
  return new Promise((resolve) => {
    const socket = tls.connect({ ...at, ca: readFileSync(testCert('agent', [HOST]).ca), ...client, minVersion: 'TLSv1.3' });
    socket.on('error', () => resolve('refused'));
    // TLS 1.3 reports a refused client certificate after the client's side completed: the
    // server's alert closes the connection before any byte of an answer.
    socket.on('secureConnect', () => {
      socket.write('{"v":1,"op":"get","root":"/nonexistent","key":"k"}\n');
      socket.once('data', () => (socket.destroy(), resolve('accepted')));
      socket.once('close', () => resolve('refused'));
    });
  });
}

describe("an agent's data plane over mutual TLS", () => {
  it('listens only beside a TLS agent, on its own port', () => {
    expect(agent.planeAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(agent.planeAddress).not.toBe(agent.address);
  });

  it('refuses a connection without a client certificate, or with one of another CA, in the handshake', async () => {
    expect(await handshake({})).toBe('refused');
    const other = testCert('manager', ['127.0.1.1'], 'other');
    expect(await handshake({ cert: readFileSync(other.cert), key: readFileSync(other.key) })).toBe('refused');
    const ours = testCert('manager', ['127.0.1.1']);
    expect(await handshake({ cert: readFileSync(ours.cert), key: readFileSync(ours.key) })).toBe('accepted');
  });

  it('serves a manager the stored object whole, without a ticket', async () => {
    const reply = await get({ material: manager, ticket: undefined });
    expect('bytes' in reply && createHash('sha256').update(reply.bytes).digest('hex')).toBe(createHash('sha256').update(object).digest('hex'));
  });

  it('refuses another agent without a ticket, or with one for another holder, agent, signer or time', async () => {
    const exp = Date.now() + 60_000;
    const none = refusal(await get({ material: peer, ticket: undefined }));
    expect(none.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(none.message).toContain('only with a transfer ticket');
    expect(refusal(await get({ material: peer, ticket: ticket({ holder: '127.0.0.3', targets: [agent.address], exp }) })).message).toContain('issued to 127.0.0.3');
    expect(refusal(await get({ material: peer, ticket: ticket({ holder: PEER, targets: ['127.0.0.1:1'], exp }) })).message).toContain('does not name this agent');
    expect(refusal(await get({ material: peer, ticket: ticket({ holder: PEER, targets: [agent.address], exp: Date.now() - 1 }) })).message).toContain('expired');
    expect(refusal(await get({ material: peer, ticket: ticket({ holder: PEER, targets: [agent.address], exp }, peer) })).message).toContain('not signed by a manager');
    const forged = ticket({ holder: PEER, targets: [agent.address], exp });
    const tampered = { ...forged, ticket: `${Buffer.from(JSON.stringify({ v: 1, holder: PEER, targets: [agent.address], exp: exp + 3600_000 })).toString('base64url')}.${forged.ticket.split('.')[1]}` };
    expect(refusal(await get({ material: peer, ticket: tampered })).message).toContain('signature is wrong');
  });

  it('serves another agent with a manager ticket naming both', async () => {
    const reply = await get({ material: peer, ticket: ticket({ holder: PEER, targets: [agent.address], exp: Date.now() + 60_000 }) });
    expect('bytes' in reply && reply.bytes.equals(object)).toBe(true);
  });

  it("hands the object to a receiver's callback from 'data' events, whole and in order, holding back while the callback's promise is pending; an altered object still ends with DATA_LOSS", async () => {
    const pieces: Buffer[] = [];
    let held = 0;
    await planeReceive(agent.address, { op: 'get', root, key: KEY }, (data) => {
      pieces.push(Buffer.from(data));
      // Every 8th piece the receiver is "writing": nothing may arrive until it is done.
      if (pieces.length % 8 !== 0) return undefined;
      held++;
      const count = pieces.length;
      return new Promise<void>((resolve) => setTimeout(() => (expect(pieces.length).toBe(count), resolve()), 5));
    }, { at, material: manager, ticket: undefined }).done;
    expect(Buffer.concat(pieces).equals(object)).toBe(true);
    expect(held).toBeGreaterThan(0);
    const file = path.join(root, KEY);
    const altered = Buffer.from(object);
    altered[2_000_000] ^= 0x01;
    writeFileSync(file, altered);
    try {
      const err = await planeReceive(agent.address, { op: 'get', root, key: KEY }, () => undefined, { at, material: manager, ticket: undefined }).done.catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AgentCallError);
      expect((err as AgentCallError).code).toBe(grpc.status.DATA_LOSS);
    } finally {
      writeFileSync(file, object);
    }
    const stopped = planeReceive(agent.address, { op: 'get', root, key: KEY }, () => undefined, { at, material: manager, ticket: undefined });
    stopped.stop();
    await expect(stopped.done).rejects.toThrow();
  });

  it('ends the transfer of an object altered on disk with DATA_LOSS, and of a missing one with NOT_FOUND', async () => {
    const file = path.join(root, KEY);
    const altered = Buffer.from(object);
    altered[1_000_000] ^= 0x01;
    writeFileSync(file, altered);
    try {
      const bad = refusal(await get({ material: manager, ticket: undefined }));
      expect(bad.code).toBe(grpc.status.DATA_LOSS);
      expect(bad.message).toMatch(/is corrupt/);
    } finally {
      writeFileSync(file, object);
    }
    const missing: Error[] = [];
    try {
      for await (const _ of planeStream(agent.address, { op: 'get', root, key: 'cluster_1/none' }, { at, material: manager, ticket: undefined })) void _;
    } catch (err) {
      missing.push(err as Error);
    }
    expect(missing[0]).toBeInstanceOf(AgentCallError);
    expect((missing[0] as AgentCallError).code).toBe(grpc.status.NOT_FOUND);
  });

  it('a plane that does not listen is an unreachable agent, not a short transfer', async () => {
    const closed = await get({ material: manager, ticket: undefined }).then(() =>
      (async () => {
        try {
          for await (const _ of planeStream('127.0.0.1:1', { op: 'get', root, key: KEY }, { at: { host: HOST, port: 1 }, material: manager, ticket: undefined })) void _;
          return undefined;
        } catch (err) {
          return err;
        }
      })(),
    );
    expect(closed).toBeInstanceOf(AgentUnreachableError);
  });
});
