// The engine clients of EngineAgents: one per host, replaced once a call finds its agent
// unreachable, so a restarted agent is reached on the next call instead of after gRPC's
// reconnect backoff (what made a delete_cluster right after an agent restart fail).

import { describe, expect, it } from 'vitest';
import { AgentUnreachableError } from '@kcm/agent';
import { EngineClientCache } from '../../src/jobs/engine-client-cache';

class FakeClient {
  closed = false;
  agentUp = false;
  private pending: (() => void)[] = [];
  constructor(readonly serial: number) {}
  call(): Promise<string> {
    return this.agentUp ? Promise.resolve(`reply from client ${this.serial}`) : Promise.reject(new AgentUnreachableError('10.0.0.1:58100', new Error('ECONNREFUSED')));
  }
  slowCall(): Promise<string> {
    return new Promise((resolve) => this.pending.push(() => resolve('slow reply')));
  }
  finishSlowCalls(): void {
    for (const done of this.pending.splice(0)) done();
  }
  close(): void {
    this.closed = true;
  }
}

describe('engine client cache', () => {
  it('keeps one client per host while its agent answers', async () => {
    let made = 0;
    const cache = new EngineClientCache(() => Object.assign(new FakeClient(++made), { agentUp: true }));
    expect(await cache.get('10.0.0.1').call()).toBe('reply from client 1');
    expect(await cache.get('10.0.0.1').call()).toBe('reply from client 1');
    expect(made).toBe(1);
  });

  it('a client that found its agent unreachable is replaced, and closed once its calls in flight settle', async () => {
    const made: FakeClient[] = [];
    const cache = new EngineClientCache(() => {
      const c = new FakeClient(made.length + 1);
      made.push(c);
      return c;
    });
    const slow = cache.get('10.0.0.1').slowCall();
    await expect(cache.get('10.0.0.1').call()).rejects.toBeInstanceOf(AgentUnreachableError);
    expect(made[0].closed).toBe(false); // the slow call still runs through it
    made[0].finishSlowCalls();
    expect(await slow).toBe('slow reply');
    expect(made[0].closed).toBe(true);

    // The agent is back: the next call goes through a fresh client and is answered at once.
    const next = cache.get('10.0.0.1');
    made[1].agentUp = true;
    expect(await next.call()).toBe('reply from client 2');
  });
});
