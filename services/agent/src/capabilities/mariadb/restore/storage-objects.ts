// The restore capability as a client of a backup storage's agent (BackupStorageAgent,
// agent-storage.proto): Get to read a backup or an archived binlog back, Put to push a
// closed binlog. Agent to agent: the bytes never pass through the manager.

import type { Readable } from 'node:stream';
import { planeEnabled, planeStream, StorageAgentClient, type MariaDbStoredObject, type StorageObjectInfo } from '@kcm/agent-api';
import { DATA_KEY_BYTES, ObjectOpener, ObjectSealer, SealBroken } from '../../storage/sealed-stream';
import { countedTransfer } from '../../../metrics/transfers';

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
  const dataKey = dataKeyOf(obj);
  if (!dataKey) {
    yield* countedTransfer('restore', readStoredBytes(obj));
    return;
  }
  // A sealed object: only records whose tag verified come out, and a failed tag or a missing
  // last record fails the read (docs/backup-encryption.md). Callers stage what they read and
  // use nothing of a read that failed, so nothing of a broken object reaches an instance.
  const opener = new ObjectOpener(dataKey);
  try {
    for await (const sealed of countedTransfer('restore', readStoredBytes(obj))) yield* opener.push(sealed);
    yield* opener.end();
  } catch (err) {
    if (err instanceof SealBroken) throw new Error(`${obj.key} on storage ${obj.storage_agent_address} is refused: ${err.message}`, { cause: err });
    throw err;
  }
}

/** The 32-byte data key of a sealed object, or undefined for one stored in clear. */
function dataKeyOf(obj: MariaDbStoredObject): Buffer | undefined {
  if (!obj.data_key || obj.data_key.length === 0) return undefined;
  if (obj.data_key.length !== DATA_KEY_BYTES) throw new Error(`${obj.key}: data_key must be ${DATA_KEY_BYTES} bytes`);
  return Buffer.from(obj.data_key);
}

/** Sealed with the target's data key, when it has one, on the way out of this host. */
async function* sealedWith(dataKey: Buffer, data: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const sealer = new ObjectSealer(dataKey);
  for await (const piece of data) yield* sealer.push(piece);
  yield* sealer.end();
}

/** The stored bytes as they are. */
async function* readStoredBytes(obj: MariaDbStoredObject): AsyncGenerator<Buffer> {
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

/**
 * Stores a stream under obj.key with meta (the storage replaces an object of the same key
 * whole); sealed here first when obj has a data key.
 */
export async function putStoredObject(obj: MariaDbStoredObject, meta: Record<string, string>, data: Readable): Promise<StorageObjectInfo> {
  const client = new StorageAgentClient(obj.storage_agent_address);
  const dataKey = dataKeyOf(obj);
  try {
    return await client.put(obj.root, obj.key, dataKey ? sealedWith(dataKey, data as AsyncIterable<Buffer>) : (data as AsyncIterable<Uint8Array>), meta);
  } catch (err) {
    throw new Error(`storing ${obj.key} on storage ${obj.storage_agent_address} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  } finally {
    client.close();
  }
}
