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
  status(n: StorageNodeRecord, checkMasterMs?: number): Promise<MariaDbHaStatusReply>;
  storageQuery<T>(n: StorageNodeRecord, sql: string): Promise<T[]>;
  close(): void;
}

/** The fixture's hosts as storage machines, and those in computerHosts as computer machines too (machines.ts). */
export async function registerMachines(f: ClusterFixture, computerHosts: readonly number[]): Promise<void> {
  await registerHostMachines(f, { computerHosts });
}

export async function createHaCluster(f: ClusterFixture, computerHost: string): Promise<HaCluster> {
  const reply = await f.runJob('create_cluster', clusterParas({ nick_name: 'ha', computer_iplists: [computerHost] }), 300_000);
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
  await waitUntil('ha_orders on the compute node', async () => {
    const c = await pgClient(ha);
    try {
      const { rows } = await c.query(`SELECT 1 FROM information_schema.foreign_tables WHERE foreign_table_name = 'ha_orders'`);
      return rows.length === 1 ? true : undefined;
    } finally {
      await c.end();
    }
  }, 20_000);
  return ha;
}

/** A client of the compute node; `patient` ones set no statement timeout (an application that waits for every answer). */
export async function pgClient(ha: HaCluster, opts: { patient?: boolean } = {}): Promise<pg.Client> {
  const c = new pg.Client({ ...ha.comp(), ...ha.computer, database: 'postgres', connectionTimeoutMillis: 3000, ...(opts.patient ? {} : { query_timeout: 5000 }) });
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
