// One engine client per host, dropped when a call finds its agent unreachable (the policy
// of agent-pool.ts, for the engine clients of EngineAgents).
//
// Why: a gRPC channel whose agent went away stays in TRANSIENT_FAILURE and retries on its
// own with a growing backoff; until a retry succeeds, every call through it fails at once
// with UNAVAILABLE. So after an agent restart, jobs (a delete_cluster, a rollback's
// removal) kept failing for up to the backoff although the agent answered a fresh
// connection. A client that saw the agent unreachable is taken out of the cache, so the
// next call opens a fresh channel, which connects at once; it is closed once the calls
// still in flight through it have settled.

import { AgentUnreachableError } from '@kcm/agent';

interface Entry<C> {
  client: C;
  view: C;
  inFlight: number;
  retired: boolean;
}

export class EngineClientCache<C extends { close(): void }> {
  private readonly entries = new Map<string, Entry<C>>();

  constructor(private readonly make: (key: string) => C) {}

  /** The client for `key`; only valid for calls made now (a retired one is replaced on the next get). */
  get(key: string): C {
    let entry = this.entries.get(key);
    if (!entry) {
      const created: Entry<C> = { client: this.make(key), view: undefined as unknown as C, inFlight: 0, retired: false };
      created.view = this.tracked(key, created);
      this.entries.set(key, (entry = created));
    }
    return entry.view;
  }

  closeAll(): void {
    for (const entry of this.entries.values()) entry.client.close();
    this.entries.clear();
  }

  /** The client, with every promise-returning method counted and watched for an unreachable agent. */
  private tracked(key: string, entry: Entry<C>): C {
    return new Proxy(entry.client, {
      get: (target, prop, receiver) => {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== 'function' || prop === 'close') return value;
        return (...args: unknown[]) => {
          const result = (value as (...a: unknown[]) => unknown).apply(target, args);
          if (!(result instanceof Promise)) return result;
          entry.inFlight++;
          return result.then(
            (reply) => (this.settled(entry), reply),
            (err: unknown) => {
              if (err instanceof AgentUnreachableError) this.retire(key, entry);
              this.settled(entry);
              throw err;
            },
          );
        };
      },
    });
  }

  private retire(key: string, entry: Entry<C>): void {
    entry.retired = true;
    if (this.entries.get(key) === entry) this.entries.delete(key);
  }

  private settled(entry: Entry<C>): void {
    entry.inFlight--;
    if (entry.retired && entry.inFlight === 0) entry.client.close();
  }
}
