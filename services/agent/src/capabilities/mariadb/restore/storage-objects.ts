// The restore capability as a client of a backup storage's agent (BackupStorageAgent,
// agent-storage.proto): Get to read a backup or an archived binlog back, Put to push a
// closed binlog. Agent to agent: the bytes never pass through the manager.

import type { Readable } from 'node:stream';
import { planeEnabled, planeStream, StorageAgentClient, type MariaDbStoredObject, type StorageObjectInfo } from '@kcm/agent-api';

const AGENT_ADDRESS = /^[A-Za-z0-9.-]{1,255}:\d{1,5}$|^\[[0-9A-Fa-f:]+\]:\d{1,5}$/;
const KEY = /^[A-Za-z0-9._=-]+(\/[A-Za-z0-9._=-]+)*$/;

export function checkStoredObject(obj: MariaDbStoredObject | undefined | null, field: string): MariaDbStoredObject {
  if (!obj) throw new Error(`${field} is required`);
  if (!AGENT_ADDRESS.test(obj.storage_agent_address)) throw new Error(`${field}.storage_agent_address ${JSON.stringify(obj.storage_agent_address)} must be host:port`);
  if (!obj.root.startsWith('/') || obj.root.includes('\0')) throw new Error(`${field}.root must be an absolute path`);
  if (!KEY.test(obj.key) || obj.key.split('/').some((s) => s === '.' || s === '..')) throw new Error(`${field}.key ${JSON.stringify(obj.key)} is not a storage key`);
  return obj;
}

/**
 * The bytes of a stored object; the storage ends the stream with an error when they do not
 * match the object's sha256, so a failed iteration means a bad copy: nothing read may be used.
 * Over the storage agent's data plane with mutual TLS (the ticket of the call being served
 * authorises it), else its Get rpc.
 */
export async function* readStoredObject(obj: MariaDbStoredObject): AsyncGenerator<Buffer> {
  if (planeEnabled()) {
    try {
      yield* planeStream(obj.storage_agent_address, { op: 'get', root: obj.root, key: obj.key });
    } catch (err) {
      throw new Error(`reading ${obj.key} from storage ${obj.storage_agent_address} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    return;
  }
  const client = new StorageAgentClient(obj.storage_agent_address);
  try {
    yield* client.get(obj.root, obj.key);
  } catch (err) {
    throw new Error(`reading ${obj.key} from storage ${obj.storage_agent_address} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  } finally {
    client.close();
  }
}

/** Stores a stream under obj.key with meta (the storage replaces an object of the same key whole). */
export async function putStoredObject(obj: MariaDbStoredObject, meta: Record<string, string>, data: Readable): Promise<StorageObjectInfo> {
  const client = new StorageAgentClient(obj.storage_agent_address);
  try {
    return await client.put(obj.root, obj.key, data as AsyncIterable<Uint8Array>, meta);
  } catch (err) {
    throw new Error(`storing ${obj.key} on storage ${obj.storage_agent_address} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  } finally {
    client.close();
  }
}
