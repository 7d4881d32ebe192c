// Who may call an agent, over real mutual TLS: a manager-role certificate of the cluster CA
// only; no certificate, another CA's, or an agent-role one is refused. Another agent reaches
// only the data-plane methods, and only with a manager's transfer ticket naming it and this agent.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentService, HostProbeAgentService, MariaDbAgentService, loadTlsMaterial, mintTicket, TICKET_KEY, TICKET_SIGNER_KEY, type TlsFiles, type TlsMaterial } from '@kcm/agent-api';
import { silentLogger } from '@kcm/common';
import { startAgent, type RunningAgent } from '../../src/server';
import { testCert, useTestTls } from '../../../../test/helpers/pki';

const HOST = '127.0.0.1';
const PEER = '127.0.0.2';

let agent: RunningAgent;
let tmp: string;
let manager: TlsMaterial;

beforeAll(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'kcm-tls-agent-'));
  useTestTls([HOST], 'agent');
  manager = loadTlsMaterial(testCert('manager', ['127.0.1.1']), 'manager');
  agent = await startAgent({ hostaddr: HOST, port: 0, logger: silentLogger(), stateDir: path.join(tmp, 'state') });
});

afterAll(async () => {
  await agent?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

function credentialsOf(files: TlsFiles | undefined): grpc.ChannelCredentials {
  const ca = readFileSync(testCert('agent', [HOST]).ca);
  if (!files) return grpc.credentials.createSsl(ca);
  return grpc.credentials.createSsl(ca, readFileSync(files.key), readFileSync(files.cert));
}

function call(service: grpc.ServiceClientConstructor, method: string, request: object, creds: grpc.ChannelCredentials, md = new grpc.Metadata()): Promise<{ code: grpc.status; details: string }> {
  const client = new service(agent.address, creds);
  const fn = (client as unknown as Record<string, Function>)[method]!.bind(client);
  return new Promise((resolve) => {
    fn(request, md, { deadline: Date.now() + 5000 }, (err: grpc.ServiceError | null) => {
      client.close();
      resolve(err ? { code: err.code, details: err.details } : { code: grpc.status.OK, details: '' });
    });
  });
}

const health = (files: TlsFiles | undefined) => call(AgentService, 'Health', {}, credentialsOf(files));

function ticketMetadata(payload: { holder: string; targets: string[]; exp: number }, signer = manager): grpc.Metadata {
  const { ticket, signer: der } = mintTicket(signer, { v: 1, ...payload });
  const md = new grpc.Metadata();
  md.set(TICKET_KEY, ticket);
  md.set(TICKET_SIGNER_KEY, der);
  return md;
}

const probe = (md?: grpc.Metadata) => call(MariaDbAgentService, 'Probe', { port: 1 }, credentialsOf(testCert('agent', [PEER])), md);

describe('an agent over mutual TLS', () => {
  it('answers a manager-role certificate of the cluster CA', async () => {
    expect(await health(testCert('manager', ['127.0.1.1']))).toEqual({ code: grpc.status.OK, details: '' });
  });

  it('refuses a caller without a client certificate', async () => {
    expect((await health(undefined)).code).not.toBe(grpc.status.OK);
  });

  it('refuses a manager-role certificate of another CA', async () => {
    expect((await health(testCert('manager', ['127.0.1.1'], 'other'))).code).not.toBe(grpc.status.OK);
  });

  it('refuses an agent-role certificate of the cluster CA on a command', async () => {
    const reply = await health(testCert('agent', [PEER]));
    expect(reply.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(reply.details).toContain('only a manager certificate');
  });

  it('refuses another agent a data-plane call without a ticket, or with a ticket for another holder, agent, signer or time', async () => {
    const exp = Date.now() + 60_000;
    expect((await probe()).code).toBe(grpc.status.PERMISSION_DENIED);
    expect((await probe(ticketMetadata({ holder: '127.0.0.3', targets: [agent.address], exp }))).details).toContain('issued to 127.0.0.3');
    expect((await probe(ticketMetadata({ holder: PEER, targets: ['127.0.0.1:1'], exp }))).details).toContain('does not name this agent');
    expect((await probe(ticketMetadata({ holder: PEER, targets: [agent.address], exp: Date.now() - 1 }))).details).toContain('expired');
    const agentSigned = loadTlsMaterial(testCert('agent', [PEER]), 'agent');
    expect((await probe(ticketMetadata({ holder: PEER, targets: [agent.address], exp }, agentSigned))).details).toContain('not signed by a manager');
  });

  it('lets another agent make a data-plane call with a manager ticket naming both, and nothing else', async () => {
    const md = ticketMetadata({ holder: PEER, targets: [agent.address], exp: Date.now() + 60_000 });
    // Past the guard: the agent itself answers (no instance on port 1).
    expect((await probe(md)).code).not.toBe(grpc.status.PERMISSION_DENIED);
    const command = await call(AgentService, 'Health', {}, credentialsOf(testCert('agent', [PEER])), md);
    expect(command.code).toBe(grpc.status.PERMISSION_DENIED);
  });

  it('serves ProbeHost (every instance of the host in one call) to a manager only, even against a ticket', async () => {
    const request = { mariadb_ports: [1], postgres_ports: [] };
    expect(await call(HostProbeAgentService, 'ProbeHost', request, credentialsOf(testCert('manager', ['127.0.1.1'])))).toEqual({ code: grpc.status.OK, details: '' });
    const md = ticketMetadata({ holder: PEER, targets: [agent.address], exp: Date.now() + 60_000 });
    const byAgent = await call(HostProbeAgentService, 'ProbeHost', request, credentialsOf(testCert('agent', [PEER])), md);
    expect(byAgent.code).toBe(grpc.status.PERMISSION_DENIED);
    expect((await call(HostProbeAgentService, 'ProbeHost', request, credentialsOf(undefined))).code).not.toBe(grpc.status.OK);
  });
});
