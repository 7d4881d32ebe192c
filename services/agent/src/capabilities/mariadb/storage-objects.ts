// The restore capability as a client of a backup storage's agent (agent-storage.proto,
// BackupStorageAgent): Get to read a backup or an archived binlog back, Put to push a
// closed binlog. The service is loaded on first use, so an agent starts even where the
// storage proto is not deployed.

import { once } from 'node:events';
import type { Readable } from 'node:stream';
import type * as grpc from '@grpc/grpc-js';
import { agentClient, loadAgentService, type MariaDbStoredObject } from '@kcm/agent-api';

const AGENT_ADDRESS = /^[A-Za-z0-9.-]{1,255}:\d{1,5}$|^\[[0-9A-Fa-f:]+\]:\d{1,5}$/;
const KEY = /^[A-Za-z0-9._=-]+(\/[A-Za-z0-9._=-]+)*$/;

let storageService: grpc.ServiceClientConstructor | undefined;
function storageClient(address: string): grpc.Client {
  storageService ??= loadAgentService('agent-storage.proto', 'BackupStorageAgent');
  return agentClient(storageService, address);
}

interface StorageGetClient {
  Get(req: { root: string; key: string }): grpc.ClientReadableStream<{ data: Buffer }>;
  Put(callback: (err: grpc.ServiceError | null, reply?: StoredObjectInfo) => void): grpc.ClientWritableStream<object>;
}

export interface StoredObjectInfo {
  key: string;
  bytes: number;
  sha256: string;
}

export function checkStoredObject(obj: MariaDbStoredObject | undefined | null, field: string): MariaDbStoredObject {
  if (!obj) throw new Error(`${field} is required`);
  if (!AGENT_ADDRESS.test(obj.storage_agent_address)) throw new Error(`${field}.storage_agent_address ${JSON.stringify(obj.storage_agent_address)} must be host:port`);
  if (!obj.root.startsWith('/') || obj.root.includes('\0')) throw new Error(`${field}.root must be an absolute path`);
  if (!KEY.test(obj.key) || obj.key.split('/').some((s) => s === '.' || s === '..')) throw new Error(`${field}.key ${JSON.stringify(obj.key)} is not a storage key`);
  return obj;
}

/**
 * The bytes of a stored object; the storage ends the stream with an error when they no
 * longer match the object's sha256, so a consumer must treat a failed iteration as a bad copy.
 */
export async function* readStoredObject(obj: MariaDbStoredObject, cancel?: AbortSignal): AsyncGenerator<Buffer> {
  const client = storageClient(obj.storage_agent_address) as unknown as StorageGetClient & grpc.Client;
  const call = client.Get({ root: obj.root, key: obj.key });
  const onAbort = () => call.cancel();
  cancel?.addEventListener('abort', onAbort, { once: true });
  try {
    for await (const chunk of call as AsyncIterable<{ data: Buffer }>) yield chunk.data;
  } catch (err) {
    throw new Error(`reading ${obj.key} from storage ${obj.storage_agent_address} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  } finally {
    cancel?.removeEventListener('abort', onAbort);
    call.cancel();
    client.close();
  }
}

/** Stores a stream under obj.key with meta (the storage replaces an object of the same key atomically). */
export async function putStoredObject(obj: MariaDbStoredObject, meta: Record<string, string>, data: Readable): Promise<StoredObjectInfo> {
  const client = storageClient(obj.storage_agent_address) as unknown as StorageGetClient & grpc.Client;
  try {
    let call!: grpc.ClientWritableStream<object>;
    const reply = new Promise<StoredObjectInfo>((resolve, reject) => {
      call = client.Put((err, res) => (err || !res ? reject(err ?? new Error('empty reply')) : resolve(res)));
    });
    call.write({ header: { root: obj.root, key: obj.key, meta } });
    for await (const piece of data) {
      if (!call.write({ data: piece as Buffer })) await once(call, 'drain');
    }
    call.end();
    return await reply;
  } catch (err) {
    throw new Error(`storing ${obj.key} on storage ${obj.storage_agent_address} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  } finally {
    client.close();
  }
}
