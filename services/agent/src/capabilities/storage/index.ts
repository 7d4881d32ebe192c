// The BackupStorageAgent service (proto/agent-storage.proto): this host as an `fs` backup
// storage. PullBackup and Delete run through the op ledger, so a manager that retries after
// a crash (a new leader resuming a backup job) joins or reads the first attempt instead of
// starting a second copy.

import * as grpc from '@grpc/grpc-js';
import {
  AgentFailure,
  agentStatusOf,
  BackupStorageAgentService,
  CatalogDumpAgentService,
  type PgSchemaDumpRequest,
  type PgSchemaRestoreRequest,
  type PlaneBackupRequest,
  type StorageChunk,
  type StorageDeleteRequest,
  type StorageListRequest,
  type StorageObjectInfo,
  type StorageObjectRequest,
  type StorageOpenRequest,
  type StoragePullBackupRequest,
  type StoragePutMessage,
} from '@kcm/agent-api';
import type { AgentContext, CapabilityModule } from '../../capability';
import { unary } from '../../grpc-unary';
import { checkKey, checkPrefix } from './object-store';
import { storeFor, type ObjectStore, type StoreWriter } from './store';
import { openS3Root } from './s3/targets';
import { pullBackup } from './pull-backup';
import { verifyObject } from './sealed-verify';
import { sendBackup, type PlaneSink } from '../../plane/handlers';
import { dumpPgSchema } from './catalog-dump';
import { restorePgSchema } from './catalog-restore';

function putHandler(ctx: AgentContext): grpc.handleClientStreamingCall<StoragePutMessage, StorageObjectInfo> {
  return (call, callback) => {
    let writer: StoreWriter | undefined;
    let meta: Record<string, string> = {};
    let committed = false;
    const run = async (): Promise<StorageObjectInfo> => {
      for await (const message of call as AsyncIterable<StoragePutMessage>) {
        if (!writer) {
          if (!message.header) throw new AgentFailure('invalid_argument', 'the first Put message must carry the header (root, key)');
          writer = await storeFor(message.header.root).writer(checkKey(message.header.key));
          meta = message.header.meta;
        } else if (message.header) {
          throw new AgentFailure('invalid_argument', 'only the first Put message may carry a header');
        }
        if (committed) throw new AgentFailure('invalid_argument', 'no Put message may follow the one that commits');
        if (message.data.length > 0) await writer.write(message.data);
        committed = message.commit === true;
      }
      if (!writer) throw new AgentFailure('invalid_argument', 'Put received no header');
      // A writer that cancels (its producer failed) may look like a clean end here: only
      // its explicit last message commits.
      if (!committed) throw new AgentFailure('invalid_argument', `the Put of ${writer.key} ended without its commit message; nothing stored`);
      return writer.commit(meta);
    };
    run().then(
      (info) => {
        ctx.logger.info({ key: info.key, bytes: info.bytes }, 'object stored');
        callback(null, info);
      },
      async (err: unknown) => {
        await writer?.abort();
        ctx.logger.error({ err, rpc: 'Storage.Put' }, 'put failed');
        callback({ code: agentStatusOf(err), details: err instanceof Error ? err.message : String(err) });
      },
    );
  };
}

function getHandler(ctx: AgentContext): grpc.handleServerStreamingCall<StorageObjectRequest, StorageChunk> {
  return (call) => {
    const send = async () => {
      let cancelled = false;
      call.on('cancelled', () => (cancelled = true));
      for await (const data of storeFor(call.request.root).read(checkKey(call.request.key))) {
        if (cancelled) return;
        if (!call.write({ data })) await new Promise((r) => {
          call.once('drain', r);
          call.once('cancelled', r);
        });
      }
      call.end();
    };
    send().catch((err: unknown) => {
      ctx.logger.error({ err, rpc: 'Storage.Get', key: call.request.key }, 'get failed');
      // A corrupt object ends the stream with DATA_LOSS: the reader must not use what it got.
      const code = err instanceof AgentFailure && err.kind === 'failed_precondition' ? grpc.status.DATA_LOSS : agentStatusOf(err);
      call.emit('error', { code, details: err instanceof Error ? err.message : String(err) });
    });
  };
}

/** Open: an s3 storage's root comes with its bucket (kept for the root's later calls); any other root is a directory. */
async function openStore(req: StorageOpenRequest): Promise<ObjectStore> {
  return req.s3 ? openS3Root(req.root, req.s3) : storeFor(req.root);
}

function requireOpId(opId: string): string {
  if (!opId) throw new AgentFailure('invalid_argument', 'op_id is required');
  return opId;
}

export const storageCapability: CapabilityModule = {
  name: 'storage',
  register(server: grpc.Server, ctx: AgentContext): void {
    const log = ctx.logger.child({ capability: 'storage' });
    const logged = { ...ctx, logger: log };
    // A source instance on this host is backed up by this agent itself (pull-backup.ts localBackupBytes).
    const localBackup = { hostaddr: ctx.hostaddr, run: (request: PlaneBackupRequest, sink: PlaneSink) => sendBackup(ctx, request, sink) };
    server.addService(BackupStorageAgentService.service, {
      Open: unary(log, 'Storage.Open', async (req: StorageOpenRequest) => (await openStore(req)).open()),
      PullBackup: unary(log, 'Storage.PullBackup', async (req: StoragePullBackupRequest) =>
        ctx.ops.run(`storage.pull.${requireOpId(req.op_id)}`, async () => pullBackup(storeFor(req.root), { ...req, key: checkKey(req.key) }, log, localBackup)),
      ),
      Put: putHandler(logged),
      Get: getHandler(logged),
      // With the object's data key: every record's tag too (sealed-verify.ts).
      Verify: unary(log, 'Storage.Verify', async (req: StorageObjectRequest) => verifyObject(storeFor(req.root), checkKey(req.key), req.data_key)),
      List: unary(log, 'Storage.List', async (req: StorageListRequest) => ({ objects: await storeFor(req.root).list(checkPrefix(req.prefix)) })),
      Delete: unary(log, 'Storage.Delete', async (req: StorageDeleteRequest) =>
        ctx.ops.run(`storage.delete.${requireOpId(req.op_id)}`, async () => {
          // An empty prefix would name every object of the storage: refused, never a wipe by omission.
          if (!req.prefix) throw new AgentFailure('invalid_argument', 'Delete needs a non-empty prefix');
          return { deleted: await storeFor(req.root).delete(checkPrefix(req.prefix)) };
        }),
      ),
    });
    server.addService(CatalogDumpAgentService.service, {
      DumpPgSchema: unary(log, 'CatalogDump.DumpPgSchema', (req: PgSchemaDumpRequest) => dumpPgSchema(ctx, req.port)),
      RestorePgSchema: unary(log, 'CatalogDump.RestorePgSchema', (req: PgSchemaRestoreRequest) =>
        ctx.ops.run(`catalog.restore.${requireOpId(req.op_id)}`, async () => restorePgSchema(ctx, req)),
      ),
    });
  },
};
