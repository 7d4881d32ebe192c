// A call that times out while its agent's connection is still being set up keeps that
// connection: the pool does not throw the half-done handshake away and start a new one
// (which, for a leader's first rounds over 1,000 hosts, made every round time out on fresh
// handshakes again). An agent whose connection failed is still reconnected afresh.

import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentPool, isAgentUnreachable } from '@kcm/agent-api';

describe('agent pool: a call timing out during its connection setup', () => {
  let server: net.Server;
  let port = 0;
  const sockets: net.Socket[] = [];
  let accepted = 0;

  beforeAll(async () => {
    // Accepts TCP and never says a word: the HTTP/2 (and TLS) setup never completes.
    server = net.createServer((socket) => {
      accepted++;
      sockets.push(socket);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });

  afterAll(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });

  it('keeps the connection under way for the next call instead of opening another', async () => {
    const pool = new AgentPool(port);
    try {
      for (let i = 0; i < 3; i++) {
        const err = await pool.mariadbHa('127.0.0.1').replicationStatus(5000, 0, 150).catch((e: unknown) => e);
        expect(isAgentUnreachable(err)).toBe(true);
      }
      expect(accepted).toBe(1);
    } finally {
      pool.close();
    }
  });
});
