// What logical backups need of a backup storage: the subset of backup/storage.ts's
// BackupStorage they use (put, get, verify), so that every implementation of it (fs, s3
// later) serves them unchanged, and unit tests can keep objects in memory.

import { KcmError } from '@kcm/protocol';
import { defaultBackupStorage } from '../meta/backup';
import { own } from '../meta/dict';
import type { MetaState } from '../meta/state';
import { openBackupStorage } from './storage';

export interface LogicalDumpStorage {
  readonly record: { name: string };
  /** Stores the stream whole under key (replacing an older object atomically): its size and sha256. */
  put(key: string, data: AsyncIterable<Uint8Array>, meta?: Record<string, string>): Promise<{ bytes: number; sha256: string }>;
  /** The bytes of an object; fails if they no longer match the checksum recorded when written. */
  get(key: string): AsyncIterable<Buffer>;
  verify(key: string): Promise<{ ok: boolean; problem: string }>;
  close(): void;
}

/**
 * Opens a storage: by name (a backup set's part names the one it was written to), or the
 * one new logical backups go to when `name` is undefined. Throws a KcmError (NOT_FOUND) when
 * there is none.
 */
export type OpenLogicalStorage = (state: MetaState, name?: string) => LogicalDumpStorage;

/**
 * The backup storages of the replicated state: a set's own storage by name, new dumps to the
 * default one (registered first), through backup/storage.ts like every other backup.
 */
export const openLogicalStorage: OpenLogicalStorage = (state, name) => {
  const record = name === undefined ? defaultBackupStorage(state) : own(state.backupStorages, name);
  if (!record) throw KcmError.of('NOT_FOUND', name === undefined ? 'no backup storage is registered (create_backup_storage)' : `backup storage ${name} is not registered`);
  return openBackupStorage(record);
};
