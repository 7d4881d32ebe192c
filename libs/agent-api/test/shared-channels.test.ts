// Every client of one agent shares one gRPC channel (one connection, one TLS handshake):
// the manager's per-kind clients of a host no longer open a connection each.

import { describe, expect, it } from 'vitest';
import { AgentClient, HostProbeAgentClient, MariaDbAgentClient, renewChannel, sharedChannelCount } from '@kcm/agent-api';

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
});
