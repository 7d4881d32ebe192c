// The bulk data plane's wire format (plane/client.ts, services/agent/src/plane/): after the
// mutual TLS handshake the caller sends one request line (JSON, '\n'-terminated); the agent
// answers with data frames and one end frame carrying the outcome:
//
//   data frame: length u32be (>= 1) | that many bytes
//   end frame:  0 u32be | trailer length u32be | trailer JSON { code, details }
//
// `code` is a gRPC status number (0 = OK), so a failure reads the same as over gRPC
// (AgentCallError, catalog errors). A stream that ends without its end frame is a broken
// transfer, never a short success. The reader yields the data as views of the received
// chunks: a frame split across chunks is never gathered into a copy.

export const MAX_PLANE_REQUEST_BYTES = 64 * 1024;
const MAX_TRAILER_BYTES = 64 * 1024;

export interface PlaneRequestBase {
  v: 1;
  /** The manager's transfer ticket an agent-role caller presents (tls/ticket.ts), relayed as is. */
  ticket?: { ticket: string; signer: string };
}

/** A physical backup of the MariaDB instance on `port` (mariabackup --stream=mbstream), at most pv_limit_mb MB/s. */
export interface PlaneBackupRequest extends PlaneRequestBase {
  op: 'backup';
  port: number;
  pv_limit_mb: number;
  /**
   * 'zstd': the agent compresses the stream (`zstd --fast=1`) before it crosses the socket, and its
   * end frame reports the uncompressed stream's size and position (PlaneTrailer.backup),
   * which the receiver can no longer read from the bytes. Absent: the mbstream as it is.
   */
  compress?: 'zstd';
  /**
   * Base64 of a 32-byte data key: the agent seals what it sends with it (after compressing)
   * before it crosses the socket (docs/backup-encryption.md). Asked only with compress.
   */
  seal_key?: string;
}

/** A stored object of an `fs` backup storage, checked against its sha256 as it is read. */
export interface PlaneGetRequest extends PlaneRequestBase {
  op: 'get';
  root: string;
  key: string;
}

export type PlaneRequest = PlaneBackupRequest | PlaneGetRequest;

export interface PlaneTrailer {
  code: number;
  details: string;
  /** A compressed backup's facts, read by the sender from the uncompressed stream. */
  backup?: PlaneBackupFacts;
}

export interface PlaneBackupFacts {
  /** Bytes of the mbstream before compression. */
  raw_bytes: number;
  /** Its GTID position (mbstream-sniffer.ts gtidOfBackup); absent when it carried none. */
  gtid_pos?: string;
  /** Why the position could not be read, when it could not. */
  problem?: string;
}

export function dataFrameHeader(length: number): Buffer {
  const header = Buffer.allocUnsafe(4);
  header.writeUInt32BE(length, 0);
  return header;
}

export function endFrame(trailer: PlaneTrailer): Buffer {
  const body = Buffer.from(JSON.stringify(trailer));
  const frame = Buffer.allocUnsafe(8 + body.length);
  frame.writeUInt32BE(0, 0);
  frame.writeUInt32BE(body.length, 4);
  body.copy(frame, 8);
  return frame;
}

/** Splits received chunks into data views and, at the end, the trailer. */
export class FrameReader {
  private remaining = 0;
  private header = Buffer.alloc(0);
  private trailerLength = -1;
  private trailerBytes: Buffer[] = [];
  private trailerGot = 0;
  private inEndFrame = false;
  trailer: PlaneTrailer | undefined;

  /** The data bytes in `chunk`, as views of it. Throws on bytes after the end frame or a malformed trailer. */
  push(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.trailer) throw new Error('the data plane sent bytes after its end frame');
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, chunk.length - at);
        out.push(chunk.subarray(at, at + take));
        this.remaining -= take;
        at += take;
        continue;
      }
      if (this.trailerLength >= 0) {
        const take = Math.min(this.trailerLength - this.trailerGot, chunk.length - at);
        this.trailerBytes.push(chunk.subarray(at, at + take));
        this.trailerGot += take;
        at += take;
        if (this.trailerGot === this.trailerLength) this.trailer = parseTrailer(Buffer.concat(this.trailerBytes));
        continue;
      }
      // A 4-byte length, possibly split across chunks.
      const need = 4 - this.header.length;
      const take = Math.min(need, chunk.length - at);
      this.header = Buffer.concat([this.header, chunk.subarray(at, at + take)]);
      at += take;
      if (this.header.length < 4) continue;
      const length = this.header.readUInt32BE(0);
      this.header = Buffer.alloc(0);
      if (this.inEndFrame) {
        if (length > MAX_TRAILER_BYTES) throw new Error(`the data plane's trailer of ${length} bytes is implausible`);
        this.trailerLength = length;
        if (length === 0) this.trailer = parseTrailer(Buffer.alloc(0));
      } else if (length === 0) {
        this.inEndFrame = true;
      } else {
        this.remaining = length;
      }
    }
    return out;
  }
}

function parseTrailer(body: Buffer): PlaneTrailer {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new Error('the data plane sent a trailer that is not JSON');
  }
  const t = parsed as Partial<PlaneTrailer> | null;
  if (!t || typeof t.code !== 'number' || typeof t.details !== 'string') throw new Error('the data plane sent a malformed trailer');
  const b = t.backup as Partial<PlaneBackupFacts> | undefined;
  if (b === undefined) return { code: t.code, details: t.details };
  const wellFormed = b !== null && typeof b === 'object' && Number.isSafeInteger(b.raw_bytes) && (b.raw_bytes as number) >= 0
    && (b.gtid_pos === undefined || typeof b.gtid_pos === 'string') && (b.problem === undefined || typeof b.problem === 'string');
  if (!wellFormed) throw new Error('the data plane sent a malformed trailer (backup)');
  return { code: t.code, details: t.details, backup: { raw_bytes: b.raw_bytes as number, ...(b.gtid_pos === undefined ? {} : { gtid_pos: b.gtid_pos }), ...(b.problem === undefined ? {} : { problem: b.problem }) } };
}

/** Plane port of an agent: its gRPC port + 1 (README, "Agent ports"). */
export function planeAddressOf(agentAddress: string): { host: string; port: number } {
  const colon = agentAddress.lastIndexOf(':');
  const rawHost = agentAddress.slice(0, colon);
  const port = Number(agentAddress.slice(colon + 1));
  if (!Number.isInteger(port) || port < 1 || port > 65534) throw new Error(`agent address ${JSON.stringify(agentAddress)} has no port the data plane can follow`);
  return { host: rawHost.startsWith('[') ? rawHost.slice(1, -1) : rawHost, port: port + 1 };
}
