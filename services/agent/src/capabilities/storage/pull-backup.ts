// PullBackup: a physical backup of a MariaDB instance, pulled from its agent (mariabackup
// --stream=mbstream at most pv_limit_mb MB/s, the same source side a rebuild uses) straight
// into a storage object. No staging copy: each chunk is hashed, sniffed for the backup's
// position files and written to the object's temporary file as it arrives. Asked for
// `compression` 'zstd' (over the data plane, or taken locally), the source compresses, and its end
// frame brings the position and the uncompressed size (mariadb/backup/backup-compression.ts). The
// object is committed only when the source ended its stream with OK (mariabackup exited 0)
// and the GTID position was found; anything else leaves no object.
//
// The bytes come over the source agent's data plane (a mutual TLS socket, authorised by
// the ticket of the manager's PullBackup call) when this agent has TLS, else over the
// StreamBackup rpc (`--insecure` agents have no plane); a source on this agent's own host is
// backed up by this agent itself, with no socket (localBackupBytes).

import { AgentFailure, planeEnabled, type PlaneBackupFacts, type PlaneBackupRequest, type StoragePullBackupReply, type StoragePullBackupRequest } from '@kcm/agent-api';
import type { Logger } from '@kcm/common';
import { gtidOfBackup, MbstreamSniffer } from './mbstream-sniffer';
import { ObjectSealer } from './sealed-stream';
import type { ObjectStore } from './store';
import { checkCompression, type BackupCompression } from '../mariadb/backup/backup-compression';
import { backupBytesOf, type BackupBytes } from '../../plane/backup-bytes';
import { receivedTransfer } from '../../metrics/transfers';
import type { PlaneSink } from '../../plane/handlers';

/** Bytes gathered before one write of the object's file. */
const WRITE_BATCH_BYTES = 4 * 1024 * 1024;

const AGENT_ADDRESS = /^[A-Za-z0-9.[\]:-]{1,255}:\d{1,5}$/;

/**
 * Runs the data plane's backup handler for `request` in this agent, its frames handed to the
 * sink (plane/handlers.ts sendBackup); resolves with what its end frame would carry.
 */
export type LocalBackupRun = (request: PlaneBackupRequest, sink: PlaneSink) => Promise<PlaneBackupFacts | void>;

/**
 * The backup of an instance on this agent's own host, taken by this agent: the same source
 * side as the data plane's (mariabackup into zstd, the same facts at the end), its frames
 * handed straight to the writer. Sending them through this agent's own TLS listener would
 * encrypt, copy through loopback TCP and decrypt every byte in the one process, for nothing:
 * the bytes never leave the host.
 */
function localBackupBytes(run: LocalBackupRun, request: PlaneBackupRequest): BackupBytes & { compressed: BackupCompression } {
  const stopping = new AbortController();
  let facts: PlaneBackupFacts | undefined;
  return {
    each: async (onData) => {
      const sink: PlaneSink = {
        signal: stopping.signal,
        async send(data) {
          if (stopping.signal.aborted) throw new Error('the backup was stopped');
          for (const piece of Buffer.isBuffer(data) ? [data] : data) {
            if (piece.length === 0) continue;
            const held = onData(piece);
            if (held) await held;
          }
        },
      };
      let result: PlaneBackupFacts | void;
      try {
        result = await run(request, sink);
      } catch (err) {
        // What the source side refused or failed with is reported as over the plane: a failed
        // backup of that instance (pullBackup names it), not this agent's own failure.
        throw new Error(err instanceof Error ? err.message : String(err), { cause: err });
      }
      if (result) facts = result;
    },
    stop: () => stopping.abort(),
    facts: () => facts,
    compressed: request.compress ?? '',
  };
}

/**
 * PullBackup. `local` takes the backup in this agent when the source instance is on its host
 * (localBackupBytes); any other source is pulled over its agent's data plane (or gRPC).
 */
export async function pullBackup(store: ObjectStore, req: StoragePullBackupRequest, logger: Logger, local?: { hostaddr: string; run: LocalBackupRun }): Promise<StoragePullBackupReply> {
  const source = req.source;
  if (!source || !AGENT_ADDRESS.test(source.agent_address)) throw new AgentFailure('invalid_argument', `source.agent_address ${JSON.stringify(source?.agent_address)} must be host:port`);
  if (!Number.isInteger(source.port) || source.port < 1 || source.port > 65535) throw new AgentFailure('invalid_argument', `source.port ${source.port} is not a TCP port`);
  if (!Number.isInteger(req.pv_limit_mb) || req.pv_limit_mb < 0) throw new AgentFailure('invalid_argument', `pv_limit_mb ${req.pv_limit_mb} must be an integer >= 0`);
  let asked: BackupCompression;
  try {
    asked = checkCompression(req.compression, 'compression');
  } catch (err) {
    throw new AgentFailure('invalid_argument', (err as Error).message);
  }
  // A sealed backup is always compressed: the position then comes in the source's end frame,
  // since nothing here can read it from sealed bytes (docs/backup-encryption.md).
  const sealKey = sealKeyOf(req.data_key);
  if (sealKey) asked = 'zstd';
  const writer = await store.writer(req.key);
  const sniffer = new MbstreamSniffer();
  const started = Date.now();
  const onThisHost = local !== undefined && source.hostaddr === local.hostaddr;
  const stream = onThisHost
    ? localBackupBytes(local.run, { v: 1, op: 'backup', port: source.port, pv_limit_mb: req.pv_limit_mb, ...(asked ? { compress: asked } : {}), ...(sealKey ? { seal_key: sealKey } : {}) })
    : backupBytesOf(source, req.pv_limit_mb, asked, sealKey);
  const compression = stream.compressed;
  // `--insecure` agents (gRPC, no data plane, no TLS) stream the mbstream as it is: the bytes
  // crossed the network in clear anyway, so they are sealed here, before they are stored.
  const sealedHere = sealKey && !compression ? new ObjectSealer(Buffer.from(sealKey, 'base64')) : undefined;
  let inFlight: Promise<void> = Promise.resolve();
  let firstByteMs: number | undefined;
  let receivedBytes = 0;
  const transfer = receivedTransfer('backup');
  try {
    // Receiving and writing overlap: while one batch goes to disk, the next is received (a
    // write awaited per message left the network idle during each disk write, and the disk
    // idle during each receive). At most one batch is being written, one waits for it and one
    // is being gathered (the stream holds back meanwhile);
    // a batch goes out as one writev of the pieces received, never joined into a copy.
    let gathered: Buffer[] = [];
    let gatheredBytes = 0;
    // Queues the gathered batch behind the write under way (one file position: writes never
    // overlap) and resolves when that earlier write is done, which is how long the stream waits.
    const flush = (): Promise<void> => {
      const batch = gathered;
      gathered = [];
      gatheredBytes = 0;
      const previous = inFlight;
      inFlight = previous.then(() => writer.writeAll(batch));
      inFlight.catch(() => {}); // awaited before the next batch or at the end
      return previous;
    };
    await stream.each((data) => {
      firstByteMs ??= Date.now() - started;
      receivedBytes += data.length;
      transfer.add(data.length);
      if (!compression) sniffer.push(data); // a compressed stream's position comes from its source
      for (const piece of sealedHere ? sealedHere.push(data) : [data]) {
        gathered.push(piece);
        gatheredBytes += piece.length;
      }
      // The stream waits only while a full batch waits for the previous write.
      return gatheredBytes >= WRITE_BATCH_BYTES ? flush() : undefined;
    });
    const lastByteMs = Date.now() - started;
    if (sealedHere) gathered.push(...sealedHere.end());
    if (gathered.length > 0) await flush();
    await inFlight;
    const facts = compression ? stream.facts() : undefined;
    if (compression && !facts) throw new AgentFailure('instance_failed', `the compressed backup stream of ${source.hostaddr}:${source.port} ended without its size and position`);
    const gtid = compression ? facts!.gtid_pos : gtidOfBackup(sniffer);
    if (gtid === undefined) {
      const problem = compression ? facts!.problem : sniffer.problem;
      throw new AgentFailure('instance_failed', `the backup stream of ${source.hostaddr}:${source.port} carried no GTID position${problem ? ` (${problem})` : ''}`);
    }
    const rawBytes = compression ? facts!.raw_bytes : receivedBytes;
    const meta = {
      ...req.meta, gtid_pos: gtid, source: `${source.hostaddr}:${source.port}`, format: 'mbstream', ...(compression ? { compression, raw_bytes: String(rawBytes) } : {}),
      // Where it was sealed: the manager refuses a reply without it (an agent from before encryption stored it in clear).
      ...(sealKey ? { sealed_at: sealedHere ? 'storage' : 'source' } : {}),
    };
    const commitStartMs = Date.now() - started;
    const object = await writer.commit(meta);
    const transferMs = Date.now() - started;
    // Where the transfer's time went: connecting and the source's start, the bytes, the last writes, fsync and manifest.
    const phases = { first_byte_ms: firstByteMs, last_byte_ms: lastByteMs, commit_start_ms: commitStartMs };
    const path = onThisHost ? 'local' : planeEnabled() ? 'plane' : 'grpc';
    logger.info({ key: object.key, bytes: object.bytes, raw_bytes: rawBytes, compression, gtid, ms: transferMs, ...phases, source: meta.source, path }, 'backup stored');
    transfer.end('ok');
    return { object, gtid_pos: gtid, transfer_ms: transferMs, raw_bytes: rawBytes, compression };
  } catch (err) {
    transfer.end('failed');
    stream.stop();
    await inFlight.catch(() => {}); // the file is closed only once no write is under way
    await writer.abort();
    if (err instanceof AgentFailure) throw err;
    throw new AgentFailure('instance_failed', `backup of ${source.hostaddr}:${source.port} into ${req.key} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/** The base64 seal_key of a PullBackup's data_key (32 bytes), or undefined when it has none. */
function sealKeyOf(dataKey: Buffer | Uint8Array | undefined): string | undefined {
  if (!dataKey || dataKey.length === 0) return undefined;
  if (dataKey.length !== 32) throw new AgentFailure('invalid_argument', 'data_key must be 32 bytes');
  return Buffer.from(dataKey).toString('base64');
}
