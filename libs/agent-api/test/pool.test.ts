import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AgentPool, AgentUnreachableError, type AgentApi } from '@kcm/agent-api';

// Stand-in agents: the pool only needs a TCP listener to open a client (no call is made).
const HOSTS = ['127.9.0.1', '127.9.0.2', '127.9.0.3'];
const NOBODY = '127.9.0.4';
const listeners: net.Server[] = [];
let port = 0;

beforeAll(async () => {
  for (const host of HOSTS) {
    const server = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, () => resolve()));
    port = (server.address() as AddressInfo).port;
    listeners.push(server);
  }
});
afterAll(async () => {
  await Promise.all(listeners.map((s) => new Promise((resolve) => s.close(resolve))));
});

/** The client the pool hands out for a host, with its close() watched. */
async function clientOf(pool: AgentPool, host: string): Promise<AgentApi> {
  return pool.withAgent(host, async (agent) => agent);
}

function watchClose(client: AgentApi) {
  return vi.spyOn(client, 'close');
}

describe('AgentPool', () => {
  it('reuses one client per host across calls', async () => {
    const pool = new AgentPool(port);
    const first = await clientOf(pool, '127.9.0.1');
    expect(await clientOf(pool, '127.9.0.1')).toBe(first);
    expect(await clientOf(pool, '127.9.0.2')).not.toBe(first);
    expect(pool.size).toBe(2);
    pool.close();
  });

  it('closes the client of an unreachable agent, so the next call opens a fresh channel', async () => {
    const pool = new AgentPool(port);
    const before = await clientOf(pool, '127.9.0.1');
    const closed = watchClose(before);
    await expect(
      pool.withAgent('127.9.0.1', async () => {
        throw new AgentUnreachableError('127.9.0.1:1', new Error('connection refused'));
      }),
    ).rejects.toBeInstanceOf(AgentUnreachableError);
    expect(closed).toHaveBeenCalledOnce();
    expect(pool.size).toBe(0);
    expect(await clientOf(pool, '127.9.0.1')).not.toBe(before);
    pool.close();
  });

  it('fails a host where nobody listens as unreachable without opening a client for it', async () => {
    const pool = new AgentPool(port, { deadlineMs: 2000 });
    let used = false;
    await expect(
      pool.withAgent(NOBODY, async () => {
        used = true;
      }),
    ).rejects.toBeInstanceOf(AgentUnreachableError);
    expect(used).toBe(false);
    expect(pool.size).toBe(0);
    pool.close();
  });

  it('keeps the client when a call fails for another reason than reachability', async () => {
    const pool = new AgentPool(port);
    const before = await clientOf(pool, '127.9.0.1');
    await expect(pool.withAgent('127.9.0.1', async () => Promise.reject(new Error('bad request')))).rejects.toThrow('bad request');
    expect(await clientOf(pool, '127.9.0.1')).toBe(before);
    pool.close();
  });

  it('closes the least recently used clients beyond maxClients', async () => {
    const pool = new AgentPool(port, { maxClients: 2 });
    const a = await clientOf(pool, '127.9.0.1');
    const closedA = watchClose(a);
    const b = await clientOf(pool, '127.9.0.2');
    await clientOf(pool, '127.9.0.1'); // a is now more recent than b
    const closedB = watchClose(b);
    await clientOf(pool, '127.9.0.3');
    expect(pool.size).toBe(2);
    expect(closedB).toHaveBeenCalledOnce();
    expect(closedA).not.toHaveBeenCalled();
    pool.close();
  });

  it('never closes a client while a call through it is in flight; idle ones go instead', async () => {
    const pool = new AgentPool(port, { maxClients: 1 });
    let release!: () => void;
    let inFlight!: AgentApi;
    let callStarted!: () => void;
    const started = new Promise<void>((resolve) => (callStarted = resolve));
    const slowCall = pool.withAgent('127.9.0.1', async (agent) => {
      inFlight = agent;
      callStarted();
      await new Promise<void>((resolve) => (release = resolve));
    });
    await started;
    const closedInFlight = watchClose(inFlight);
    const other = await clientOf(pool, '127.9.0.2');
    // Over the cap with the least recently used client busy: the idle one is closed.
    expect(closedInFlight).not.toHaveBeenCalled();
    expect(pool.size).toBe(1);
    expect(await clientOf(pool, '127.9.0.2')).not.toBe(other);
    release();
    await slowCall;
    expect(closedInFlight).not.toHaveBeenCalled();
    // Settled: the next client over the cap closes it.
    await clientOf(pool, '127.9.0.3');
    expect(closedInFlight).toHaveBeenCalledOnce();
    expect(pool.size).toBe(1);
    pool.close();
  });

  it('closes a client left unused for idleCloseMs', async () => {
    let now = 1_000;
    const pool = new AgentPool(port, { idleCloseMs: 60_000, now: () => now });
    const idle = await clientOf(pool, '127.9.0.1');
    const closed = watchClose(idle);
    now += 30_000;
    await clientOf(pool, '127.9.0.2');
    expect(closed).not.toHaveBeenCalled();
    now += 30_001;
    await clientOf(pool, '127.9.0.2');
    expect(closed).toHaveBeenCalledOnce();
    expect(pool.size).toBe(1);
    pool.close();
  });
});
