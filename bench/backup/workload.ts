// The load bench/backup puts on the source cluster: the bulk data a backup copies, a client
// inserting through the compute node whose latencies show the write stall, and a sampler of
// the manager's archive-lag gauge.

import mysql from 'mysql2/promise';
import pg from 'pg';
import { metrics } from '../../test/helpers/emit-client';

export type Endpoint = { host: string; port: number };
export type Account = { user: string; password: string };

/** The cluster database the compute node maps to (public schema of database postgres). */
export const DB = 'postgres_$$_public';
const ROW_BYTES = 4096;
const ROWS_PER_STATEMENT = 2048; // 8 MB per statement, under max_allowed_packet

/**
 * Fills `payload` on a shard master with about `mb` MB of random (incompressible) rows,
 * server side (sequence engine + RANDOM_BYTES), so the load costs no client bandwidth.
 */
export async function loadPayload(master: Endpoint, account: Account, mb: number, onProgress?: (doneMb: number) => void): Promise<number> {
  const conn = await mysql.createConnection({ host: master.host, port: master.port, ...account, connectTimeout: 5000 });
  try {
    await conn.query(`CREATE DATABASE IF NOT EXISTS \`${DB}\``);
    await conn.query(`USE \`${DB}\``); // the sequence engine's seq_1_to_N tables live in the current database
    await conn.query(`CREATE TABLE IF NOT EXISTS \`${DB}\`.payload (id INT PRIMARY KEY, pad BLOB NOT NULL) ENGINE=InnoDB`);
    const rows = Math.ceil((mb * 1024 * 1024) / ROW_BYTES);
    const pieces = `CONCAT(${Array.from({ length: ROW_BYTES / 1024 }, () => 'RANDOM_BYTES(1024)').join(', ')})`;
    for (let from = 1; from <= rows; from += ROWS_PER_STATEMENT) {
      const to = Math.min(rows, from + ROWS_PER_STATEMENT - 1);
      await conn.query(`INSERT INTO \`${DB}\`.payload (id, pad) SELECT seq, ${pieces} FROM seq_${from}_to_${to}`);
      onProgress?.(Math.round((to * ROW_BYTES) / (1024 * 1024)));
    }
    return rows;
  } finally {
    await conn.end();
  }
}

export async function createTicksTable(master: Endpoint, account: Account): Promise<void> {
  const conn = await mysql.createConnection({ host: master.host, port: master.port, ...account, connectTimeout: 5000 });
  try {
    await conn.query(`CREATE DATABASE IF NOT EXISTS \`${DB}\``);
    await conn.query(`CREATE TABLE IF NOT EXISTS \`${DB}\`.ticks (id INT PRIMARY KEY, at BIGINT NOT NULL, v VARCHAR(40) NOT NULL) ENGINE=InnoDB`);
  } finally {
    await conn.end();
  }
}

export async function withComp<T>(at: Endpoint, account: Account, work: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ host: at.host, port: at.port, ...account, database: 'postgres' });
  c.on('error', () => {});
  await c.connect();
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}

export interface Insert {
  /** performance.now() when the insert was sent, and its latency (ms). */
  atMs: number;
  ms: number;
  id: number;
}

/**
 * One client inserting rows into ticks through the compute node, one at a time with
 * `pauseMs` between them, recording every latency until stop() is called.
 */
export class TickWriter {
  readonly inserts: Insert[] = [];
  private stopped = false;
  private running?: Promise<void>;
  private nextId = 1;
  error?: Error;

  constructor(private readonly comp: Endpoint, private readonly account: Account, private readonly pauseMs: number) {}

  start(): void {
    this.running = withComp(this.comp, this.account, async (c) => {
      while (!this.stopped) {
        const id = this.nextId++;
        const atMs = performance.now();
        await c.query('INSERT INTO public.ticks (id, at, v) VALUES ($1, $2, $3)', [id, Date.now(), `tick-${id}`]);
        this.inserts.push({ atMs, ms: performance.now() - atMs, id });
        if (this.pauseMs > 0) await new Promise((r) => setTimeout(r, this.pauseMs));
      }
    }).catch((err: unknown) => {
      this.error = err instanceof Error ? err : new Error(String(err));
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  /** Latencies of the inserts sent in [fromMs, toMs) (performance.now() times). */
  between(fromMs: number, toMs: number): number[] {
    return this.inserts.filter((i) => i.atMs >= fromMs && i.atMs < toMs).map((i) => i.ms);
  }
}

/** Samples kcm_binlog_archive_lag_seconds of one cluster from the manager's /metrics. */
export class ArchiveLagSampler {
  /** performance.now() of each scrape, and the lag (s) it read. */
  readonly samples: { atMs: number; lag: number }[] = [];
  private timer?: NodeJS.Timeout;
  lastError?: string;

  constructor(private readonly member: string, private readonly clusterId: string, private readonly everyMs: number) {}

  start(): void {
    const label = `cluster_id="${this.clusterId}"`;
    this.timer = setInterval(() => {
      const atMs = performance.now();
      metrics(this.member).then((values) => {
        for (const [name, value] of values) if (name.startsWith('kcm_binlog_archive_lag_seconds{') && name.includes(label)) this.samples.push({ atMs, lag: value });
      }, (err: unknown) => {
        this.lastError = err instanceof Error ? err.message : String(err);
      });
    }, this.everyMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  between(fromMs: number, toMs: number): number[] {
    return this.samples.filter((s) => s.atMs >= fromMs && s.atMs < toMs).map((s) => s.lag);
  }
}

/** The q-quantile (0..1) of values, nearest rank; NaN for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
