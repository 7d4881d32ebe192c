// The protocol exchange on real gRPC calls (protocol-version.ts): every call and reply states
// `kcm-protocol`; a peer of an unknown protocol is refused as FAILED_PRECONDITION with the
// skew rule's words, logged once per peer; a peer stating none (the previous build) is 1.

import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AgentClient, AgentService, peerProtocols, protocolServerGuard, resetProtocolMemory, type HealthReply } from '@kcm/agent-api';

const health: HealthReply = { hostaddr: '127.9.8.1', version: 'test', uptime_ms: 1, pid: 1 };
const warnings: string[] = [];

async function serve(host: string, interceptors: grpc.ServerInterceptor[], healthHandler: grpc.handleUnaryCall<unknown, HealthReply>): Promise<{ address: string; server: grpc.Server }> {
  const server = new grpc.Server({ interceptors });
  server.addService(AgentService.service, { Health: healthHandler });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync(`${host}:0`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  return { address: `${host}:${port}`, server };
}

/** A client of another build: states `protocol` (none at all: undefined, as the previous build). */
function callAs(address: string, protocol: string | undefined): Promise<{ reply?: HealthReply; err?: grpc.ServiceError; serverProtocol?: string }> {
  const client = new AgentService(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & { Health: Function };
  const md = new grpc.Metadata();
  if (protocol !== undefined) md.set('kcm-protocol', protocol);
  return new Promise((resolve) => {
    let serverProtocol: string | undefined;
    const call = client.Health({}, md, (err: grpc.ServiceError | null, reply: HealthReply) => {
      client.close();
      resolve(err ? { err, serverProtocol: serverProtocol ?? String(err.metadata.get('kcm-protocol')[0]) } : { reply, serverProtocol });
    }) as grpc.ClientUnaryCall;
    call.on('metadata', (m: grpc.Metadata) => (serverProtocol = String(m.get('kcm-protocol')[0])));
  });
}

describe('kcm protocol exchange on gRPC', () => {
  let agent: { address: string; server: grpc.Server };
  beforeAll(async () => {
    const guard = protocolServerGuard({ self: () => ({ kind: 'agent', name: '127.9.8.1' }), peerKind: 'manager', warn: (_f, msg) => warnings.push(msg) });
    agent = await serve('127.9.8.1', [guard], (_call, cb) => cb(null, health));
  });
  afterAll(() => agent.server.forceShutdown());
  beforeEach(() => {
    resetProtocolMemory();
    warnings.length = 0;
  });

  it('a call of this build is served and learns the agent is protocol 2', async () => {
    const client = new AgentClient(agent.address, 2000);
    await expect(client.health()).resolves.toMatchObject({ hostaddr: '127.9.8.1' });
    client.close();
    expect(peerProtocols().get(agent.address)).toMatchObject({ protocol: 2, accepted: true });
  });

  it('a caller of the previous build (no kcm-protocol) and one stating 1 are served; the reply states 2', async () => {
    for (const stated of [undefined, '1', '2']) {
      const { reply, serverProtocol } = await callAs(agent.address, stated);
      expect(reply).toMatchObject({ hostaddr: '127.9.8.1' });
      expect(serverProtocol).toBe('2');
    }
    expect(warnings).toEqual([]);
  });

  it('a caller stating 0, 3 or garbage is refused with FAILED_PRECONDITION naming both versions, logged once per peer', async () => {
    for (let i = 0; i < 3; i++) {
      const { err, serverProtocol } = await callAs(agent.address, '3');
      expect(err?.code).toBe(grpc.status.FAILED_PRECONDITION);
      expect(err?.details).toMatch(/^manager 127\.0\.0\.1 speaks kcm protocol 3; this agent 127\.9\.8\.1 \(kcm [0-9.]+\) accepts kcm protocol 1-2: upgrade this agent first/);
      expect(serverProtocol).toBe('2');
    }
    expect((await callAs(agent.address, '0')).err?.details).toMatch(/speaks kcm protocol 0; .*upgrade the manager 127\.0\.0\.1 first/);
    expect((await callAs(agent.address, 'v2')).err?.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(warnings).toHaveLength(3); // 3 once, 0 once, v2 once
  });

  it("this build's client refuses an agent stating protocol 3, and one of the previous build (stating none) is protocol 1", async () => {
    const newer = await serve('127.9.8.2', [], (call, cb) => {
      const md = new grpc.Metadata();
      md.set('kcm-protocol', '3');
      call.sendMetadata(md);
      cb(null, health);
    });
    const older = await serve('127.9.8.3', [], (_call, cb) => cb(null, health));
    try {
      const toNewer = new AgentClient(newer.address, 2000);
      await expect(toNewer.health()).rejects.toMatchObject({ code: grpc.status.FAILED_PRECONDITION, message: expect.stringMatching(/agent 127\.9\.8\.2:\d+ speaks kcm protocol 3; this manager \(kcm [0-9.]+\) accepts kcm protocol 1-2: upgrade this manager first/) });
      await expect(toNewer.health()).rejects.toMatchObject({ code: grpc.status.FAILED_PRECONDITION });
      toNewer.close();
      expect(peerProtocols().get(newer.address)).toMatchObject({ protocol: 3, accepted: false });
      const toOlder = new AgentClient(older.address, 2000);
      await expect(toOlder.health()).resolves.toMatchObject({ hostaddr: '127.9.8.1' });
      toOlder.close();
      expect(peerProtocols().get(older.address)).toMatchObject({ protocol: 1, kcmVersion: '', accepted: true });
    } finally {
      newer.server.forceShutdown();
      older.server.forceShutdown();
    }
  });
});
