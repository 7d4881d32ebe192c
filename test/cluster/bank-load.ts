// The bank workload: clients spread over the compute nodes make cross-shard transfers
// between acct_a (on shard 1) and acct_b (on shard 2), each writing its own transfer id into
// ledger_a and ledger_b in the same transaction, and keep what each transaction's end told
// them: committed, rolled back (an error before COMMIT, or a COMMIT that failed with a
// definite error), or unknown (the connection lost at COMMIT, no answer, or SQLSTATE 40003:
// committed on every shard or on none). A client reconnects after every error and carries on.
//
// Clients come in two kinds, so that both shards coordinate two-phase commits without a
// lock-order cycle across shards (which no MariaDB sees, so nothing would break it): "a
// first" clients lock an acct_a row and then an acct_b row of the lower half of the
// accounts; "b first" clients lock acct_b and then acct_a rows of the upper half.

import pg from 'pg';
import { sleep } from '../manager/helpers/processes';

export type Outcome = 'committed' | 'rolled back' | 'unknown';

export interface Transfer {
  id: number;
  /** The client that made it. */
  client: number;
  /** The shard whose table the transfer wrote first: its coordinator. */
  first: 'a' | 'b';
  /** acct_<first>(from) pays `amount` to the other table's account `to`. */
  from: number;
  to: number;
  amount: number;
  outcome?: Outcome;
  /** The error that ended it, when it did not commit. */
  why?: string;
  /** When it began (BEGIN sent) and ended (its outcome known), ms since the epoch. */
  begunAt: number;
  endedAt?: number;
}

export interface BankLogin {
  host: string;
  port: number;
  user: string;
  password: string;
}

export interface OutcomeCounts {
  committed: number;
  'rolled back': number;
  unknown: number;
}

/** A statement that never answers counts as a lost connection (the client drops it). */
const QUERY_TIMEOUT_MS = 30_000;

export class BankLoad {
  /** Every transfer begun, by id, in the order begun. */
  readonly transfers = new Map<number, Transfer>();
  /** Clients whose COMMIT is sent and not yet answered. */
  committing = 0;
  private nextId = 1;
  private paused = false;
  private stopped = false;
  private readonly parked = new Set<number>();
  private loops: Promise<void>[] = [];

  /** `logins()` is read at every connect: client k uses login k % n. */
  constructor(private readonly logins: () => BankLogin[], private readonly clients: number, private readonly accountsPerShard: number) {
    if (clients < 2 || accountsPerShard < 4) throw new Error('the bank needs 2+ clients and 4+ accounts per shard');
  }

  start(): void {
    this.loops = Array.from({ length: this.clients }, (_, k) => this.run(k));
  }

  /** Returns once no transfer is in flight; clients wait until resume(). */
  async pause(): Promise<void> {
    this.paused = true;
    while (this.parked.size < this.clients && !this.stopped) await sleep(20);
  }

  resume(): void {
    this.paused = false;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  /** Outcomes of the transfers with ids above `afterId`. */
  counts(afterId = 0): OutcomeCounts {
    const counts: OutcomeCounts = { committed: 0, 'rolled back': 0, unknown: 0 };
    for (const t of this.transfers.values()) if (t.id > afterId && t.outcome) counts[t.outcome]++;
    return counts;
  }

  lastId(): number {
    return this.nextId - 1;
  }

  /** When the last client to do so committed its first transfer begun at or after `t`; undefined while one has not. */
  everyClientCommittedSince(t: number): number | undefined {
    const first = new Map<number, number>();
    for (const x of this.transfers.values()) {
      if (x.outcome !== 'committed' || x.begunAt < t) continue;
      first.set(x.client, Math.min(first.get(x.client) ?? Infinity, x.endedAt!));
    }
    return first.size === this.clients ? Math.max(...first.values()) : undefined;
  }

  private async run(k: number): Promise<void> {
    const first = Math.floor(k / 2) % 2 === 0 ? 'a' : 'b';
    const half = Math.floor(this.accountsPerShard / 2);
    const base = first === 'a' ? 0 : half;
    const span = first === 'a' ? half : this.accountsPerShard - half;
    let client: pg.Client | undefined;
    while (!this.stopped) {
      if (this.paused) {
        this.parked.add(k);
        await sleep(20);
        continue;
      }
      this.parked.delete(k);
      try {
        client ??= await this.connect(k);
      } catch {
        await sleep(200);
        continue;
      }
      const t: Transfer = {
        id: this.nextId++, client: k, first, begunAt: Date.now(),
        from: base + 1 + Math.floor(Math.random() * span), to: base + 1 + Math.floor(Math.random() * span), amount: 1 + Math.floor(Math.random() * 50),
      };
      this.transfers.set(t.id, t);
      await this.attempt(client, t);
      t.endedAt = Date.now();
      if (t.outcome !== 'committed') {
        await client.end().catch(() => {});
        client = undefined;
        await sleep(100);
      }
    }
    this.parked.add(k);
    await client?.end().catch(() => {});
  }

  private async connect(k: number): Promise<pg.Client> {
    const logins = this.logins();
    const c = new pg.Client({ ...logins[k % logins.length], database: 'postgres', connectionTimeoutMillis: 3000, query_timeout: QUERY_TIMEOUT_MS });
    c.on('error', () => {});
    try {
      await c.connect();
    } catch (err) {
      await c.end().catch(() => {});
      throw err;
    }
    return c;
  }

  /** One transfer; sets its outcome. */
  private async attempt(c: pg.Client, t: Transfer): Promise<void> {
    const other = t.first === 'a' ? 'b' : 'a';
    try {
      await c.query('BEGIN');
      await c.query(`update acct_${t.first} set money = money - $1 where id = $2`, [t.amount, t.from]);
      await c.query(`update acct_${other} set money = money + $1 where id = $2`, [t.amount, t.to]);
      await c.query(`insert into ledger_${t.first} values ($1)`, [t.id]);
      await c.query(`insert into ledger_${other} values ($1)`, [t.id]);
    } catch (err) {
      // COMMIT was never sent: nothing of it may commit, whatever became of the connection.
      await c.query('ROLLBACK').catch(() => {});
      t.outcome = 'rolled back';
      t.why = errorText(err);
      return;
    }
    this.committing++;
    try {
      const r = await c.query('COMMIT');
      // COMMIT of a transaction already failed answers ROLLBACK, without an error.
      t.outcome = r.command === 'COMMIT' ? 'committed' : 'rolled back';
      if (r.command !== 'COMMIT') t.why = `COMMIT answered ${r.command}`;
    } catch (err) {
      t.outcome = outcomeUnknown(err) ? 'unknown' : 'rolled back';
      t.why = errorText(err);
    } finally {
      this.committing--;
    }
  }
}

/**
 * A COMMIT error that leaves the outcome open: SQLSTATE 40003 (kcm's "committed on every
 * shard or on none"), a connection class error or server shutdown (08, 57P), a FATAL, or
 * no server answer at all (the socket closed, a timeout).
 */
function outcomeUnknown(err: unknown): boolean {
  const e = err as { code?: string; severity?: string };
  const sqlstate = typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : undefined;
  if (!sqlstate) return true;
  return sqlstate === '40003' || sqlstate.startsWith('08') || sqlstate.startsWith('57P') || e.severity === 'FATAL' || e.severity === 'PANIC';
}

function errorText(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return `${e.code ?? ''} ${e.message ?? String(err)}`.trim().slice(0, 200);
}
