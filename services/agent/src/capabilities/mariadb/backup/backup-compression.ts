// Compression of a backup stream at its source, and its undoing on a restore.
//
// Backups cross the data plane compressed with `zstd --fast=1` (a native, multi-threaded child
// process): every byte saved is a byte less to encrypt, decrypt, hash and write on two
// agents that share the machine with the engines (bench/backup/README.md, "Compression").
// The stored object is the zstd stream, and its sha256 covers exactly those stored bytes.
//
// mariabackup's stdout goes into zstd: straight through an OS pipe when no stream limit is
// set, so the agent never touches the uncompressed bytes (they were most of its CPU per GB);
// with a limit (the manager's default, 100 MB/s) through a lean relay in the agent that
// holds them to the limit. The limit is on the shard's own reads, so on the uncompressed
// bytes: pacing zstd's output instead would let a compressible stretch (empty pages, zeros)
// run at full speed, since zstd then writes almost nothing to hold back. The position comes
// from the info file mariabackup also writes to an --extra-lsndir, the uncompressed size from
// zstd's own summary (backup-info.ts); the relay never parses the stream.
// Either way the source reports size and position in the transfer's end frame, since the
// storage agent cannot read them from the compressed bytes.

import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Writable } from 'node:stream';
import type { PlaneBackupFacts } from '@kcm/agent-api';
import { spawnPiped, type PipedProcess } from '../../../ops/exec';
import { gtidOfBackupInfo, rawBytesOfZstdSummary, readBackupInfo } from './backup-info';
import { GATHER_BYTES, gathered, relayAtMost } from './rate-limit';

/** The compressions a backup set may record; '' is the mbstream as mariabackup wrote it. */
export const BACKUP_COMPRESSIONS = ['', 'zstd'] as const;
export type BackupCompression = (typeof BACKUP_COMPRESSIONS)[number];

export const zstdTool = '/usr/bin/zstd';
const TIMEOUT_MS = 6 * 3600_000;
// --fast=1: on InnoDB pages of incompressible rows with free space (bench/backup) it stores
// the same 0.65 as -1 at about 40% of the CPU (0.38 vs 0.93 s per 328 MB), since it gives up
// on random bytes sooner; CPU is what the backup is short of on a shared host.
// -T2: zstd reads, compresses and writes in parallel, so neither pipe waits on the other.
const COMPRESS_ARGS = ['--fast=1', '-T2', '-c'];

/**
 * `zstd -d`, for a restore or a rebuild: its stdout to the agent, or given `into` (the write
 * end of another child's stdin, e.g. mbstream's) straight into that process through an OS pipe.
 */
export function spawnDecompressor(into: Writable | 'pipe' = 'pipe'): PipedProcess {
  return spawnPiped(zstdTool, ['-d', '-q', '-c'], { input: 'pipe', output: into, timeoutMs: TIMEOUT_MS });
}

export function checkCompression(value: unknown, field: string): BackupCompression {
  if (value === undefined || value === null || value === '') return '';
  if (value === 'zstd') return 'zstd';
  throw new Error(`${field} ${JSON.stringify(value)} must be '' (none) or 'zstd'`);
}

/**
 * Starts the backup tool with its stdout into `into` (or, given 'pipe', to the agent) and its
 * info file written to `infoDir` as well.
 */
export type PipedBackupSource = (into: Writable | 'pipe', infoDir: string) => Promise<PipedProcess>;

/**
 * The backup `start`s, its stdout into `zstd --fast=1` -> `send`, piece by piece as zstd
 * writes them, gathered into groups of at least 1 MiB: straight through an OS pipe when `bytesPerSecond` is 0 (the agent reads only
 * zstd's output), else relayed at most that fast. `infoDirParent`
 * holds the per-backup directory for the tool's info file (removed at the end). Resolves,
 * once both processes exited 0, with the uncompressed size (zstd's summary) and position
 * (the info file); rejects (after killing both) on any failure.
 */
export async function sendCompressedPiped(start: PipedBackupSource, infoDirParent: string, send: (pieces: readonly Buffer[]) => Promise<void>, signal: AbortSignal, bytesPerSecond = 0): Promise<PlaneBackupFacts> {
  const infoDir = await mkdtemp(path.join(infoDirParent, 'kcm-backup-info-'));
  // -vv: the summary line gives sizes in bytes; --no-progress keeps stderr to that summary.
  const zstd = spawnPiped(zstdTool, [...COMPRESS_ARGS, '-vv', '--no-progress'], { input: 'pipe', output: 'pipe', timeoutMs: TIMEOUT_MS, signal });
  let backup: PipedProcess | undefined;
  try {
    let feed: Promise<void>;
    if (bytesPerSecond > 0) {
      backup = await start('pipe', infoDir);
      feed = relayAtMost(backup.stdout, zstd.stdin, bytesPerSecond);
    } else {
      backup = await start(zstd.stdin, infoDir);
      // Only the backup holds the pipe's write end now: zstd sees EOF when the backup exits.
      zstd.stdin.destroy();
      feed = Promise.resolve();
    }
    const relay = (async () => {
      for await (const pieces of gathered(zstd.stdout as AsyncIterable<Buffer>, GATHER_BYTES)) await send(pieces);
    })();
    const all = [feed, relay, backup.done, zstd.done];
    for (const p of all) p.catch(() => {}); // the first failure is what Promise.all reports
    const [, , , zstdLog] = await Promise.all(all);
    const rawBytes = rawBytesOfZstdSummary(zstdLog as string);
    if (rawBytes === undefined) throw new Error(`zstd reported no sizes (its stderr: ${JSON.stringify((zstdLog as string).slice(-300))})`);
    const info = await readBackupInfo(infoDir);
    const gtid = gtidOfBackupInfo(info);
    const problem = gtid !== undefined ? '' : info ? 'its info file names no GTID position (binlog_pos)' : `it wrote no info file into ${infoDir}`;
    return { raw_bytes: rawBytes, ...(gtid === undefined ? {} : { gtid_pos: gtid }), ...(problem ? { problem } : {}) };
  } catch (err) {
    backup?.kill();
    zstd.kill();
    throw err;
  } finally {
    await rm(infoDir, { recursive: true, force: true });
  }
}
