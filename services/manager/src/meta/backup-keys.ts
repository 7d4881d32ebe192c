// Key-encryption keys of a backup storage (rotate_backup_key; docs/backup-encryption.md).
// A rotation adds a KEK and makes it the one new objects are wrapped with; older KEKs stay
// for restores until retired. A KEK is retired only when it is not the active one and no
// kept object (a recorded backup set's shard, an archived binlog) was wrapped with it:
// retiring removes the sealed KEK from the state, after which those objects could never be
// opened again.

import { own } from './dict';
import { accepted, refused, type ApplyOutcome } from './outcome';
import type { BackupKekRecord, MetaState } from './state';
import type { CommandBase, CommandKind } from './command-numbers';

/** A new KEK of a storage, active from now on. */
export interface BackupKekAdded extends CommandBase<typeof CommandKind.BackupKekAdded> {
  storageName: string;
  kek: BackupKekRecord;
}

/** A KEK no kept object needs, forgotten. */
export interface BackupKekRetired extends CommandBase<typeof CommandKind.BackupKekRetired> {
  storageName: string;
  kekId: string;
}

/** Keys of the kept objects whose data keys the storage's KEK kekId wraps, for messages. */
export function objectsNeedingKek(state: MetaState, storageName: string, kekId: string): string[] {
  const keys: string[] = [];
  for (const set of Object.values(state.backupSets)) {
    if (set.storageName !== storageName) continue;
    for (const shard of set.shards) if (shard.sealed?.kekId === kekId) keys.push(shard.key);
  }
  for (const archive of Object.values(state.binlogArchives)) {
    for (const file of archive.files) if (file.storageName === storageName && file.sealed?.kekId === kekId) keys.push(file.key);
  }
  return keys;
}

/** Why the KEK cannot be retired now, or undefined when it can. */
export function whyKekStays(state: MetaState, storageName: string, kekId: string): string | undefined {
  const encryption = own(state.backupStorages, storageName)?.encryption;
  if (!encryption?.keks.some((k) => k.id === kekId)) return `backup storage ${storageName} has no key ${kekId}`;
  if (encryption.activeKekId === kekId) return `${kekId} is the active key of backup storage ${storageName}: rotate first`;
  const needing = objectsNeedingKek(state, storageName, kekId);
  if (needing.length > 0) return `${needing.length} kept object(s) of backup storage ${storageName} need ${kekId} to be restored (${needing.slice(0, 3).join(', ')}${needing.length > 3 ? ', ...' : ''})`;
  return undefined;
}

export function applyBackupKekAdded(state: MetaState, cmd: BackupKekAdded): ApplyOutcome<null> {
  const storage = own(state.backupStorages, cmd.storageName);
  if (!storage) return refused('NOT_FOUND', `backup storage ${cmd.storageName} does not exist`);
  if (!storage.encryption) return refused('CONFLICT', `backup storage ${cmd.storageName} stores in clear (encryption off): it has no key to rotate`);
  if (storage.encryption.keks.some((k) => k.id === cmd.kek.id)) return accepted(null); // a resumed job: added already
  storage.encryption = { activeKekId: cmd.kek.id, keks: [...storage.encryption.keks, cmd.kek] };
  return accepted(null);
}

export function applyBackupKekRetired(state: MetaState, cmd: BackupKekRetired): ApplyOutcome<null> {
  const storage = own(state.backupStorages, cmd.storageName);
  if (!storage) return refused('NOT_FOUND', `backup storage ${cmd.storageName} does not exist`);
  if (!storage.encryption?.keks.some((k) => k.id === cmd.kekId)) return accepted(null); // a resumed job: retired already
  const why = whyKekStays(state, cmd.storageName, cmd.kekId);
  if (why) return refused('CONFLICT', why);
  storage.encryption = { ...storage.encryption, keks: storage.encryption.keks.filter((k) => k.id !== cmd.kekId) };
  return accepted(null);
}
