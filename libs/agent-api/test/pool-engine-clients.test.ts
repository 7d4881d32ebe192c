// The engine clients of the pool (agents.mariadb(host) ...): one per host and engine,
// replaced once a call finds its agent unreachable, so a restarted agent is reached on the
// next call instead of after gRPC's reconnect backoff (what made a delete_cluster right
// after an agent restart fail); bounded like the host-level clients.

import { describe, expect, it } from 'vitest';
import { AgentPool, AgentUnreachableError, type AgentPoolOptions, type MariaDbAgentClient } from '@kcm/agent-api';

class FakeClient {
  closed = false;
  private pending: (() => void)[] = [];
  constructor(readonly serial: number, readonly agentUp: () => boolean) {}
  probe(): Promise<string> {
    return this.agentUp() ? Promise.resolve(`reply from client ${this.serial}`) : Promise.reject(new AgentUnreachableError('10.0.0.1:58100', new Error('ECONNREFUSED')));
  }
  info(): Promise<string> {
    return Promise.resolve('info');
  }
  variables(): Promise<string> {
    return new Promise((resolve) => this.pending.push(() => resolve('slow reply')));
  }
  finishSlowCalls(): void {
    for (const done of this.pending.splice(0)) done();
  }
  close(): void {
    this.closed = true;
  }
}

function fakePool(agentUp: () => boolean, opts: AgentPoolOptions = {}) {
  const made: FakeClient[] = [];
  const makeClient = (() => {
    const c = new FakeClient(made.length + 1, agentUp);
    made.push(c);
    return c;
  }) as unknown as NonNullable<AgentPoolOptions['makeClient']>;
  return { pool: new AgentPool(58100, { ...opts, makeClient }), made };
}

/** The fake's replies are strings; the view is typed as the real client. */
const reply = (p: Promise<unknown>) => p as Promise<unknown> as Promise<string>;

describe('the pool engine clients', () => {
  it('keeps one client per host and engine while its agent answers', async () => {
    const { pool, made } = fakePool(() => true);
    const kept: MariaDbAgentClient = pool.mariadb('10.0.0.1');
    expect(await reply(kept.probe(1))).toBe('reply from client 1');
    expect(await reply(pool.mariadb('10.0.0.1').probe(1))).toBe('reply from client 1');
    expect(await reply(pool.postgres('10.0.0.1').probe(1))).toBe('reply from client 2');
    expect(made).toHaveLength(2);
    expect(pool.mariadb('10.0.0.1').address).toBe('10.0.0.1:58100');
    pool.close();
  });

  it('a client that found its agent unreachable is replaced, and closed once its calls in flight settle', async () => {
    let up = false;
    const { pool, made } = fakePool(() => up);
    const agent = pool.mariadb('10.0.0.1');
    const slow = reply(agent.variables(1));
    await expect(agent.probe(1)).rejects.toBeInstanceOf(AgentUnreachableError);
    expect(made[0].closed).toBe(false); // the slow call still runs through it
    made[0].finishSlowCalls();
    expect(await slow).toBe('slow reply');
    expect(made[0].closed).toBe(true);

    // The agent is back: the next call, even through the same view, goes through a fresh client.
    up = true;
    expect(await reply(agent.probe(1))).toBe('reply from client 2');
    pool.close();
  });

  it('is bounded: the least recently used idle engine clients beyond maxClients are closed', async () => {
    const { pool, made } = fakePool(() => true, { maxClients: 2 });
    for (const host of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) await pool.cgroup(host).info();
    expect(pool.size).toBe(2);
    expect(made.map((c) => c.closed)).toEqual([true, false, false]);
    pool.close();
  });
});
