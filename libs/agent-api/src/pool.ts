// The manager's gRPC clients of the hosts' agents, all in one bounded pool, shared by jobs,
// queries, the health monitor and the reconcilers (a client per call would open a
// connection per call). Bounded: a gRPC channel keeps reconnecting on its own with backoff
// for as long as it is open, so a client left open for every host ever named (thousands of
// never-served hosts under load) costs the leader CPU forever. A client is closed when
//  - a call through it finds the agent unreachable: the next call opens a fresh channel,
//    which tries to connect once, instead of grpc's backoff loop retrying in the background
//    (a fresh channel also sees an agent that came back at once, not after the backoff:
//    after an agent restart, a delete_cluster kept failing until grpc's retry came round);
//  - it has not been used for `idleCloseMs`;
//  - the pool holds more than `maxClients`: the least recently used ones go first.
// Never while a call is in flight through it: every call is counted while it runs.
//
// Before opening the host-level client (withAgent) for a host it has none for, the pool
// tries a plain TCP connect to the agent's port: a host where nobody listens fails at once
// as unreachable, without a gRPC channel (bench/emit names a new unserved host per job).

import net from 'node:net';
import { AgentClient } from './clients/agent-client';
import { CgroupAgentClient } from './clients/cgroup-client';
import { MariaDbAgentClient } from './clients/mariadb-client';
import { MariaDbHaAgentClient } from './clients/mariadb-ha-client';
import { PostgresAgentClient } from './clients/postgres-client';
import { MariaDbRestoreAgentClient } from './clients/mariadb-restore-client';
import { PasswordAgentClient } from './clients/password-client';
import { HostProbeAgentClient } from './clients/host-probe-client';
import { ShardDataAgentClient } from './clients/shard-data-client';
import { TableMoveAgentClient } from './clients/table-move-client';
import { RelationSwitchAgentClient } from './clients/relation-switch-client';
import { MariaDbTablesAgentClient } from './clients/mariadb-tables-client';
import { MariaDbLogicalAgentClient } from './clients/mariadb-logical-client';
import { CatalogDumpAgentClient } from './clients/storage-client';
import { ShardRoutingAgentClient } from './clients/shard-routing-client';
import { AgentUnreachableError, isAgentUnreachable } from './errors';
import { channelConnecting, renewChannel } from './shared-channels';

/**
 * The public face of a client class: what a caller uses and what a test's fake provides
 * (a class type with private fields cannot be satisfied by a plain object).
 */
export type ClientApi<C> = Pick<C, keyof C>;
export type AgentApi = ClientApi<AgentClient>;
export type MariaDbAgentApi = ClientApi<MariaDbAgentClient>;
export type PostgresAgentApi = ClientApi<PostgresAgentClient>;
export type CgroupAgentApi = ClientApi<CgroupAgentClient>;
export type MariaDbHaAgentApi = ClientApi<MariaDbHaAgentClient>;
export type MariaDbRestoreAgentApi = ClientApi<MariaDbRestoreAgentClient>;
export type PasswordAgentApi = ClientApi<PasswordAgentClient>;
export type HostProbeAgentApi = ClientApi<HostProbeAgentClient>;
export type ShardDataAgentApi = ClientApi<ShardDataAgentClient>;
export type TableMoveAgentApi = ClientApi<TableMoveAgentClient>;
export type RelationSwitchAgentApi = ClientApi<RelationSwitchAgentClient>;
export type MariaDbTablesAgentApi = ClientApi<MariaDbTablesAgentClient>;
export type MariaDbLogicalAgentApi = ClientApi<MariaDbLogicalAgentClient>;
export type CatalogDumpAgentApi = ClientApi<CatalogDumpAgentClient>;
export type ShardRoutingAgentApi = ClientApi<ShardRoutingAgentClient>;

/** Runs `use` with the agent of a host; the client must not be kept after `use` settles. */
export type WithAgent = <T>(hostaddr: string, use: (agent: AgentApi) => Promise<T>) => Promise<T>;

/**
 * What the manager uses to talk to agents. The engine clients (`mariadb(host)` ...) are
 * views: each call goes through the pool's current client for that host, so a view may be
 * kept and reused.
 */
export interface Agents {
  withAgent: WithAgent;
  mariadb(hostaddr: string): MariaDbAgentApi;
  postgres(hostaddr: string): PostgresAgentApi;
  /** A short-deadline postgres client for live-status probes: a dead host must not hold a reply. */
  postgresProbe(hostaddr: string): PostgresAgentApi;
  cgroup(hostaddr: string): CgroupAgentApi;
  /** Shard HA commands (status, promote, re-point, fence); short deadlines (see MariaDbHaAgentClient). */
  mariadbHa(hostaddr: string): MariaDbHaAgentApi;
  /** Binlog listing and point-in-time restore commands (MariaDbRestoreAgent). */
  mariadbRestore(hostaddr: string): MariaDbRestoreAgentApi;
  /** New passwords for a cluster's accounts on the host's instances (rotate_cluster_passwords). */
  passwords(hostaddr: string): PasswordAgentApi;
  /** Every named instance of the host measured in one call (live cluster status); short deadline. */
  hostProbe(hostaddr: string): HostProbeAgentApi;
  /** A table move's data work on a shard master's host, and sessions there for the manager's control statements. */
  shardData(hostaddr: string): ShardDataAgentApi;
  /** A table move's cut-over on a compute host: hold, re-point and release its foreign table. */
  tableMove(hostaddr: string): TableMoveAgentApi;
  /** Repartition's switch of a partitioned table's name on a compute host. */
  relationSwitch(hostaddr: string): RelationSwitchAgentApi;
  /** A shard master's tables: descriptions and row probes (repartition's rules), sizes and hits. */
  mariadbTables(hostaddr: string): MariaDbTablesAgentApi;
  /**
   * Logical dumps and loads of a shard master's tables (logical_backup, logical_restore): a
   * client of its own, not the pool's, since a dump's stream outlives the call that opened it
   * (the pool would count the client idle meanwhile). Close it when the operation ends.
   */
  mariadbLogical(hostaddr: string): MariaDbLogicalAgentApi;
  /** A compute host's PostgreSQL catalog, dumped by a backup and put back by a restore. */
  catalogDump(hostaddr: string): CatalogDumpAgentApi;
  /** Holding a shard on a compute host's instances while its master changes (docs/ride-through.md). */
  shardRouting(hostaddr: string): ShardRoutingAgentApi;
  /** Where the agent of `hostaddr` listens; agents pass it to each other (backup streams). */
  agentAddress(hostaddr: string): string;
  close(): void;
}

interface ClientKinds {
  agent: AgentClient;
  mariadb: MariaDbAgentClient;
  postgres: PostgresAgentClient;
  postgresProbe: PostgresAgentClient;
  cgroup: CgroupAgentClient;
  mariadbHa: MariaDbHaAgentClient;
  mariadbRestore: MariaDbRestoreAgentClient;
  passwords: PasswordAgentClient;
  hostProbe: HostProbeAgentClient;
  shardData: ShardDataAgentClient;
  tableMove: TableMoveAgentClient;
  relationSwitch: RelationSwitchAgentClient;
  mariadbTables: MariaDbTablesAgentClient;
  catalogDump: CatalogDumpAgentClient;
  shardRouting: ShardRoutingAgentClient;
}
type Kind = keyof ClientKinds;
type Closeable = { close(): void };

export interface AgentPoolOptions {
  /** Deadline of every call of the host-level client (ms). */
  deadlineMs?: number;
  /** Deadline of the engines' probes (mariadb probe and variables, postgresProbe) (ms). */
  probeDeadlineMs?: number;
  /** Clients kept open at most (idle ones beyond it are closed, least recently used first). */
  maxClients?: number;
  /** A client unused this long is closed (ms). */
  idleCloseMs?: number;
  now?: () => number;
  /** Builds a client (tests); defaults to the real gRPC clients. */
  makeClient?: <K extends Kind>(kind: K, address: string) => ClientKinds[K];
}

interface PooledClient {
  client: Closeable;
  inFlight: number;
  lastUsedMs: number;
  /** Out of the pool (unreachable agent): closed as soon as its last call settles. */
  retired: boolean;
}

export class AgentPool implements Agents {
  /** In least-recently-used-first order: a use moves its entry to the end. Keyed `<kind> <hostaddr>`. */
  private readonly clients = new Map<string, PooledClient>();
  private readonly deadlineMs: number;
  private readonly probeDeadlineMs: number;
  private readonly maxClients: number;
  private readonly idleCloseMs: number;
  private readonly now: () => number;
  private readonly makeClient: <K extends Kind>(kind: K, address: string) => ClientKinds[K];

  constructor(private readonly agentPort: number, opts: AgentPoolOptions = {}) {
    this.deadlineMs = opts.deadlineMs ?? 5000;
    this.probeDeadlineMs = opts.probeDeadlineMs ?? 4000;
    // 2,000 hosts' worth of the kinds a leader uses on each every few seconds (host-level for
    // the health monitor, mariadbHa for the shard failure detector, mariadb, postgres). At
    // 1,024, a 1,000-host fleet's health and shard probes (2,000 clients) would evict each
    // other's clients every round, and each eviction costs a TLS handshake the next round.
    this.maxClients = opts.maxClients ?? 8192;
    this.idleCloseMs = opts.idleCloseMs ?? 60_000;
    this.now = opts.now ?? Date.now;
    this.makeClient = opts.makeClient ?? ((kind, address) => this.realClient(kind, address));
  }

  /** Open clients (for tests and metrics). */
  get size(): number {
    return this.clients.size;
  }

  /** The agent of a host, at `<hostaddr>:<agent_port>`. */
  readonly withAgent: WithAgent = async (hostaddr, use) => {
    if (!this.clients.has(keyOf('agent', hostaddr))) await this.probe(hostaddr);
    return this.using('agent', hostaddr, use);
  };

  mariadb(hostaddr: string): MariaDbAgentClient {
    return this.view('mariadb', hostaddr);
  }

  postgres(hostaddr: string): PostgresAgentClient {
    return this.view('postgres', hostaddr);
  }

  postgresProbe(hostaddr: string): PostgresAgentClient {
    return this.view('postgresProbe', hostaddr);
  }

  cgroup(hostaddr: string): CgroupAgentClient {
    return this.view('cgroup', hostaddr);
  }

  mariadbHa(hostaddr: string): MariaDbHaAgentClient {
    return this.view('mariadbHa', hostaddr);
  }

  mariadbRestore(hostaddr: string): MariaDbRestoreAgentClient {
    return this.view('mariadbRestore', hostaddr);
  }

  passwords(hostaddr: string): PasswordAgentClient {
    return this.view('passwords', hostaddr);
  }

  hostProbe(hostaddr: string): HostProbeAgentClient {
    return this.view('hostProbe', hostaddr);
  }

  shardData(hostaddr: string): ShardDataAgentClient {
    return this.view('shardData', hostaddr);
  }

  tableMove(hostaddr: string): TableMoveAgentClient {
    return this.view('tableMove', hostaddr);
  }

  relationSwitch(hostaddr: string): RelationSwitchAgentClient {
    return this.view('relationSwitch', hostaddr);
  }

  mariadbTables(hostaddr: string): MariaDbTablesAgentClient {
    return this.view('mariadbTables', hostaddr);
  }

  mariadbLogical(hostaddr: string): MariaDbLogicalAgentClient {
    return new MariaDbLogicalAgentClient(this.agentAddress(hostaddr));
  }

  catalogDump(hostaddr: string): CatalogDumpAgentClient {
    return this.view('catalogDump', hostaddr);
  }

  shardRouting(hostaddr: string): ShardRoutingAgentClient {
    return this.view('shardRouting', hostaddr);
  }

  /** `<hostaddr>:<agent_port>`, an IPv6 address in brackets. */
  agentAddress(hostaddr: string): string {
    return `${hostaddr.includes(':') ? `[${hostaddr}]` : hostaddr}:${this.agentPort}`;
  }

  close(): void {
    for (const entry of this.clients.values()) entry.client.close();
    this.clients.clear();
  }

  private realClient<K extends Kind>(kind: K, address: string): ClientKinds[K] {
    const made: { [P in Kind]: () => ClientKinds[P] } = {
      agent: () => new AgentClient(address, this.deadlineMs),
      mariadb: () => new MariaDbAgentClient(address, { queryMs: this.probeDeadlineMs }),
      postgres: () => new PostgresAgentClient(address),
      postgresProbe: () => new PostgresAgentClient(address, this.probeDeadlineMs),
      cgroup: () => new CgroupAgentClient(address),
      mariadbHa: () => new MariaDbHaAgentClient(address),
      mariadbRestore: () => new MariaDbRestoreAgentClient(address, { queryMs: this.probeDeadlineMs }),
      passwords: () => new PasswordAgentClient(address),
      hostProbe: () => new HostProbeAgentClient(address, this.probeDeadlineMs),
      shardData: () => new ShardDataAgentClient(address),
      tableMove: () => new TableMoveAgentClient(address),
      relationSwitch: () => new RelationSwitchAgentClient(address),
      mariadbTables: () => new MariaDbTablesAgentClient(address),
      catalogDump: () => new CatalogDumpAgentClient(address),
      shardRouting: () => new ShardRoutingAgentClient(address),
    };
    return made[kind]();
  }

  /** Runs `use` with the pool's client of `kind` for the host, counted in flight. */
  private async using<K extends Kind, T>(kind: K, hostaddr: string, use: (client: ClientKinds[K]) => Promise<T>): Promise<T> {
    const key = keyOf(kind, hostaddr);
    const entry = this.checkOut(key, () => this.makeClient(kind, this.agentAddress(hostaddr)));
    try {
      return await use(entry.client as ClientKinds[K]);
    } catch (err) {
      // A channel still connecting keeps its handshake (see channelConnecting).
      if (isAgentUnreachable(err) && !channelConnecting(this.agentAddress(hostaddr))) {
        this.retire(key, entry);
        renewChannel(this.agentAddress(hostaddr)); // the next client of this agent, of any kind, connects afresh
      }
      throw err;
    } finally {
      entry.inFlight--;
      entry.lastUsedMs = this.now();
      if (entry.retired && entry.inFlight === 0) entry.client.close();
      this.closeExcess();
    }
  }

  /** A client-shaped object whose every method runs through `using`; other properties come from a fresh look-up. */
  private view<K extends Exclude<Kind, 'agent'>>(kind: K, hostaddr: string): ClientKinds[K] {
    return new Proxy({} as ClientKinds[K], {
      get: (_target, prop) => {
        if (prop === 'address') return this.agentAddress(hostaddr);
        if (prop === 'close') return () => {}; // the pool owns its clients
        if (prop === 'then') return undefined; // not a thenable
        return (...args: unknown[]) =>
          this.using(kind, hostaddr, (client) => {
            const method = (client as unknown as Record<PropertyKey, unknown>)[prop];
            if (typeof method !== 'function') throw new TypeError(`${kind} client has no method ${String(prop)}`);
            return (method as (...a: unknown[]) => Promise<unknown>).apply(client, args);
          });
      },
    });
  }

  /** Resolves once a TCP connection to the host's agent port opens; AgentUnreachableError otherwise (within the call deadline). */
  private probe(hostaddr: string): Promise<void> {
    const address = this.agentAddress(hostaddr);
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

  private checkOut(key: string, make: () => Closeable): PooledClient {
    let entry = this.clients.get(key);
    if (entry) {
      this.clients.delete(key); // re-inserted below: now the most recently used
      entry.lastUsedMs = this.now();
    } else {
      entry = { client: make(), inFlight: 0, lastUsedMs: this.now(), retired: false };
    }
    this.clients.set(key, entry);
    entry.inFlight++;
    return entry;
  }

  private retire(key: string, entry: PooledClient): void {
    if (entry.retired) return;
    entry.retired = true;
    if (this.clients.get(key) === entry) this.clients.delete(key);
  }

  /** Closes idle clients from the least recently used end: too many, or unused too long. */
  private closeExcess(): void {
    const idleBefore = this.now() - this.idleCloseMs;
    for (const [key, entry] of this.clients) {
      const tooMany = this.clients.size > this.maxClients;
      if (!tooMany && entry.lastUsedMs > idleBefore) break; // the rest were used more recently
      if (entry.inFlight > 0) continue;
      this.clients.delete(key);
      entry.client.close();
    }
  }
}

const keyOf = (kind: Kind, hostaddr: string): string => `${kind} ${hostaddr}`;
