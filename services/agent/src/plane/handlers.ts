// What the data plane serves (server.ts): a physical backup of a local MariaDB instance
// (the same mariabackup command and rate limit as the StreamBackup rpc), and a stored object
// of an `fs` backup storage on this host (checked against its sha256 as it is read, like the
// storage's Get rpc). Each handler sends bytes through the sink and returns on success; what
// it throws becomes the end frame's status.

import { DATA_KEY_BYTES, ObjectSealer } from '../capabilities/storage/sealed-stream';
import type { Writable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { AgentFailure, agentStatusOf, type PlaneBackupFacts, type PlaneRequest } from '@kcm/agent-api';
import type { AgentContext } from '../capability';
import { spawnBackupOf } from '../capabilities/mariadb/backup/backup-stream';
import { checkCompression, sendCompressedPiped } from '../capabilities/mariadb/backup/backup-compression';
import { checkPort } from '../capabilities/mariadb/instance/instance-layout';
import { layoutOf } from '../capabilities/mariadb/instance/lifecycle';
import { GATHER_BYTES, gathered, rateLimited } from '../capabilities/mariadb/backup/rate-limit';
import { checkKey } from '../capabilities/storage/object-store';
import { storeFor } from '../capabilities/storage/store';

const MB = 1024 * 1024;
/** Bytes of a stored object read per frame. */
const READ_BYTES = 1024 * 1024;

export interface PlaneSink {
  /** Aborted when the receiver closed the connection. */
  signal: AbortSignal;
  /** Sends one data frame of `data` (pieces of one frame: written corked, never joined); resolves once the socket can take more. */
  send(data: Buffer | readonly Buffer[]): Promise<void>;
}

/** A failure with the status the end frame should carry (for a status agentStatusOf does not give). */
export class PlaneRefusal extends Error {
  constructor(readonly code: grpc.status, message: string) {
    super(message);
  }
}

/** What a handler resolves with goes into its OK end frame (a compressed backup's facts). */
type Handler = (ctx: AgentContext, request: PlaneRequest, sink: PlaneSink) => Promise<PlaneBackupFacts | void>;

function intField(request: object, name: string, min: number, max: number): number {
  const value = (request as Record<string, unknown>)[name];
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw new AgentFailure('invalid_argument', `${name} ${JSON.stringify(value)} must be an integer from ${min} to ${max}`);
  return value;
}

function stringField(request: object, name: string): string {
  const value = (request as Record<string, unknown>)[name];
  if (typeof value !== 'string' || value === '') throw new AgentFailure('invalid_argument', `${name} must be a non-empty string`);
  return value;
}

/** The sealer a backup request asks for with its seal_key (base64 of a 32-byte data key), if any. */
function sealerOf(request: PlaneRequest): ObjectSealer | undefined {
  const key = (request as { seal_key?: unknown }).seal_key;
  if (key === undefined || key === '') return undefined;
  const bytes = typeof key === 'string' ? Buffer.from(key, 'base64') : Buffer.alloc(0);
  if (bytes.length !== DATA_KEY_BYTES) throw new AgentFailure('invalid_argument', `seal_key must be the base64 of ${DATA_KEY_BYTES} bytes`);
  return new ObjectSealer(bytes);
}

export async function sendBackup(ctx: AgentContext, request: PlaneRequest, sink: PlaneSink): Promise<PlaneBackupFacts | void> {
  const port = intField(request, 'port', 1, 65535);
  const limitMb = intField(request, 'pv_limit_mb', 0, 1_000_000);
  let compress;
  try {
    compress = checkCompression((request as { compress?: unknown }).compress, 'compress');
  } catch (err) {
    throw new AgentFailure('invalid_argument', (err as Error).message);
  }
  const started = Date.now();
  // Sealed here, on the source's host, before any byte crosses the socket (docs/backup-encryption.md).
  const sealer = sealerOf(request);
  if (sealer && compress !== 'zstd') throw new AgentFailure('invalid_argument', 'seal_key needs compress zstd (the receiver reads the position from the end frame, not from sealed bytes)');
  if (compress === 'zstd') {
    // mariabackup writes into zstd: directly without a limit, through the agent's relay at the limit with one.
    const { tmpDir } = await layoutOf(ctx, checkPort(port));
    // When the backup tool exited, against the end of the transfer: which side of the pipe set the pace.
    let backupMs: number | undefined;
    const start = async (into: Writable | 'pipe', infoDir: string) => {
      const { backup } = await spawnBackupOf(ctx, port, sink.signal, { into, infoDir });
      backup.done.then(() => (backupMs = Date.now() - started), () => {});
      ctx.logger.info({ port, pv_limit_mb: limitMb, pid: backup.pid, compress, piped: into !== 'pipe' }, 'streaming backup over the data plane');
      return backup;
    };
    try {
      // Time spent waiting for the receiver to take frames: near 0 when the source sets the pace.
      let sendWaitMs = 0;
      const send = async (data: readonly Buffer[]) => {
        const before = performance.now();
        await sink.send(sealer ? data.flatMap((piece) => sealer.push(piece)) : data);
        sendWaitMs += performance.now() - before;
      };
      const facts = await sendCompressedPiped(start, tmpDir, send, sink.signal, limitMb * MB);
      if (sealer) await sink.send(sealer.end());
      ctx.logger.info({ port, raw_bytes: facts.raw_bytes, ms: Date.now() - started, backup_tool_ms: backupMs, send_wait_ms: Math.round(sendWaitMs) }, 'compressed backup streamed over the data plane');
      return facts;
    } catch (err) {
      if (sink.signal.aborted) throw new Error('the receiving agent closed the connection');
      throw err;
    }
  }
  const { backup } = await spawnBackupOf(ctx, port, sink.signal);
  ctx.logger.info({ port, pv_limit_mb: limitMb, pid: backup.pid, compress }, 'streaming backup over the data plane');
  let bytes = 0;
  try {
    // Pipe reads (<= 64 KiB) go out gathered into 1 MiB frames: fewer TLS writes per byte (gathered()).
    for await (const pieces of gathered(rateLimited(backup.stdout, limitMb * MB), GATHER_BYTES)) {
      await sink.send(pieces);
      for (const piece of pieces) bytes += piece.length;
    }
    await backup.done;
  } catch (err) {
    backup.kill();
    if (sink.signal.aborted) throw new Error('the receiving agent closed the connection');
    throw err;
  }
  ctx.logger.info({ port, bytes, ms: Date.now() - started }, 'backup streamed over the data plane');
}

async function sendObject(_ctx: AgentContext, request: PlaneRequest, sink: PlaneSink): Promise<void> {
  const store = storeFor(stringField(request, 'root'));
  const key = checkKey(stringField(request, 'key'));
  try {
    for await (const data of store.read(key, READ_BYTES)) {
      if (sink.signal.aborted) return;
      await sink.send(data);
    }
  } catch (err) {
    // A corrupt object ends the transfer with DATA_LOSS, as the storage's Get rpc does: the reader must not use what it got.
    if (err instanceof AgentFailure && err.kind === 'failed_precondition') throw new PlaneRefusal(grpc.status.DATA_LOSS, err.message);
    throw new PlaneRefusal(agentStatusOf(err), err instanceof Error ? err.message : String(err));
  }
}

export const planeHandlers: ReadonlyMap<string, Handler> = new Map<string, Handler>([
  ['backup', sendBackup],
  ['get', sendObject],
]);
