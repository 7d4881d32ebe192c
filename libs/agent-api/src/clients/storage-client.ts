// The client of one storage host's BackupStorageAgent service, for the manager and for other
// agents (a restore pulls objects agent to agent with get()). Deadlines are sized per call:
// a PullBackup copies a whole instance at pv_limit MB/s, a List must answer in seconds.
// An unreachable agent is AgentUnreachableError, like every agent call.

import type * as grpc from '@grpc/grpc-js';
import { agentClient, callUnary } from '../call';
import { agentCallFailure } from '../errors';
import {
  BackupStorageAgentService,
  CatalogDumpAgentService,
  type PgSchemaDumpReply,
  type PgSchemaRestoreReply,
  type PgSchemaRestoreRequest,
  type S3Target,
  type StorageChunk,
  type StorageObjectInfo,
  type StorageOpenReply,
  type StoragePullBackupReply,
  type StoragePullBackupRequest,
  type StoragePutMessage,
  type StorageVerifyReply,
} from '../contract/storage';

export interface StorageDeadlines {
  /** Open, List, Delete. */
  commandMs: number;
  /** PullBackup, Put, Get, Verify: whole objects. */
  transferMs: number;
}

const DEFAULT_DEADLINES: StorageDeadlines = { commandMs: 30_000, transferMs: 6 * 3600_000 };
const PUT_CHUNK = 256 * 1024;

export class StorageAgentClient {
  private readonly client: grpc.Client;
  private readonly deadlines: StorageDeadlines;

  /** `address` is the storage host's agent, `<hostaddr>:<port>` as the storage was registered. */
  constructor(readonly address: string, deadlines: Partial<StorageDeadlines> = {}) {
    this.client = agentClient(BackupStorageAgentService, address);
    this.deadlines = { ...DEFAULT_DEADLINES, ...deadlines };
  }

  /** `s3`: the bucket an s3 root names (the agent keeps it for the root's later calls). */
  open(root: string, s3?: S3Target): Promise<StorageOpenReply> {
    return callUnary(this.client, this.address, 'Open', { root, ...(s3 ? { s3 } : {}) }, this.deadlines.commandMs);
  }

  /** A physical backup of `req.source` into `req.key`; the same op_id joins or returns the first attempt. */
  pullBackup(req: StoragePullBackupRequest): Promise<StoragePullBackupReply> {
    return callUnary(this.client, this.address, 'PullBackup', req, this.deadlines.transferMs);
  }

  /** Stores `data` under key, replacing an older object of the key atomically. */
  put(root: string, key: string, data: Uint8Array | AsyncIterable<Uint8Array>, meta: Record<string, string> = {}): Promise<StorageObjectInfo> {
    return new Promise<StorageObjectInfo>((resolve, reject) => {
      const method = (this.client as unknown as Record<string, Function>).Put.bind(this.client) as (
        options: grpc.CallOptions,
        callback: (err: grpc.ServiceError | null, reply: StorageObjectInfo) => void,
      ) => grpc.ClientWritableStream<StoragePutMessage>;
      const call = method({ deadline: Date.now() + this.deadlines.transferMs }, (err, reply) => (err ? reject(agentCallFailure(this.address, err)) : resolve(reply)));
      const send = async () => {
        const write = (m: StoragePutMessage) => (call.write(m) ? Promise.resolve() : new Promise<void>((r) => call.once('drain', () => r())));
        await write({ header: { root, key, meta }, data: Buffer.alloc(0) });
        const pieces = data instanceof Uint8Array ? [data] : data;
        for await (const piece of pieces) {
          for (let at = 0; at < piece.length; at += PUT_CHUNK) await write({ data: Buffer.from(piece.subarray(at, Math.min(piece.length, at + PUT_CHUNK))) });
        }
        await write({ data: Buffer.alloc(0), commit: true });
        call.end();
      };
      send().catch((err: unknown) => {
        call.cancel();
        reject(err);
      });
    });
  }

  /**
   * The object's bytes. The stream fails (AgentCallError, DATA_LOSS) at its end if they no
   * longer match the manifest: use what it yielded only once it finished without error.
   */
  async *get(root: string, key: string): AsyncGenerator<Buffer> {
    const method = (this.client as unknown as Record<string, Function>).Get.bind(this.client) as (req: object, options: grpc.CallOptions) => grpc.ClientReadableStream<StorageChunk>;
    const call = method({ root, key }, { deadline: Date.now() + this.deadlines.transferMs });
    try {
      for await (const chunk of call as AsyncIterable<StorageChunk>) yield chunk.data;
    } catch (err) {
      throw 'code' in (err as object) ? agentCallFailure(this.address, err as grpc.ServiceError) : err;
    } finally {
      call.cancel();
    }
  }

  /** With `dataKey`, every sealed record's tag is checked too (docs/backup-encryption.md). */
  verify(root: string, key: string, dataKey?: Buffer): Promise<StorageVerifyReply> {
    return callUnary(this.client, this.address, 'Verify', { root, key, ...(dataKey ? { data_key: dataKey } : {}) }, this.deadlines.transferMs);
  }

  async list(root: string, prefix: string): Promise<StorageObjectInfo[]> {
    const reply = await callUnary<{ objects: StorageObjectInfo[] }>(this.client, this.address, 'List', { root, prefix }, this.deadlines.commandMs);
    return reply.objects;
  }

  async delete(opId: string, root: string, prefix: string): Promise<number> {
    const reply = await callUnary<{ deleted: number }>(this.client, this.address, 'Delete', { op_id: opId, root, prefix }, this.deadlines.commandMs);
    return reply.deleted;
  }

  close(): void {
    this.client.close();
  }
}

/** The CatalogDumpAgent of a compute host: its instances' schema, dumped where they run, and put back into them by a restore. */
export class CatalogDumpAgentClient {
  private readonly client: grpc.Client;

  constructor(readonly address: string, private readonly deadlineMs = 10 * 60_000) {
    this.client = agentClient(CatalogDumpAgentService, address);
  }

  dumpPgSchema(port: number): Promise<PgSchemaDumpReply> {
    return callUnary(this.client, this.address, 'DumpPgSchema', { port }, this.deadlineMs);
  }

  restorePgSchema(req: PgSchemaRestoreRequest): Promise<PgSchemaRestoreReply> {
    return callUnary(this.client, this.address, 'RestorePgSchema', req, this.deadlineMs);
  }

  close(): void {
    this.client.close();
  }
}
