// The parent's side of load-process.ts: starts the write load in its own process and, once
// stopped, answers the same questions as an in-process MoveLoad (stall across a span, longest
// gap, writes lost), with the acknowledgement times on this process's clock.

import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CompLogin } from '../../test/cluster/move-load';
import { stallAcross } from '../../test/cluster/move-load';
import type { LoadStart, LoadStop, LoadStopped } from './load-process';

const LOAD_MAIN = path.join(path.dirname(fileURLToPath(import.meta.url)), 'load-process.ts');

/** What the load saw, once stopped; times on this process's performance clock (timeOrigin + now), as the manager logs its spans. */
export class LoadRecord {
  constructor(readonly result: LoadStopped, private readonly acksAt: number[]) {}

  get writes(): number {
    return this.result.writes;
  }

  /** The longest gap between two consecutive acknowledgements that overlaps [from, to] (this process's performance epoch ms). */
  stallAcross(from: number, to: number): number {
    return stallAcross(this.acksAt, from, to);
  }

  /** The longest time between two acknowledged writes within [from, to] (Date.now ms). */
  longestGap(from: number, to: number): number {
    let gap = 0;
    let last: number | undefined;
    for (const t of this.result.ackTimes) {
      if (t < from || t > to) continue;
      if (last !== undefined) gap = Math.max(gap, t - last);
      last = t;
    }
    return gap;
  }
}

export class LoadChild {
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;

  constructor(login: CompLogin, table: string, seeded: number) {
    this.child = fork(LOAD_MAIN, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()));
    const start: LoadStart = { kind: 'start', login, table, seeded };
    this.child.send(start);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Stops the clients and checks their acknowledged writes against the table where it ended. */
  async stop(check: LoadStop['check']): Promise<LoadRecord> {
    const stopped = new Promise<LoadStopped>((resolve, reject) => {
      this.child.once('message', (msg) => resolve(msg as LoadStopped));
      this.child.once('exit', (code) => reject(new Error(`the load process exited ${code} before it reported`)));
    });
    const msg: LoadStop = { kind: 'stop', check };
    this.child.send(msg);
    const result = await stopped;
    await this.exited;
    // The same offset as the child's, the other way: CLOCK_MONOTONIC -> this process's performance epoch.
    const offset = performance.timeOrigin + performance.now() - Number(process.hrtime.bigint()) / 1e6;
    return new LoadRecord(result, result.acksMonotonicMs.map((t) => t + offset));
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}
