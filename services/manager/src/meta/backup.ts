// Apply functions of the backup domain: registered storages and recorded backup sets, and
// the look-ups jobs make on them (which storage a backup goes to, which set a restore uses).

import { own } from './dict';
import { accepted, refused, type ApplyOutcome } from './outcome';
import type { BackupSetRecord, BackupStorageRecord, MetaState } from './state';
import type { CommandBase, CommandKind } from './command-numbers';

/** Registers a backup storage (create_backup_storage); names are unique. */
export interface BackupStorageCreated extends CommandBase<typeof CommandKind.BackupStorageCreated>, Omit<BackupStorageRecord, 'createdAt'> {}

/** Forgets a backup storage that holds no recorded backup set (delete_backup_storage). */
export interface BackupStorageDeleted extends CommandBase<typeof CommandKind.BackupStorageDeleted> {
  name: string;
}

/** A finished full backup; recording the same set id again is a no-op (a resumed job). */
export interface BackupSetRecorded extends CommandBase<typeof CommandKind.BackupSetRecorded> {
  set: BackupSetRecord;
}

/** The cluster_id of metadata backups (spec 4.4: `-1` is the metadata cluster). */
export const METADATA_BACKUP_CLUSTER_ID = '-1';

export function applyBackupStorageCreated(state: MetaState, cmd: BackupStorageCreated): ApplyOutcome<null> {
  if (own(state.backupStorages, cmd.name)) return refused('CONFLICT', `backup storage ${cmd.name} already exists`);
  const same = Object.values(state.backupStorages).find((s) => s.hostaddr === cmd.hostaddr && s.path === cmd.path);
  if (same) return refused('CONFLICT', `backup storage ${same.name} already uses ${cmd.path} on ${cmd.hostaddr}`);
  state.backupStorages[cmd.name] = { name: cmd.name, stype: cmd.stype, hostaddr: cmd.hostaddr, port: cmd.port, path: cmd.path, createdAt: cmd.at, ...(cmd.s3 ? { s3: { ...cmd.s3 } } : {}), ...(cmd.encryption ? { encryption: cmd.encryption } : {}) };
  return accepted(null);
}

export function applyBackupStorageDeleted(state: MetaState, cmd: BackupStorageDeleted): ApplyOutcome<null> {
  if (!own(state.backupStorages, cmd.name)) return refused('NOT_FOUND', `backup storage ${cmd.name} does not exist`);
  const sets = Object.values(state.backupSets).filter((s) => s.storageName === cmd.name);
  if (sets.length > 0) return refused('CONFLICT', `backup storage ${cmd.name} still holds ${sets.length} backup set(s) (${sets.slice(0, 5).map((s) => s.id).join(', ')}); it cannot be deleted`);
  delete state.backupStorages[cmd.name];
  return accepted(null);
}

export function applyBackupSetRecorded(state: MetaState, cmd: BackupSetRecorded): ApplyOutcome<null> {
  if (own(state.backupSets, cmd.set.id)) return accepted(null);
  if (!own(state.backupStorages, cmd.set.storageName)) return refused('NOT_FOUND', `backup storage ${cmd.set.storageName} does not exist`);
  state.backupSets[cmd.set.id] = cmd.set;
  return accepted(null);
}

/** Where new backups go: the storage registered first (by creation, then name). */
export function defaultBackupStorage(state: MetaState): BackupStorageRecord | undefined {
  return Object.values(state.backupStorages).sort((a, b) => a.createdAt - b.createdAt || (a.name < b.name ? -1 : 1))[0];
}

/** A cluster's backup sets (`-1`: the metadata's), oldest first. */
export function backupSetsOf(state: MetaState, clusterId: string): BackupSetRecord[] {
  return Object.values(state.backupSets)
    .filter((s) => s.clusterId === clusterId)
    .sort((a, b) => a.finishedAt - b.finishedAt || Number(a.id) - Number(b.id));
}

/**
 * The newest full backup of a cluster consistent at or before `timeMs` (ms since the epoch):
 * what a point-in-time restore to `timeMs` starts from. A set counts from when it finished
 * (every shard's backup is consistent at a GTID position reached by then).
 */
export function newestFullBackupBefore(state: MetaState, clusterId: string, timeMs: number): BackupSetRecord | undefined {
  return backupSetsOf(state, clusterId)
    .filter((s) => s.finishedAt <= timeMs)
    .at(-1);
}
