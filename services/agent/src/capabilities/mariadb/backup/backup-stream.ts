// A physical copy of an instance, streamed agent to agent: over the source agent's data
// plane (mutual TLS, compressed at the source) or, between `--insecure` agents, over gRPC.
//
//   source agent: mariabackup --backup --stream=mbstream  ->  rate limit (pv_limit)  ->  [zstd --fast=1]  ->  plane frames | StreamBackup chunks
//   target agent: frames | chunks  ->  [zstd -d]  ->  mbstream -x -C <staging>
//
// mariabackup logs in as root over the instance's socket (unix_socket auth, the agent runs
// as root), so no password exists on either side of the pipe. The stream ends with gRPC
// status OK only when mariabackup exited 0; anything else ends it with an error, and the
// target discards what it extracted.

import { once } from 'node:events';
import type { Writable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import type { AgentContext } from '../../../capability';
import { checkPort } from '../instance/instance-layout';
import { engineOf } from '../instance/engine';
import { layoutOf, runningPid } from '../instance/lifecycle';
import { spawnPiped, type PipedProcess } from '../../../ops/exec';
import { coalesced, rateLimited } from './rate-limit';
import { agentStatusOf, type MariaDbBackupChunk, type MariaDbBackupSource, type MariaDbStreamBackupRequest } from '@kcm/agent-api';
import { backupBytesOf } from '../../../plane/backup-bytes';
import { receivedTransfer } from '../../../metrics/transfers';
import { spawnDecompressor, type BackupCompression } from './backup-compression';

const BACKUP_TIMEOUT_MS = 6 * 3600_000;
const MB = 1024 * 1024;

/** The StreamBackup rpc: the source side. */
export function streamBackupHandler(ctx: AgentContext): grpc.handleServerStreamingCall<MariaDbStreamBackupRequest, MariaDbBackupChunk> {
  return (call) => {
    sendBackup(ctx, call).catch((err: unknown) => {
      ctx.logger.error({ err, rpc: 'StreamBackup', port: call.request.port }, 'backup stream failed');
      // grpc-js turns an 'error' event on a server stream into the call's final status.
      call.emit('error', { code: agentStatusOf(err), details: err instanceof Error ? err.message : String(err) });
    });
  };
}

/** Where a backup's stream goes other than to the agent, and where its info file goes as well. */
export interface BackupOutput {
  /** The write end of another process's stdin (backup-compression.ts): the stream bypasses the agent; 'pipe': to the agent. */
  into: Writable | 'pipe';
  /** mariabackup's --extra-lsndir: its info file (with the backup's position) lands here too. */
  infoDir: string;
}

/**
 * mariabackup --backup --stream=mbstream of the instance on `port`, its stdout piped to the
 * caller (StreamBackup here, the data plane's `backup` in plane/handlers.ts), or into
 * `output.into`.
 */
export async function spawnBackupOf(ctx: AgentContext, port: number, signal: AbortSignal, output?: BackupOutput): Promise<{ backup: PipedProcess; port: number; tmpDir: string }> {
  const layout = await layoutOf(ctx, checkPort(port));
  if (!(await runningPid(layout))) throw new Error(`instance on port ${layout.port} is not running; cannot back it up`);
  // mariabackup of the server's own version: an older one cannot read what a newer server wrote.
  const { backup: mariabackup } = await engineOf(ctx, layout.port);
  const backup = spawnPiped(
    mariabackup,
    [
      `--defaults-file=${layout.myCnf}`,
      '--backup',
      '--stream=mbstream',
      `--target-dir=${layout.tmpDir}`,
      '--user=root',
      `--socket=${layout.socket}`,
      '--slave-info',
      ...(output ? [`--extra-lsndir=${output.infoDir}`] : []),
    ],
    { input: 'ignore', output: output ? output.into : 'pipe', timeoutMs: BACKUP_TIMEOUT_MS, signal, cwd: layout.instanceDir },
  );
  return { backup, port: layout.port, tmpDir: layout.tmpDir };
}

async function sendBackup(ctx: AgentContext, call: grpc.ServerWritableStream<MariaDbStreamBackupRequest, MariaDbBackupChunk>): Promise<void> {
  const abort = new AbortController();
  call.on('cancelled', () => abort.abort());
  const started = Date.now();
  const { backup, port } = await spawnBackupOf(ctx, call.request.port, abort.signal);
  const layout = { port };
  ctx.logger.info({ port: layout.port, pv_limit_mb: call.request.pv_limit_mb, pid: backup.pid }, 'streaming backup');
  let bytes = 0;
  try {
    for await (const piece of coalesced(rateLimited(backup.stdout, Math.max(0, call.request.pv_limit_mb) * MB), MB)) {
      bytes += piece.length;
      if (!call.write({ data: piece })) await drainOrCancel(call);
      if (abort.signal.aborted) throw new Error('the receiving agent cancelled the stream');
    }
    await backup.done;
  } catch (err) {
    backup.kill();
    throw err;
  }
  call.end();
  ctx.logger.info({ port: layout.port, bytes, ms: Date.now() - started }, 'backup streamed');
}

export interface ReceivedCopy {
  /** Bytes of the mbstream (before compression). */
  bytes: number;
  /** Bytes that crossed the connection: fewer than `bytes` when the source compressed them. */
  wireBytes: number;
  compression: BackupCompression;
  transferMs: number;
}

/**
 * The target side (`mbstream` of the target's engine): pulls a source's backup (data plane, else StreamBackup) into `mbstream -x`
 * in stagingDir. Over the data plane the source compresses it as for a stored backup (`zstd
 * --fast=1`), so a third fewer bytes are encrypted, sent, decrypted and piped here; `zstd -d`
 * writes into mbstream through an OS pipe. The rate limit holds on the uncompressed bytes
 * (the source's relay), as for a backup.
 */
export async function receiveBackup(source: MariaDbBackupSource, pvLimitMb: number, stagingDir: string, mbstream: string): Promise<ReceivedCopy> {
  const started = Date.now();
  const extract = spawnPiped(mbstream, ['-x', '-C', stagingDir], { input: 'pipe', output: 'ignore', timeoutMs: BACKUP_TIMEOUT_MS });
  const stream = backupBytesOf(source, pvLimitMb, 'zstd'); // compressed over the data plane only
  let unzstd: PipedProcess | undefined;
  if (stream.compressed) {
    unzstd = spawnDecompressor(extract.stdin);
    // Only zstd holds the write end of mbstream's stdin now: mbstream sees EOF when zstd exits.
    extract.stdin.destroy();
  }
  const input = unzstd ? unzstd.stdin : extract.stdin;
  const exitedEarly = (p: PipedProcess, what: string) => p.done.then(() => {
    throw new Error(`${what} exited before the stream ended`);
  });
  const eitherDied = Promise.race([exitedEarly(extract, 'mbstream'), ...(unzstd ? [exitedEarly(unzstd, 'zstd -d')] : [])]);
  eitherDied.catch(() => {}); // only raced against while waiting for drain
  let wireBytes = 0;
  const transfer = receivedTransfer('rebuild');
  try {
    await stream.each((data) => {
      wireBytes += data.length;
      transfer.add(data.length);
      if (!input.write(data)) return Promise.race([once(input, 'drain').then(() => {}), eitherDied]);
    });
    input.end();
    await Promise.all([extract.done, ...(unzstd ? [unzstd.done] : [])]);
    transfer.end('ok');
  } catch (err) {
    transfer.end('failed');
    stream.stop();
    unzstd?.kill();
    extract.kill();
    throw new Error(`copy from ${source.hostaddr}:${source.port} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  const bytes = stream.compressed ? (stream.facts()?.raw_bytes ?? wireBytes) : wireBytes;
  return { bytes, wireBytes, compression: stream.compressed, transferMs: Date.now() - started };
}

/**
 * Waits until the stream drains or the receiver cancels. Both listeners are removed when
 * either fires: a backup writes thousands of chunks, and one leftover listener per
 * chunk grows without bound (MaxListenersExceededWarning).
 */
export async function drainOrCancel(call: NodeJS.EventEmitter): Promise<void> {
  const settled = new AbortController();
  try {
    await Promise.race([once(call, 'drain', { signal: settled.signal }), once(call, 'cancelled', { signal: settled.signal })]);
  } finally {
    settled.abort();
  }
}
