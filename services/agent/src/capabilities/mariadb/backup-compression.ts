// Compression of a backup stream at its source, and its undoing on a restore.
//
// Backups cross the data plane compressed with `zstd -1` (a native, multi-threaded child
// process): every byte saved is a byte less to encrypt, decrypt, hash and write on two
// agents that share the machine with the engines (bench/backup/README.md, "Compression").
// The source still reads the uncompressed mbstream itself, on its way into zstd: it counts
// it and reads its position files (MbstreamSniffer), which the storage agent can no longer
// see in the compressed bytes, and reports both in the transfer's end frame. The stored
// object is the zstd stream, and its sha256 covers exactly those stored bytes.

import type { Writable } from 'node:stream';
import type { PlaneBackupFacts } from '@kcm/agent-api';
import { spawnPiped, type PipedProcess } from '../../ops/exec';
import { gtidOfBackup, MbstreamSniffer } from '../storage/mbstream-sniffer';
import { rateLimited } from './rate-limit';

/** The compressions a backup set may record; '' is the mbstream as mariabackup wrote it. */
export const BACKUP_COMPRESSIONS = ['', 'zstd'] as const;
export type BackupCompression = (typeof BACKUP_COMPRESSIONS)[number];

export const zstdTool = '/usr/bin/zstd';
const TIMEOUT_MS = 6 * 3600_000;

/** `zstd -d`, for a restore: its stdout goes to mbstream as the process's stdin (an OS pipe, no copy through the agent). */
export function spawnDecompressor(): PipedProcess {
  return spawnPiped(zstdTool, ['-d', '-q', '-c'], { input: 'pipe', output: 'pipe', timeoutMs: TIMEOUT_MS });
}

export function checkCompression(value: unknown, field: string): BackupCompression {
  if (value === undefined || value === null || value === '') return '';
  if (value === 'zstd') return 'zstd';
  throw new Error(`${field} ${JSON.stringify(value)} must be '' (none) or 'zstd'`);
}

/** Resolves once `stream` can take more, or has closed (its process died: the caller sees that through `done`). */
function writable(stream: Writable): Promise<void> {
  return new Promise((resolve) => {
    const settle = () => {
      stream.off('drain', settle);
      stream.off('close', settle);
      stream.off('error', settle);
      resolve();
    };
    stream.once('drain', settle);
    stream.once('close', settle);
    stream.once('error', settle);
  });
}

/**
 * mariabackup's stdout at most `bytesPerSecond` (0 = no limit: the limit is on the shard's
 * own reads, so on the uncompressed bytes) -> `zstd -1` -> `send`, piece by piece as zstd
 * writes them. Resolves, once mariabackup and zstd both exited 0, with the uncompressed
 * stream's size and position; rejects (after killing zstd) on any failure.
 */
export async function sendCompressed(backup: PipedProcess, bytesPerSecond: number, send: (data: Buffer) => Promise<void>, signal: AbortSignal): Promise<PlaneBackupFacts> {
  // -T2: zstd reads, compresses and writes in parallel, so neither pipe waits on the other.
  const zstd = spawnPiped(zstdTool, ['-1', '-T2', '-q', '-c'], { input: 'pipe', output: 'pipe', timeoutMs: TIMEOUT_MS, signal });
  const sniffer = new MbstreamSniffer();
  let rawBytes = 0;
  const feed = (async () => {
    for await (const piece of rateLimited(backup.stdout, bytesPerSecond)) {
      sniffer.push(piece);
      rawBytes += piece.length;
      if (!zstd.stdin.write(piece)) await writable(zstd.stdin);
    }
    zstd.stdin.end();
  })();
  const relay = (async () => {
    for await (const out of zstd.stdout as AsyncIterable<Buffer>) await send(out);
  })();
  const all = [feed, relay, backup.done, zstd.done];
  for (const p of all) p.catch(() => {}); // the first failure is what Promise.all reports
  try {
    await Promise.all(all);
  } catch (err) {
    zstd.kill();
    throw err;
  }
  const gtid = gtidOfBackup(sniffer);
  return { raw_bytes: rawBytes, ...(gtid === undefined ? {} : { gtid_pos: gtid }), ...(sniffer.problem ? { problem: sniffer.problem } : {}) };
}
