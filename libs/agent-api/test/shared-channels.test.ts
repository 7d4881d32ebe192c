// Every client of one agent shares one gRPC channel (one connection, one TLS handshake):
// the manager's per-kind clients of a host no longer open a connection each.

import net from 'node:net';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { AgentClient, AgentUnreachableError, HostProbeAgentClient, MariaDbAgentClient, renewChannel, sharedChannelCount } from '@kcm/agent-api';

describe('shared agent channels', () => {
  it('clients of different services of one agent share a channel, which closes with the last of them', () => {
    const base = sharedChannelCount();
    const agent = new AgentClient('127.9.9.1:1');
    const probes = new HostProbeAgentClient('127.9.9.1:1');
    const mariadb = new MariaDbAgentClient('127.9.9.1:1');
    const other = new AgentClient('127.9.9.2:1');
    expect(sharedChannelCount()).toBe(base + 2);
    agent.close();
    agent.close(); // a second close of one client does not end another's lease
    probes.close();
    expect(sharedChannelCount()).toBe(base + 2);
    mariadb.close();
    expect(sharedChannelCount()).toBe(base + 1);
    other.close();
    expect(sharedChannelCount()).toBe(base);
  });

  it('after renewChannel the next client opens a new channel; the old one lives until its clients close', () => {
    const base = sharedChannelCount();
    const before = new AgentClient('127.9.9.3:1');
    renewChannel('127.9.9.3:1');
    expect(sharedChannelCount()).toBe(base);
    const after = new AgentClient('127.9.9.3:1');
    expect(sharedChannelCount()).toBe(base + 1);
    before.close(); // closes only the renewed-away channel
    expect(sharedChannelCount()).toBe(base + 1);
    after.close();
    expect(sharedChannelCount()).toBe(base);
  });

  it('a call on a channel backing off after a failed connect goes over a fresh channel, which reaches an agent that came back', async () => {
    // A port nobody listens on yet: the first call is refused and the channel backs off (grpc: 1 s and growing).
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.9.9.4', () => resolve()));
    const { port } = probe.address() as AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    const address = `127.9.9.4:${port}`;
    const base = sharedChannelCount();
    const kept = new AgentClient(address, 1000); // like a pooled client kept while its agent was down
    await expect(kept.health()).rejects.toBeInstanceOf(AgentUnreachableError);
    // A gRPC server now listens there (the agent restarted; it serves no method, so a call that reaches it is UNIMPLEMENTED).
    const server = new grpc.Server();
    await new Promise<void>((resolve, reject) => server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
    try {
      // Well within the backoff, the kept client's next call reaches it, and so does a new client's, over one channel.
      await expect(kept.health()).rejects.toMatchObject({ code: grpc.status.UNIMPLEMENTED });
      const fresh = new AgentClient(address, 1000);
      await expect(fresh.health()).rejects.toMatchObject({ code: grpc.status.UNIMPLEMENTED });
      expect(sharedChannelCount()).toBe(base + 1);
      kept.close();
      fresh.close();
      expect(sharedChannelCount()).toBe(base);
    } finally {
      server.forceShutdown();
    }
  });
});
