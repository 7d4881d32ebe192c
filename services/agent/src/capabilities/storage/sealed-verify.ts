// Verify of a sealed object (docs/backup-encryption.md): beside the sha256 of the stored
// bytes, every record's tag, when the caller gives the object's data key. A restore verifies
// every object this way before it writes anything, so an object altered together with its
// manifest (which the sha256 alone cannot catch) is refused before any shard is touched. The
// plaintext is discarded as it is opened; nothing is written.

import type { StorageVerifyReply } from '@kcm/agent-api';
import { DATA_KEY_BYTES, ObjectOpener, SealBroken } from './sealed-stream';
import type { ObjectStore } from './store';

export async function verifyObject(store: ObjectStore, key: string, dataKey?: Uint8Array): Promise<StorageVerifyReply> {
  const checked = await store.verify(key);
  if (!checked.ok || !dataKey || dataKey.length === 0) return checked;
  if (dataKey.length !== DATA_KEY_BYTES) return { ...checked, ok: false, problem: `data_key must be ${DATA_KEY_BYTES} bytes` };
  const opener = new ObjectOpener(Buffer.from(dataKey));
  try {
    for await (const sealed of store.read(key)) opener.push(sealed);
    opener.end();
  } catch (err) {
    if (err instanceof SealBroken) return { ...checked, ok: false, problem: `its sealed records do not authenticate: ${err.message}` };
    throw err;
  }
  return checked;
}
