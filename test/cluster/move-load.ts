// A write load for table-move tests: inserts, updates and deletes through a compute node on
// one table, keeping the client's own log of every acknowledged write as the table's
// expected content. A write that failed (its effect unknown) marks its row uncertain, so the
// check after a move compares every row whose every write was acknowledged.

import pg from 'pg';

export type Row = { v: number; note: string };

export interface CompLogin {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

export class MoveLoad {
  /** Expected rows by id, from the seed plus every acknowledged write. */
  readonly expected = new Map<number, Row>();
  readonly uncertain = new Set<number>();
  readonly ackTimes: number[] = [];
  /** The same acknowledgements on the monotonic clock, as ms since the epoch (performance.timeOrigin + now), in order. */
  readonly acksAt: number[] = [];
  writes = 0;
  failures = 0;
  private stopped = false;
  private loops: Promise<void>[] = [];

  /** `noteOf` shapes the note each insert/update writes (e.g. to write non-ASCII text). */
  constructor(private readonly login: CompLogin, private readonly table: string, seeded: number, private readonly workers = 2, private readonly noteOf = (note: string) => note) {
    for (let id = 1; id <= seeded; id++) this.expected.set(id, { v: id, note: `n${id}` });
  }

  start(): void {
    this.loops = Array.from({ length: this.workers }, (_, w) => this.run(w));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  /** The longest time (ms) between two acknowledged writes (any worker) in [from, to]. */
  longestGap(from: number, to: number): number {
    const acks = this.ackTimes.filter((t) => t >= from && t <= to).sort((a, b) => a - b);
    let gap = 0;
    for (let i = 1; i < acks.length; i++) gap = Math.max(gap, acks[i] - acks[i - 1]);
    return gap;
  }

  /** How long writes stalled across [from, to] (monotonic epoch ms): the longest gap between two consecutive acknowledgements that overlaps it. */
  stallAcross(from: number, to: number): number {
    return stallAcross(this.acksAt, from, to);
  }

  private async run(worker: number): Promise<void> {
    let client: pg.Client | undefined;
    // Each worker owns the ids congruent to it: its writes to a row are in order.
    let nextNew = 1_000_000 + worker;
    const mine = () => [...this.expected.keys()].filter((id) => id % this.workers === worker);
    // Listing them walks every expected row (27 ms at 100,000 rows on a loaded host, in the
    // process that in bench/move also runs the manager and the agents): the list is kept,
    // and made again when it names a row this worker has deleted, and every 1,000 steps (its new rows).
    let listed: number[] = [];
    const pick = (step: number) => {
      if (listed.length === 0 || step % 1000 === 0) listed = mine();
      if (listed.length > 0 && !this.expected.has(listed[(step * 7919) % listed.length])) listed = mine();
      return listed;
    };
    let step = 0;
    while (!this.stopped) {
      step++;
      const kind = step % 3;
      const ids = kind === 0 ? [] : pick(step);
      let id = kind === 0 || ids.length === 0 ? nextNew : ids[(step * 7919) % ids.length];
      if (id === nextNew) nextNew += this.workers;
      try {
        client ??= await this.connect();
        if (id >= 1_000_000 && !this.expected.has(id)) {
          const row = { v: step, note: this.noteOf(`w${worker}-${step}`) };
          await client.query(`INSERT INTO ${this.table} (id, v, note) VALUES ($1, $2, $3)`, [id, row.v, row.note]);
          this.expected.set(id, row);
        } else if (kind === 1) {
          const row = { v: step, note: this.noteOf(`u${worker}-${step}`) };
          await client.query(`UPDATE ${this.table} SET v = $2, note = $3 WHERE id = $1`, [id, row.v, row.note]);
          this.expected.set(id, row);
        } else {
          await client.query(`DELETE FROM ${this.table} WHERE id = $1`, [id]);
          this.expected.delete(id);
        }
        this.writes++;
        this.ackTimes.push(Date.now());
        this.acksAt.push(performance.timeOrigin + performance.now());
      } catch {
        this.failures++;
        this.uncertain.add(id);
        await client?.end().catch(() => {});
        client = undefined;
        await new Promise((r) => setTimeout(r, 20));
      }
      void id;
    }
    await client?.end().catch(() => {});
  }

  private async connect(): Promise<pg.Client> {
    const c = new pg.Client({ ...this.login, connectionTimeoutMillis: 3000, query_timeout: 10_000 });
    c.on('error', () => {});
    await c.connect();
    return c;
  }
}

/** Rows (id -> row) that differ between what the load expects and what a table holds, uncertain rows left out. */
export function rowDifferences(load: MoveLoad, actual: Map<number, Row>): string[] {
  const out: string[] = [];
  for (const [id, row] of load.expected) {
    if (load.uncertain.has(id)) continue;
    const got = actual.get(id);
    if (!got) out.push(`${id} missing`);
    else if (got.v !== row.v || got.note !== row.note) out.push(`${id} is ${JSON.stringify(got)}, expected ${JSON.stringify(row)}`);
  }
  for (const id of actual.keys()) if (!load.expected.has(id) && !load.uncertain.has(id)) out.push(`${id} should not be there`);
  return out;
}

/**
 * The longest gap between consecutive times in `acks` (ascending) that overlaps [from, to]
 * (a span after the last acknowledgement has no gap to measure yet).
 */
export function stallAcross(acks: readonly number[], from: number, to: number): number {
  // The first acknowledgement at or after `from`: the gap ending there is the first to overlap.
  let lo = 0;
  let hi = acks.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (acks[mid] < from) lo = mid + 1;
    else hi = mid;
  }
  let gap = 0;
  for (let i = Math.max(1, lo); i < acks.length && acks[i - 1] <= to; i++) gap = Math.max(gap, acks[i] - acks[i - 1]);
  return gap;
}
