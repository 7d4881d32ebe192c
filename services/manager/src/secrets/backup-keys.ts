// Keys of backup encryption at rest (docs/backup-encryption.md). Each storage with
// encryption on has key-encryption keys (KEKs): 32 random bytes each, kept in its record in
// the replicated state sealed by the managers' SecretBox, so the Raft log, snapshots and
// metadata backups hold them only as ciphertext. Each stored object gets its own random data
// key; the manager wraps it with the storage's active KEK into the object's manifest meta and
// hands the clear key only to the agent that seals (at the source) or opens (at a restore),
// over the agents' mutual TLS. A KEK never leaves the managers.
//
// Wrapped data key: `kcm-dek:v1:` + base64url(iv 12 | ciphertext 32 | tag 16), AES-256-GCM
// with the KEK, aad = `kcm backup data key v1 <kek id>` (a key wrapped under one id does not
// unwrap as another's).

import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { SecretBox } from './secret-box';

export const WRAPPED_KEY_PREFIX = 'kcm-dek:v1:';
export const KEK_BYTES = 32;
export const DATA_KEY_BYTES = 32;

/** Manifest meta of a sealed object: its format, the KEK that wraps its key, the wrapped key. */
export const SEAL_META = { format: 'enc', kekId: 'enc_kek_id', wrappedKey: 'enc_wrapped_key' } as const;
export const SEAL_FORMAT = 'kcmseal1-aes-256-gcm';

const KEK_ID = /^kek_[0-9a-f]{8}$/;

export const isKekId = (id: unknown): id is string => typeof id === 'string' && KEK_ID.test(id);

export function newKekId(): string {
  return `kek_${randomBytes(4).toString('hex')}`;
}

/** A new KEK, sealed by `box` for the replicated state. */
export function newSealedKek(box: SecretBox): string {
  return box.seal(randomBytes(KEK_BYTES).toString('base64'));
}

export function openKek(box: SecretBox, sealed: string): Buffer {
  const kek = Buffer.from(box.open(sealed), 'base64');
  if (kek.length !== KEK_BYTES) throw new Error(`a backup key-encryption key must be ${KEK_BYTES} bytes`);
  return kek;
}

const aadOf = (kekId: string) => Buffer.from(`kcm backup data key v1 ${kekId}`, 'utf8');

export function wrapDataKey(kek: Buffer, kekId: string, dataKey: Buffer): string {
  if (dataKey.length !== DATA_KEY_BYTES) throw new Error(`a data key must be ${DATA_KEY_BYTES} bytes`);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', kek, iv);
  cipher.setAAD(aadOf(kekId));
  const body = Buffer.concat([cipher.update(dataKey), cipher.final()]);
  return WRAPPED_KEY_PREFIX + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
}

export function unwrapDataKey(kek: Buffer, kekId: string, wrapped: string): Buffer {
  if (typeof wrapped !== 'string' || !wrapped.startsWith(WRAPPED_KEY_PREFIX)) throw new Error('not a wrapped data key');
  const raw = Buffer.from(wrapped.slice(WRAPPED_KEY_PREFIX.length), 'base64url');
  if (raw.length !== 12 + DATA_KEY_BYTES + 16) throw new Error('a wrapped data key has the wrong length');
  const decipher = createDecipheriv('aes-256-gcm', kek, raw.subarray(0, 12));
  decipher.setAAD(aadOf(kekId));
  decipher.setAuthTag(raw.subarray(12 + DATA_KEY_BYTES));
  try {
    return Buffer.concat([decipher.update(raw.subarray(12, 12 + DATA_KEY_BYTES)), decipher.final()]);
  } catch {
    throw new Error(`the data key does not unwrap with key-encryption key ${kekId}`);
  }
}

/** A fresh data key and its wrapping under the KEK `kekId`: the meta to store with the object. */
export function newDataKey(kek: Buffer, kekId: string): { dataKey: Buffer; meta: Record<string, string> } {
  const dataKey = randomBytes(DATA_KEY_BYTES);
  return { dataKey, meta: { [SEAL_META.format]: SEAL_FORMAT, [SEAL_META.kekId]: kekId, [SEAL_META.wrappedKey]: wrapDataKey(kek, kekId, dataKey) } };
}
