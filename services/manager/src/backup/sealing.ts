// Which data key seals a new object of a storage, and which opens a stored one
// (docs/backup-encryption.md). The KEKs live sealed in the storage's record; they are opened
// here, on the leader, only to wrap or unwrap a data key, and never leave the managers.

import { KcmError } from '@kcm/protocol';
import type { BackupStorageRecord, SealedObjectRef } from '../meta/state';
import { newDataKey, openKek, SEAL_META, unwrapDataKey } from '../secrets/backup-keys';
import type { SecretBox } from '../secrets/secret-box';

export interface NewSealing {
  /** The clear data key, for the agent that seals. */
  dataKey: Buffer;
  /** What the state records of the object. */
  sealed: SealedObjectRef;
  /** What the object's manifest records (its format, KEK id and wrapped key). */
  meta: Record<string, string>;
}

/** A fresh data key wrapped by the storage's active KEK; undefined when the storage does not encrypt. */
export function newSealing(box: SecretBox, storage: BackupStorageRecord): NewSealing | undefined {
  const encryption = storage.encryption;
  if (!encryption) return undefined;
  const kek = encryption.keks.find((k) => k.id === encryption.activeKekId);
  if (!kek) throw KcmError.of('INTERNAL', `backup storage ${storage.name}: its active key ${encryption.activeKekId} is missing`);
  const { dataKey, meta } = newDataKey(openKek(box, kek.sealed), kek.id);
  return { dataKey, meta, sealed: { kekId: kek.id, wrappedKey: meta[SEAL_META.wrappedKey] } };
}

/** The data key of a sealed object, unwrapped with the storage's KEK that wrapped it; undefined for an object stored in clear. */
export function dataKeyOf(box: SecretBox, storage: BackupStorageRecord, sealed: SealedObjectRef | undefined): Buffer | undefined {
  if (!sealed) return undefined;
  const kek = storage.encryption?.keks.find((k) => k.id === sealed.kekId);
  if (!kek) throw KcmError.of('DATA_CHECK_FAILED', `backup storage ${storage.name}: key ${sealed.kekId} that wraps this object's data key was retired or never existed`);
  return unwrapDataKey(openKek(box, kek.sealed), kek.id, sealed.wrappedKey);
}

/** `{ sealed }` as an object's manifest meta records it, or nothing for an object stored in clear. */
export function sealedRefOf(meta: Record<string, string>): { sealed?: SealedObjectRef } {
  const kekId = meta[SEAL_META.kekId];
  const wrappedKey = meta[SEAL_META.wrappedKey];
  return kekId && wrappedKey ? { sealed: { kekId, wrappedKey } } : {};
}
