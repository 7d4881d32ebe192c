// Shared set-up of the shard HA tests: a cluster of 1 shard x 3 MariaDB nodes + 1 compute
// node on the cluster fixture's three hosts, a table visible through the compute node, a
// steady insert load through it that records which inserts were acknowledged, and probes
// of every node's replication state.

import { readFile } from 'node:fs/promises';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { MariaDbHaAgentClient, type MariaDbHaStatusReply } from '@kcm/agent-api';
import type { ClusterRecord, JobRecord, StorageNodeRecord } from '@kcm/manager';
import { waitUntil, type ClusterFixture } from './cluster-fixture';
import { clusterParas } from './cluster-paras';
import { registerMachines as registerHostMachines } from './machines';
import { openTestAccounts } from '../helpers/secrets';

export const TABLE = '`postgres_$$_public`.ha_orders';

export interface HaCluster {
  clusterId: string;
  computer: { user: string; password: string };
  cluster(): ClusterRecord;
  master(): StorageNodeRecord;
  nodes(): StorageNodeRecord[];
  comp(): { host: string; port: number };
  /** Every compute node of the cluster. */
  comps(): { host: string; port: number }[];
  status(n: StorageNodeRecord, checkMasterMs?: number): Promise<MariaDbHaStatusReply>;
  storageQuery<T>(n: StorageNodeRecord, sql: string): Promise<T[]>;
  close(): void;
}

/** The fixture's hosts as storage machines, and those in computerHosts as computer machines too (machines.ts). */
export async function registerMachines(f: ClusterFixture, computerHosts: readonly number[]): Promise<void> {
  await registerHostMachines(f, { computerHosts });
}

/** One compute node on computerHost, or one on each host of a list. */
export async function createHaCluster(f: ClusterFixture, computerHost: string | readonly string[]): Promise<HaCluster> {
  const computerHosts = typeof computerHost === 'string' ? [computerHost] : [...computerHost];
  const reply = await f.runJob('create_cluster', clusterParas({ nick_name: 'ha', computer_iplists: computerHosts, comps: String(computerHosts.length) }), 300_000);
  if (reply.status !== 'done') throw new Error(`create_cluster: ${reply.error_info}`);
  const att = reply.attachment as { cluster_id: string; computer_user: string; computer_pwd: string };
  const clients = new Map<string, MariaDbHaAgentClient>();
  const haOf = (host: string) => {
    let c = clients.get(host);
    if (!c) clients.set(host, (c = new MariaDbHaAgentClient(`${host}:${f.agentPort}`, { statusMs: 3000 })));
    return c;
  };
  const cluster = () => f.manager.store.state().clusters[att.cluster_id];
  const shard = () => Object.values(cluster().shards)[0];
  const ha: HaCluster = {
    clusterId: att.cluster_id,
    computer: { user: att.computer_user, password: att.computer_pwd },
    cluster,
    master: () => shard().nodes[shard().masterNodeId],
    nodes: () => Object.values(shard().nodes),
    comp: () => {
      const c = Object.values(cluster().comps)[0];
      return { host: c.hostaddr, port: c.port };
    },
    comps: () => Object.values(cluster().comps).map((c) => ({ host: c.hostaddr, port: c.port })),
    status: (n, checkMasterMs = 0) => haOf(n.hostaddr).replicationStatus(n.port, checkMasterMs),
    async storageQuery<T>(n: StorageNodeRecord, sql: string) {
      const c = await mysql.createConnection({ host: n.hostaddr, port: n.port, ...openTestAccounts(cluster().accounts).storage, connectTimeout: 3000 });
      try {
        return (await c.query(sql))[0] as T[];
      } finally {
        await c.end();
      }
    },
    close: () => {
      for (const c of clients.values()) c.close();
    },
  };
  await ha.storageQuery(ha.master(), 'CREATE DATABASE IF NOT EXISTS `postgres_$$_public`');
  await ha.storageQuery(ha.master(), `CREATE TABLE ${TABLE} (id INT PRIMARY KEY, at BIGINT NOT NULL) ENGINE=InnoDB`);
  for (const comp of ha.comps()) {
    await waitUntil(`ha_orders on the compute node ${comp.host}:${comp.port}`, async () => {
      const c = await pgClient(ha, { comp });
      try {
        const { rows } = await c.query(`SELECT 1 FROM information_schema.foreign_tables WHERE foreign_table_name = 'ha_orders'`);
        return rows.length === 1 ? true : undefined;
      } finally {
        await c.end();
      }
    }, 20_000);
  }
  return ha;
}

/** A client of the (first, or the given) compute node; `patient` ones set no statement timeout (an application that waits for every answer). */
export async function pgClient(ha: HaCluster, opts: { patient?: boolean; comp?: { host: string; port: number } } = {}): Promise<pg.Client> {
  const c = new pg.Client({ ...(opts.comp ?? ha.comp()), ...ha.computer, database: 'postgres', connectionTimeoutMillis: 3000, ...(opts.patient ? {} : { query_timeout: 5000 }) });
  c.on('error', () => {});
  await c.connect();
  return c;
}

/** Inserts one row after another through the compute node; each acknowledged id is recorded with its time. */
export class InsertLoad {
  readonly acked: { id: number; at: number }[] = [];
  failures = 0;
  private stopped = false;
  private loop?: Promise<void>;

  /** Statements that failed, with their ids (their outcome is unknown to the client). */
  readonly failed: number[] = [];

  constructor(private readonly ha: HaCluster, private nextId = 1, private readonly opts: { patient?: boolean } = {}) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  /** The first acknowledged insert at or after `t`. */
  firstAckAfter(t: number): number | undefined {
    return this.acked.find((a) => a.at >= t)?.at;
  }

  private async run(): Promise<void> {
    let client: pg.Client | undefined;
    while (!this.stopped) {
      const id = this.nextId++;
      try {
        client ??= await pgClient(this.ha, this.opts);
        await client.query('INSERT INTO public.ha_orders (id, at) VALUES ($1, $2)', [id, Date.now()]);
        this.acked.push({ id, at: Date.now() });
      } catch {
        this.failures++;
        this.failed.push(id);
        await client?.end().catch(() => {});
        client = undefined;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    await client?.end().catch(() => {});
  }
}

export async function mariadbdPid(n: StorageNodeRecord): Promise<number> {
  return Number((await readFile(path.join(n.datadir, String(n.port), 'run', 'mariadbd.pid'), 'utf8')).trim());
}

export function haJobs(f: ClusterFixture, jobType: string): JobRecord[] {
  return Object.values(f.manager.store.state().jobs).filter((j) => j.jobType === jobType);
}

/** Ids present on a node, as a set. */
export async function idsOn(ha: HaCluster, n: StorageNodeRecord): Promise<Set<number>> {
  const rows = await ha.storageQuery<{ id: number }>(n, `SELECT id FROM ${TABLE}`);
  return new Set(rows.map((r) => Number(r.id)));
}

/** One statement a ClientLoad client sent: when, how long it took, and its error if it failed. */
export interface ClientOp {
  client: number;
  kind: 'insert' | 'select';
  id: number;
  sentAt: number;
  doneAt: number;
  error?: string;
}

/**
 * Several patient clients (an application that waits for every answer), spread over every
 * compute node, each inserting a row and reading it back by its key, one statement after
 * another. Every statement is recorded (ClientOp); a client keeps its session after a
 * statement's error, as an application would (it reconnects only when the session broke).
 */
/** The compute nodes a ClientLoad spreads over, and the account it logs in with. */
export type ClientLoadTarget = Pick<HaCluster, 'comps' | 'computer'>;

export class ClientLoad {
  readonly ops: ClientOp[] = [];
  private stopped = false;
  private loops: Promise<void>[] = [];

  /** `table` has columns (id bigint primary key, at bigint); HaCluster's own by default. */
  constructor(private readonly ha: ClientLoadTarget, readonly clients: number, private readonly firstId = 1, private readonly table = 'public.ha_orders') {}

  /** The compute node client i talks to. */
  compOf(client: number): { host: string; port: number } {
    const comps = this.ha.comps();
    return comps[client % comps.length];
  }

  start(): void {
    for (let i = 0; i < this.clients; i++) this.loops.push(this.run(i, this.compOf(i)));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  /** Ids whose INSERT was acknowledged. */
  acked(): number[] {
    return this.ops.filter((o) => o.kind === 'insert' && !o.error).map((o) => o.id);
  }

  errors(): ClientOp[] {
    return this.ops.filter((o) => o.error !== undefined);
  }

  /** The first statement acknowledged that was sent at or after t. */
  firstAckSentAfter(t: number): ClientOp | undefined {
    return this.ops.find((o) => !o.error && o.sentAt >= t);
  }

  private async run(client: number, comp: { host: string; port: number }): Promise<void> {
    let session: pg.Client | undefined;
    // Ids of client i: firstId + i, + clients, ...: no two clients insert the same one.
    for (let n = 0; !this.stopped; n++) {
      const id = this.firstId + client + n * this.clients;
      try {
        session ??= await patientClient(this.ha, comp);
      } catch {
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      let insertedAt: number | undefined;
      for (const kind of ['insert', 'select'] as const) {
        const op: ClientOp = { client, kind, id, sentAt: Date.now(), doneAt: 0 };
        try {
          if (kind === 'insert') {
            await session.query(`INSERT INTO ${this.table} (id, at) VALUES ($1, $2)`, [id, op.sentAt]);
            insertedAt = op.sentAt;
          } else {
            const read = await session.query(`SELECT at FROM ${this.table} WHERE id = $1`, [id]);
            // An acknowledged insert reads back as written, on the same session.
            if (insertedAt !== undefined && Number(read.rows[0]?.at) !== insertedAt) throw new Error(`row ${id} read back as ${JSON.stringify(read.rows)}, inserted with at ${insertedAt}`);
          }
        } catch (err) {
          op.error = (err as Error).message;
        }
        op.doneAt = Date.now();
        this.ops.push(op);
        if (op.error && /Connection terminated|ECONNRESET|not queryable/.test(op.error)) {
          await session.end().catch(() => {});
          session = undefined;
          break;
        }
      }
    }
    await session?.end().catch(() => {});
  }
}

/** No statement timeout below the compute nodes' own bound on a wait (10 s): 30 s guards a test from hanging only. */
async function patientClient(ha: ClientLoadTarget, comp: { host: string; port: number }): Promise<pg.Client> {
  const c = new pg.Client({ ...comp, ...ha.computer, database: 'postgres', connectionTimeoutMillis: 5000, query_timeout: 30_000 });
  c.on('error', () => {});
  await c.connect();
  return c;
}

const percentileOf = (values: number[], p: number): number => {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
};

/**
 * What the clients saw of [from, to] (a switch, a failover): the latency of every statement
 * in flight at any time in it, p50/p99, and each client's longest.
 */
export function clientStall(ops: readonly ClientOp[], from: number, to: number): { n: number; p50: number; p99: number; max: number; longestPerClient: number[] } {
  const during = ops.filter((o) => o.sentAt <= to && o.doneAt >= from);
  const latencies = during.map((o) => o.doneAt - o.sentAt);
  const perClient = new Map<number, number>();
  for (const o of during) perClient.set(o.client, Math.max(perClient.get(o.client) ?? 0, o.doneAt - o.sentAt));
  return { n: during.length, p50: percentileOf(latencies, 50), p99: percentileOf(latencies, 99), max: Math.max(0, ...latencies), longestPerClient: [...perClient.values()] };
}
