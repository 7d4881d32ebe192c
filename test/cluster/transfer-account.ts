// The canonical workload of the data-job tests (issue 36): `transfer_account`, a table
// partitioned over the shards and made through a compute node, with money transfers running
// through every compute node while a job runs. Each transfer moves an amount between two
// accounts in one transaction (two partitions, often two shards), so the total of the
// balances is the same at every commit; the figures read each partition's rows through a
// compute node (count, balance sum and an md5 of every row in key order), so a job's
// copy of a partition can be compared with its source's exactly.

import pg from 'pg';
import { waitUntil } from './cluster-fixture';
import { pinTable } from './transactions-fixture';
import type { Endpoint, SqlCluster } from './sql-fixture';

export const ACCOUNT_MONEY = 1_000;

export interface TransferAccountLayout {
  /** `range`: partition i holds ids [i*per+1, (i+1)*per]; `hash`: modulus = partitions. */
  by: 'range' | 'hash';
  partitions: number;
  accounts: number;
  /** The shard of each partition (kcm.shard), in partition order; default alternates over the cluster's shards. */
  shards?: string[];
  table?: string;
  database?: string;
}

/** `transfer_account_01` .. for partition 0 .. */
export const partitionName = (table: string, i: number) => `${table}_${String(i + 1).padStart(2, '0')}`;

/**
 * Makes the partitioned table through the first compute node, each partition on its shard,
 * gives every account ACCOUNT_MONEY, and waits until every compute node has the parent with
 * every partition (the catalog sync builds it on the others). Returns the partition names in order.
 */
export async function createTransferAccount(s: SqlCluster, layout: TransferAccountLayout): Promise<string[]> {
  const table = layout.table ?? 'transfer_account';
  const shardIds = Object.keys(s.cluster().shards).sort((a, b) => Number(a) - Number(b));
  const c = await s.pgAs(s.comps()[0], layout.database ?? 'postgres');
  const names: string[] = [];
  try {
    await c.query(`CREATE TABLE ${table} (id int NOT NULL, balance bigint NOT NULL, note varchar(40)) PARTITION BY ${layout.by.toUpperCase()} (id)`);
    const per = Math.ceil(layout.accounts / layout.partitions);
    for (let i = 0; i < layout.partitions; i++) {
      const name = partitionName(table, i);
      const bound = layout.by === 'range' ? `FROM (${i * per + 1}) TO (${(i + 1) * per + 1})` : `WITH (MODULUS ${layout.partitions}, REMAINDER ${i})`;
      const shard = layout.shards?.[i] ?? shardIds[i % shardIds.length];
      await pinTable(c, shard, `CREATE TABLE ${name} PARTITION OF ${table} (PRIMARY KEY (id)) FOR VALUES ${bound}`);
      names.push(name);
    }
    await c.query(`INSERT INTO ${table} SELECT g, ${ACCOUNT_MONEY}, 'acct ' || g FROM generate_series(1, ${layout.accounts}) g`);
  } finally {
    await c.end();
  }
  await partitionsEverywhere(s, table, names.length, layout.database);
  return names;
}

/** Waits until every compute node has `table` with `count` partitions attached. */
export async function partitionsEverywhere(s: SqlCluster, table: string, count: number, database = 'postgres'): Promise<void> {
  for (const at of s.comps()) {
    await waitUntil(`${table} with ${count} partitions on ${at.host}:${at.port}`, async () => {
      const c = await s.pgAs(at, database);
      try {
        const { rows } = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = to_regclass($1)`, [table]);
        return rows[0].n === count ? true : undefined;
      } finally {
        await c.end();
      }
    }, 30_000);
  }
}

export interface PartitionFigures {
  /** The foreign server (`shard_<id>`) the compute node reads the partition from. */
  server: string;
  rows: number;
  balance: number;
  /** md5 over every row (id:balance:note) in id order. */
  md5: string;
}

/** Per partition of `table` (by name), as compute node `at` reads it. */
export async function partitionFigures(s: SqlCluster, at: Endpoint, table = 'transfer_account', database = 'postgres'): Promise<Map<string, PartitionFigures>> {
  const c = await s.pgAs(at, database);
  try {
    const { rows } = await c.query<{ part: string; server: string }>(
      `SELECT p.relname AS part, srv.srvname AS server
         FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid
         JOIN pg_foreign_table ft ON ft.ftrelid = p.oid JOIN pg_foreign_server srv ON srv.oid = ft.ftserver
        WHERE i.inhparent = $1::regclass ORDER BY 1`,
      [table],
    );
    const out = new Map<string, PartitionFigures>();
    for (const r of rows) {
      const f = await c.query<{ rows: number; balance: string | null; md5: string | null }>(
        `SELECT count(*)::int AS rows, sum(balance)::text AS balance,
                md5(string_agg(id || ':' || balance || ':' || coalesce(note, '<null>'), ',' ORDER BY id)) AS md5
           FROM ${pg.escapeIdentifier(r.part)}`,
      );
      out.set(r.part, { server: r.server, rows: f.rows[0].rows, balance: Number(f.rows[0].balance ?? 0), md5: f.rows[0].md5 ?? '' });
    }
    return out;
  } finally {
    await c.end();
  }
}

/** The figures without the server: what a copy must equal. */
export const contentOf = (figures: Map<string, PartitionFigures>) => new Map([...figures].map(([k, v]) => [k, { rows: v.rows, balance: v.balance, md5: v.md5 }]));

/**
 * Clients spread over the compute nodes, each moving random amounts between random accounts
 * in transactions until stopped. A transaction that fails is rolled back and counted; the
 * client carries on (a new session after a lost one).
 */
export class TransferLoad {
  committed = 0;
  failed = 0;
  /** COMMITs that failed without a definite answer (committed on every shard or on none). */
  unknown = 0;
  /** Each account's change by the committed transfers: what its balance is over ACCOUNT_MONEY. */
  readonly deltas = new Map<number, number>();
  readonly errors: string[] = [];
  private stopped = false;
  private readonly runs: Promise<void>[] = [];

  constructor(
    private readonly s: SqlCluster,
    private readonly options: {
      clients: number;
      accounts: number;
      table?: string;
      database?: string;
      /**
       * Each transfer stays inside one block of this many consecutive ids (1..within, ...): with
       * a range partition's width, every partition's total is the same at every commit.
       * Default: any two accounts.
       */
      within?: number;
    },
  ) {}

  start(): this {
    const comps = this.s.comps();
    for (let i = 0; i < this.options.clients; i++) this.runs.push(this.client(comps[i % comps.length]));
    return this;
  }

  /** Resolves once `n` more transfers committed (evidence that the load runs). */
  async committedMore(n: number, timeoutMs = 60_000): Promise<void> {
    const goal = this.committed + n;
    const deadline = Date.now() + timeoutMs;
    while (this.committed < goal) {
      if (Date.now() > deadline) throw new Error(`transfer load: ${this.committed - goal + n} of ${n} transfers committed in ${timeoutMs} ms; last errors: ${this.errors.slice(-3).join(' | ')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.runs);
  }

  private async client(at: Endpoint): Promise<void> {
    const table = this.options.table ?? 'transfer_account';
    let c: pg.Client | null = null;
    while (!this.stopped) {
      try {
        c ??= await this.s.pgAs(at, this.options.database ?? 'postgres');
        const block = this.options.within ?? this.options.accounts;
        const base = block * Math.floor(Math.random() * Math.floor(this.options.accounts / block));
        const i = Math.floor(Math.random() * block);
        const from = base + 1 + i;
        const to = base + 1 + ((i + 1 + Math.floor(Math.random() * (block - 1))) % block);
        const amount = 1 + Math.floor(Math.random() * 10);
        await c.query('BEGIN');
        await c.query(`UPDATE ${table} SET balance = balance - $1 WHERE id = $2`, [amount, from]);
        await c.query(`UPDATE ${table} SET balance = balance + $1 WHERE id = $2`, [amount, to]);
        try {
          const reply = await c.query('COMMIT');
          // A COMMIT of a failed transaction answers ROLLBACK, not an error.
          if (reply.command !== 'COMMIT') throw new Error('the transaction was rolled back at COMMIT');
        } catch (err) {
          if (!/rolled back at COMMIT/.test((err as Error).message)) this.unknown++;
          throw err;
        }
        this.committed++;
        this.deltas.set(from, (this.deltas.get(from) ?? 0) - amount);
        this.deltas.set(to, (this.deltas.get(to) ?? 0) + amount);
      } catch (err) {
        this.failed++;
        this.errors.push((err as Error).message);
        if (this.errors.length > 50) this.errors.shift();
        await c?.query('ROLLBACK').catch(() => {});
        await c?.end().catch(() => {});
        c = null;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    await c?.end().catch(() => {});
  }
}

/**
 * The accounts whose balance, read through compute node `at`, is not what the committed
 * transfers made it (ACCOUNT_MONEY plus the account's delta), and those missing or doubled.
 * Exact when no COMMIT was left unknown (load.unknown === 0).
 */
export async function wrongBalances(s: SqlCluster, at: Endpoint, load: TransferLoad, accounts: number, table = 'transfer_account', database = 'postgres'): Promise<string[]> {
  const c = await s.pgAs(at, database);
  try {
    const { rows } = await c.query<{ id: number; balance: string; n: number }>(`SELECT id, min(balance)::text AS balance, count(*)::int AS n FROM ${pg.escapeIdentifier(table)} GROUP BY id ORDER BY id`);
    const seen = new Map(rows.map((r) => [r.id, r]));
    const wrong: string[] = [];
    for (let id = 1; id <= accounts; id++) {
      const r = seen.get(id);
      const want = ACCOUNT_MONEY + (load.deltas.get(id) ?? 0);
      if (!r) wrong.push(`${id}: missing`);
      else if (r.n !== 1) wrong.push(`${id}: ${r.n} rows`);
      else if (Number(r.balance) !== want) wrong.push(`${id}: ${r.balance}, want ${want}`);
    }
    if (rows.length !== accounts) wrong.push(`${rows.length} distinct ids, want ${accounts}`);
    return wrong;
  } finally {
    await c.end();
  }
}