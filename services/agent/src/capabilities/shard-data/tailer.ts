// Phase 2 of a move: the catch-up, run by the agent of the source master's host. Runs
// `mariadb-binlog --read-from-remote-server --stop-never` against that master from a
// recorded position (as the cluster's
// replication account, its password in a 0600 defaults file, never in argv), takes the
// changed keys of the moved table from its text (binlog-rows.ts) and re-copies those rows
// (resync.ts), in batches. It tracks the binlog position up to which every change is
// applied, so the cut-over can wait for "applied up to the source's position now".
//
// Why a binlog reader and not MariaDB's own replication with filters: every shard writes
// GTID domain 0 with gtid_strict_mode, so a named connection on the target master would
// binlog the source's GTIDs out of order (refused) for its standbys; and it would need
// privileges (SUPER/REPLICATION SLAVE ADMIN) that only the agent's localhost account has.
// Why mariadb-binlog and not an npm reader: it is MariaDB's own decoder, installed with the
// server on every shard host, and no npm reader decodes MariaDB 10.11's
// events fully; only primary keys are read from its output.
//
// mariadb-binlog writes its text through a fully buffered stdio stream and flushes it only
// after some events (a commit, a query): the events that end a binlog file and begin the
// next (Rotate, Format_description, Gtid_list, Binlog_checkpoint) stayed in its buffer until
// the next transaction, so after a FLUSH BINARY LOGS (the binlog archiver flushes every
// master with new writes every few seconds) on a quiet source the catch-up never saw the end
// of the binlog, and a wait for SHOW MASTER STATUS's position ran out. It runs under
// `stdbuf -o0` writing to its stdout (a file): each event reaches the file as it is printed.

import { createWriteStream, watch, type FSWatcher } from 'node:fs';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type mysql from 'mysql2/promise';
import type { Logger } from '@kcm/common';
import { AgentFailure, type ShardLogin } from '@kcm/agent-api';
import { processAlive, spawnPiped, type PipedProcess } from '../../ops/exec';
import { atOrPast, BinlogRowParser, type BinlogPosition, type KeyValue } from './binlog-rows';
import { keyId, resyncKeys } from './resync';
import type { TableShape } from './shard-sql';

export interface TailerOptions {
  /** The source master, as the replication account (binlog dump). */
  binlogLogin: ShardLogin;
  /** Sessions for the re-copy: source and target, as the storage account. */
  src: mysql.Connection;
  dst: mysql.Connection;
  from: { db: string; table: string };
  to: { db: string; table: string };
  shape: TableShape;
  start: BinlogPosition;
  logger: Logger;
  /** Keys re-copied in one batch at most. */
  batchKeys?: number;
  mariadbBinlog?: string;
  /** coreutils' stdbuf, which makes mariadb-binlog's output unbuffered (default `stdbuf` on the PATH). */
  stdbuf?: string;
  /** The reader's fallback poll of mariadb-binlog's output, ms (default 10; a write wakes it at once). */
  pollMs?: number;
}

/**
 * The longest a catch-up's mariadb-binlog may run (spawnPiped needs a limit): far past any
 * move, under setTimeout's 24.8-day ceiling. A catch-up that reaches it fails, and the
 * manager starts it again from the last position it recorded.
 */
const BINLOG_READER_MAX_MS = 20 * 24 * 3600_000;

export class BinlogTailer {
  private child: PipedProcess | null = null;
  private tmp = '';
  private readonly parser: BinlogRowParser;
  private pending = new Map<string, KeyValue[]>();
  /** The last transaction boundary read, and the one up to which everything is applied. */
  private readAt: BinlogPosition;
  private appliedAt: BinlogPosition;
  private failure: Error | null = null;
  private flushing: Promise<void> | null = null;
  private stopped = false;
  private waiters: (() => void)[] = [];
  private reading: Promise<void> | null = null;
  /** Set when mariadb-binlog wrote since the reader last looked; ends its nap early. */
  private written = false;
  private endNap: (() => void) | null = null;
  /** A flush asked for while one runs: it runs next, after what the reader read meanwhile. */
  private flushAgain: Promise<void> | null = null;
  rowsResynced = 0;
  /** Binlog files the catch-up has moved on from (rotations read). */
  rotationsCrossed = 0;

  constructor(private readonly o: TailerOptions) {
    this.parser = new BinlogRowParser(o.from.db, o.from.table, o.shape.key.map((k) => k.ordinal), o.start.file);
    this.readAt = { ...o.start };
    this.appliedAt = { ...o.start };
  }

  get applied(): BinlogPosition {
    return { ...this.appliedAt };
  }

  /** Why the reader or an apply failed (null: it has not): such a catch-up applies nothing more. */
  get failed(): Error | null {
    return this.failure;
  }

  async start(): Promise<void> {
    this.tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-move-'));
    const defaults = path.join(this.tmp, 'client.cnf');
    const output = path.join(this.tmp, 'binlog.txt');
    const { host, port, user, password } = this.o.binlogLogin;
    await writeFile(defaults, `[client]\nhost=${host}\nport=${port}\nuser=${user}\npassword=${password}\n`, { mode: 0o600 });
    const args = [
      `--defaults-extra-file=${defaults}`,
      '--read-from-remote-server',
      '--base64-output=DECODE-ROWS',
      '--verbose',
      `--start-position=${this.o.start.pos}`,
      '--stop-never',
      // A server id no shard member uses, unique per tailer: the master drops an older dump with the same id.
      `--stop-never-slave-server-id=${2_000_000_000 + Math.floor(Math.random() * 100_000_000)}`,
      `--table=${this.o.from.table}`,
      this.o.start.file,
    ];
    await writeFile(output, '', { mode: 0o600 });
    // Stopped while starting (the leadership term ended): nothing to spawn.
    if (this.stopped) return;
    // Its stdout is the output file, unbuffered (stdbuf -o0): each event is one write, and
    // each write wakes the reader. --result-file would open its own buffered stream. The
    // file stream is handed over by its descriptor (spawnPiped's `output`), once open.
    const sink = createWriteStream(output, { flags: 'a' });
    await once(sink, 'open');
    // mariadb-binlog --stop-never never ends by itself, and writing to a file it would not
    // notice an agent that was SIGKILLed: a small sh watchdog ends it when our end of its
    // stdin closes (stop(), or this process dying). Arguments go in as "$@", never spliced.
    const watchdog = 'exec 3<&0; "$0" "$@" </dev/null & child=$!; (read -r _ <&3; kill "$child" 2>/dev/null) & wait "$child"';
    let child: PipedProcess;
    try {
      child = spawnPiped('sh', ['-c', watchdog, this.o.stdbuf ?? 'stdbuf', '-o0', this.o.mariadbBinlog ?? 'mariadb-binlog', ...args], { input: 'pipe', output: sink as Writable, timeoutMs: BINLOG_READER_MAX_MS });
    } finally {
      sink.close(); // the child has its own copy
    }
    this.child = child;
    // It never ends by itself: an end before stop() (exit 0 too) is the catch-up's failure.
    child.done.then(
      () => !this.stopped && this.fail(new Error('mariadb-binlog ended')),
      (err: Error) => !this.stopped && this.fail(new Error(`mariadb-binlog ended: ${err.message}`)),
    );
    const file = await open(output, 'r');
    // Woken by each write mariadb-binlog makes (inotify), the 10 ms poll only a fallback: a
    // cut-over holding writes waits for the last events, and a 10 ms nap was up to 10 ms of
    // its window.
    let watcher: FSWatcher | null = null;
    try {
      watcher = watch(output, { persistent: false }, () => this.wakeReader());
      watcher.on('error', () => {});
    } catch {
      watcher = null;
    }
    // Reads what mariadb-binlog wrote since the last turn, then applies the keys, a batch at a time.
    const loop = async () => {
      let partial = '';
      const buffer = Buffer.alloc(1 << 20);
      try {
        while (!this.stopped && !this.failure) {
          for (;;) {
            const { bytesRead } = await file.read(buffer, 0, buffer.length, null);
            if (bytesRead === 0) break;
            const lines = (partial + buffer.toString('latin1', 0, bytesRead)).split('\n');
            partial = lines.pop() ?? '';
            for (const line of lines) this.onLine(line);
          }
          await this.flush().catch((err) => this.fail(err as Error));
          await this.nap();
        }
      } finally {
        watcher?.close();
        await file.close().catch(() => {});
      }
    };
    this.reading = loop();
  }

  private wakeReader(): void {
    this.written = true;
    this.endNap?.();
  }

  /** The reader's pause between polls: until mariadb-binlog writes again, 10 ms (pollMs) at most. */
  private nap(): Promise<void> {
    if (this.written || this.stopped) {
      this.written = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        this.endNap = null;
        this.written = false;
        clearTimeout(t);
        resolve();
      };
      const t = setTimeout(done, this.o.pollMs ?? 10);
      this.endNap = done;
    });
  }

  private onLine(line: string): void {
    for (const item of this.parser.feed(line)) {
      if (item.kind === 'key') this.pending.set(keyId(item.key), item.key);
      else {
        if (item.at.file !== this.readAt.file) {
          this.rotationsCrossed++;
          this.o.logger.info({ table: `${this.o.from.db}.${this.o.from.table}`, from: this.readAt.file, to: item.at.file, rotations: this.rotationsCrossed }, 'move catch-up crossed a binlog rotation');
        }
        this.readAt = item.at;
      }
    }
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.o.logger.warn({ err: err.message }, 'move catch-up failed');
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Applies the keys read so far; afterwards everything up to the boundary read before it is applied. */
  flush(): Promise<void> {
    // One already running took its position before this call, and the reader may have read
    // on since (a cut-over's flush runs beside the reader): one more run after it, shared by
    // every call made meanwhile, so what was read before this call is applied when it resolves.
    if (this.flushing) {
      this.flushAgain ??= this.flushing
        .catch(() => {})
        .then(() => {
          this.flushAgain = null;
          return this.flush();
        });
      return this.flushAgain;
    }
    const run = async () => {
      // Yield first: a run with nothing to apply would otherwise end (and clear `flushing`) before it is stored.
      await null;
      try {
        const upTo = { ...this.readAt };
        const batch = this.o.batchKeys ?? 500;
        while (this.pending.size > 0) {
          const keys = [...this.pending.entries()].slice(0, batch);
          for (const [id] of keys) this.pending.delete(id);
          this.rowsResynced += await resyncKeys(this.o.src, this.o.dst, this.o.from, this.o.to, this.o.shape, keys.map(([, k]) => k));
        }
        if (atOrPast(upTo, this.appliedAt)) this.appliedAt = upTo;
        this.wake();
      } finally {
        this.flushing = null;
      }
    };
    this.flushing = run();
    return this.flushing;
  }

  /** Resolves once every change up to `at` is applied on the target; throws on timeout or a failed reader. */
  async waitFor(at: BinlogPosition, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.failure) throw new AgentFailure('instance_failed', `catch-up from the source binlog failed: ${this.failure.message}`, { cause: this.failure });
      if (atOrPast(this.appliedAt, at)) return;
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
      const left = deadline - Date.now();
      // failed_precondition: the catch-up is behind, not broken (instance_failed is for a failed reader).
      if (left <= 0) throw new AgentFailure('failed_precondition', `catch-up did not reach ${at.file}:${at.pos} within ${timeoutMs} ms (applied up to ${this.appliedAt.file}:${this.appliedAt.pos})`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 50));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Reads and applies no more (what is being applied is finished first); stop() then ends the reader. */
  async halt(): Promise<void> {
    this.stopped = true;
    this.endNap?.();
    await this.reading?.catch(() => {});
    await this.flushing?.catch(() => {});
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.endNap?.();
    if (this.child) {
      // The watchdog's exit, not `done`: that waits for stderr to close, which a leftover
      // grandchild could hold open.
      const child = this.child;
      child.stdin.end();
      const until = Date.now() + 2000;
      while (processAlive(child.pid) && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
      if (processAlive(child.pid)) child.kill();
    }
    await this.reading?.catch(() => {});
    await this.flushing?.catch(() => {});
    if (this.tmp) await rm(this.tmp, { recursive: true, force: true });
    this.wake();
  }
}
