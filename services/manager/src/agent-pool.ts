// gRPC clients of the hosts' agents, shared by jobs, queries and the health monitor (a
// client per call would open a connection per call), and bounded: a gRPC channel keeps
// reconnecting on its own with backoff for as long as it is open, so a client left open
// for every host ever named (thousands of never-served hosts under load) costs the leader
// CPU forever. A client is closed when
//  - a call through it finds the agent unreachable: the next call opens a fresh channel,
//    which tries to connect once, instead of grpc's backoff loop retrying in the background
//    (a fresh channel also sees an agent that came back at once, not after the backoff);
//  - it has not been used for `idleCloseMs`;
//  - the pool holds more than `maxClients`: the least recently used ones go first.
// Never while a call is in flight through it: calls are made inside withAgent, which counts them.
//
// Before opening a client for a host it has none for, the pool tries a plain TCP connect
// to the agent's port: a host where nobody listens fails at once as unreachable, without
// a gRPC channel. Channels are not free to throw away: grpc-js keeps every target it ever
// saw in a process-wide subchannel pool and walks all of them on each channel close, so a
// channel opened and closed per unreachable host made each close cost O(hosts ever seen)
// (bench/emit names a new unserved host per job: ~1 ms per close after a few thousand).

import net from 'node:net';
import { AgentClient, AgentUnreachableError } from '@kcm/agent';

/** Runs `use` with the agent of a host; the client must not be kept after `use` settles. */
export type WithAgent = <T>(hostaddr: string, use: (agent: AgentClient) => Promise<T>) => Promise<T>;

export interface AgentPoolOptions {
  /** Deadline of every call (ms). */
  deadlineMs?: number;
  /** Clients kept open at most (idle ones beyond it are closed, least recently used first). */
  maxClients?: number;
  /** A client unused this long is closed (ms). */
  idleCloseMs?: number;
  now?: () => number;
}

interface PooledClient {
  client: AgentClient;
  inFlight: number;
  lastUsedMs: number;
  /** Out of the pool (unreachable agent): closed as soon as its last call settles. */
  retired: boolean;
}

export class AgentPool {
  /** In least-recently-used-first order: a use moves its entry to the end. */
  private readonly clients = new Map<string, PooledClient>();
  private readonly deadlineMs: number;
  private readonly maxClients: number;
  private readonly idleCloseMs: number;
  private readonly now: () => number;

  constructor(private readonly agentPort: number, opts: AgentPoolOptions = {}) {
    this.deadlineMs = opts.deadlineMs ?? 5000;
    this.maxClients = opts.maxClients ?? 256;
    this.idleCloseMs = opts.idleCloseMs ?? 60_000;
    this.now = opts.now ?? Date.now;
  }

  /** Open clients (for tests and metrics). */
  get size(): number {
    return this.clients.size;
  }

  /** The agent of a host, at `<hostaddr>:<agent_port>` (agent_port is manager configuration, the same on every host). */
  readonly withAgent: WithAgent = async (hostaddr, use) => {
    if (!this.clients.has(hostaddr)) await this.probe(hostaddr);
    const entry = this.checkOut(hostaddr);
    try {
      return await use(entry.client);
    } catch (err) {
      if (err instanceof AgentUnreachableError) this.retire(hostaddr, entry);
      throw err;
    } finally {
      entry.inFlight--;
      entry.lastUsedMs = this.now();
      if (entry.retired && entry.inFlight === 0) entry.client.close();
      this.closeExcess();
    }
  };

  close(): void {
    for (const entry of this.clients.values()) entry.client.close();
    this.clients.clear();
  }

  /** Resolves once a TCP connection to the host's agent port opens; AgentUnreachableError otherwise (within the call deadline). */
  private probe(hostaddr: string): Promise<void> {
    const address = this.addressOf(hostaddr);
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: hostaddr, port: this.agentPort });
      const settle = (err: Error | null) => {
        clearTimeout(timer);
        socket.destroy();
        if (err) reject(new AgentUnreachableError(address, err));
        else resolve();
      };
      const timer = setTimeout(() => settle(new Error(`no TCP connection within ${this.deadlineMs} ms`)), this.deadlineMs);
      socket.once('connect', () => settle(null));
      socket.once('error', settle);
    });
  }

  /** `<hostaddr>:<agent_port>`, an IPv6 address in brackets. */
  private addressOf(hostaddr: string): string {
    return `${hostaddr.includes(':') ? `[${hostaddr}]` : hostaddr}:${this.agentPort}`;
  }

  private checkOut(hostaddr: string): PooledClient {
    let entry = this.clients.get(hostaddr);
    if (entry) {
      this.clients.delete(hostaddr); // re-inserted below: now the most recently used
      entry.lastUsedMs = this.now();
    } else {
      entry = { client: new AgentClient(this.addressOf(hostaddr), this.deadlineMs), inFlight: 0, lastUsedMs: this.now(), retired: false };
    }
    this.clients.set(hostaddr, entry);
    entry.inFlight++;
    return entry;
  }

  private retire(hostaddr: string, entry: PooledClient): void {
    if (entry.retired) return;
    entry.retired = true;
    if (this.clients.get(hostaddr) === entry) this.clients.delete(hostaddr);
  }

  /** Closes idle clients from the least recently used end: too many, or unused too long. */
  private closeExcess(): void {
    const idleBefore = this.now() - this.idleCloseMs;
    for (const [hostaddr, entry] of this.clients) {
      const tooMany = this.clients.size > this.maxClients;
      if (!tooMany && entry.lastUsedMs > idleBefore) break; // the rest were used more recently
      if (entry.inFlight > 0) continue;
      this.clients.delete(hostaddr);
      entry.client.close();
    }
  }
}
