// A remote instance's backup stream as this agent receives it: over the source agent's data
// plane (mutual TLS, compressed when asked) or, for `--insecure` agents, over the
// StreamBackup rpc. Used by a standby's rebuild (mariadb/backup/backup-stream.ts receiveBackup) and
// by a storage's PullBackup (storage/pull-backup.ts); apart from both so neither imports the
// other's module (which imported the plane's handlers, which import the backup source).

import type * as grpc from '@grpc/grpc-js';
import { agentClient, MariaDbAgentService, planeEnabled, planeReceive, type MariaDbBackupChunk, type MariaDbBackupSource, type MariaDbStreamBackupRequest, type PlaneBackupFacts, type PlaneReception } from '@kcm/agent-api';
import type { BackupCompression } from '../capabilities/mariadb/backup/backup-compression';

export interface BackupBytes {
  /**
   * Hands every piece of the stream to `onData`, in order; a promise it returns holds the
   * stream back until it settles. Resolves once the source ended its stream with OK.
   * Called once.
   */
  each(onData: (data: Buffer) => void | Promise<void>): Promise<void>;
  stop(): void;
  /** A compressed stream's facts from the source, once `each` resolved. */
  facts(): PlaneBackupFacts | undefined;
}

/**
 * The source's backup stream, over the data plane or gRPC; `stop` ends it early. `compress`
 * is honoured over the data plane only (`--insecure` agents stream the mbstream as it is):
 * callers look at `compressed`. `sealKey` (base64 data key, with compress only) has the source
 * seal what it sends (docs/backup-encryption.md).
 */
export function backupBytesOf(source: MariaDbBackupSource, pvLimitMb: number, compress: BackupCompression = '', sealKey?: string): BackupBytes & { compressed: BackupCompression } {
  if (planeEnabled()) {
    let facts: PlaneBackupFacts | undefined;
    let reception: PlaneReception | undefined;
    let stopped = false;
    const request = { op: 'backup' as const, port: source.port, pv_limit_mb: pvLimitMb, ...(compress ? { compress } : {}), ...(sealKey ? { seal_key: sealKey } : {}) };
    return {
      each: (onData) => {
        // 'data' events, not async iteration: a receiver spends less CPU per GB (planeReceive).
        reception = planeReceive(source.agent_address, request, onData, { onTrailer: (t) => (facts = t.backup) });
        if (stopped) reception.stop();
        return reception.done;
      },
      stop: () => {
        stopped = true;
        reception?.stop();
      },
      facts: () => facts,
      compressed: compress,
    };
  }
  const client = agentClient(MariaDbAgentService, source.agent_address);
  const call = (client as unknown as { StreamBackup(req: MariaDbStreamBackupRequest): grpc.ClientReadableStream<MariaDbBackupChunk> }).StreamBackup({
    port: source.port,
    pv_limit_mb: pvLimitMb,
  });
  return {
    each: async (onData) => {
      try {
        for await (const chunk of call as AsyncIterable<MariaDbBackupChunk>) await onData(chunk.data);
      } finally {
        client.close();
      }
    },
    stop: () => {
      call.cancel();
      client.close();
    },
    facts: () => undefined,
    compressed: '',
  };
}
