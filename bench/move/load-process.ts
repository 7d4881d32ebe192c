// The bench:move write load as its own OS process (forked by load-child.ts), so that the
// clients' work is not counted in the manager process's CPU and bytes received, and the
// manager's event loop does not delay the clients' acknowledgements (or the reverse).
//
// Messages (IPC): in `start` {login, table, seeded}, then `stop` {check}; out `stopped` with
// the acknowledgement times on CLOCK_MONOTONIC (process.hrtime: one clock for every process
// of the machine, so the parent can place them against the manager's cut-over spans) and the
// acknowledged writes missing from the table on its final shard.

import mysql from 'mysql2/promise';
import { MoveLoad, rowDifferences, type CompLogin, type Row } from '../../test/cluster/move-load';

export interface LoadStart {
  kind: 'start';
  login: CompLogin;
  /** The table as the compute node names it (`public.mv_bench`). */
  table: string;
  seeded: number;
}

/** Where the table is at the end, read directly on its shard master to check the clients' log against. */
export interface LoadStop {
  kind: 'stop';
  check: { host: string; port: number; user: string; password: string; database: string; table: string };
}

export interface LoadStopped {
  kind: 'stopped';
  writes: number;
  failures: number;
  /** Each acknowledgement, ms on CLOCK_MONOTONIC, ascending. */
  acksMonotonicMs: number[];
  /** The same on the wall clock (Date.now), for the gaps over whole moves. */
  ackTimes: number[];
  lostCount: number;
  /** The first few lost writes, described. */
  lostSample: string[];
}

let load: MoveLoad | undefined;

process.on('message', (msg: LoadStart | LoadStop) => {
  if (msg.kind === 'start') {
    load = new MoveLoad(msg.login, msg.table, msg.seeded);
    load.start();
    return;
  }
  void stop(msg).catch((err) => {
    console.error('bench:move load process:', err);
    process.exit(1);
  });
});

async function stop(msg: LoadStop): Promise<void> {
  if (!load) throw new Error('stop before start');
  await load.stop();
  const { host, port, user, password, database, table } = msg.check;
  const c = await mysql.createConnection({ host, port, user, password });
  let rows: Map<number, Row>;
  try {
    const [found] = await c.query(`SELECT id, v, note FROM \`${database}\`.\`${table}\``);
    rows = new Map((found as { id: number; v: number; note: string }[]).map((r) => [r.id, { v: r.v, note: r.note }]));
  } finally {
    await c.end();
  }
  const lost = rowDifferences(load, rows);
  // acksAt is performance.timeOrigin + now() of this process; now() is CLOCK_MONOTONIC in ms
  // since the process began, so one offset turns it into the machine-wide monotonic clock.
  const offset = performance.timeOrigin + performance.now() - Number(process.hrtime.bigint()) / 1e6;
  const reply: LoadStopped = {
    kind: 'stopped',
    writes: load.writes,
    failures: load.failures,
    acksMonotonicMs: load.acksAt.map((t) => t - offset),
    ackTimes: load.ackTimes,
    lostCount: lost.length,
    lostSample: lost.slice(0, 5),
  };
  process.send?.(reply, () => process.exit(0));
}
