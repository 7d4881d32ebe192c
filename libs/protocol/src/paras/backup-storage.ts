/**
 * Backup storage registration (beyond the spec's list, issue 14): where full backups go.
 * get_backup_storage reports each as {hostaddr, name, port, stype} (spec 2.5, 4.6).
 */
import { z } from 'zod';
import { absolutePathString, enumString, formatted, hostAddressString, portString, type Parsed } from '../formats';
import { s3StorageFields } from './s3-storage-fields';

/**
 * `fs`: a directory on a host whose kcm agent (at hostaddr:port) stores and serves the backups.
 * `s3`: an S3-compatible bucket that the agent at hostaddr:port writes to and reads from (docs/backup-s3.md).
 */
export const BACKUP_STORAGE_TYPES = ['fs', 's3'] as const;

/** Backups sealed at their source with per-object keys ("on", the default), or stored in clear ("off"). */
export const BACKUP_ENCRYPTION_MODES = ['on', 'off'] as const;

const STORAGE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$/;
export function parseStorageName(s: string): Parsed<string> {
  return STORAGE_NAME.test(s) ? { ok: true, value: s } : { ok: false, rule: 'must be 1-64 ASCII letters, digits, _ or - (not starting with -)' };
}
const storageNameString = () => formatted(parseStorageName, 'storage name [A-Za-z0-9_-], at most 64');

export const createBackupStorageParas = z.object({
  name: storageNameString(),
  stype: enumString(BACKUP_STORAGE_TYPES),
  /** stype s3 only: endpoint, bucket, prefix, region, access_key_id, secret_access_key (s3-storage-fields.ts). */
  ...s3StorageFields,
  hostaddr: hostAddressString(),
  /** The port of the storage host's kcm agent. */
  port: portString(),
  /** fs: the directory on hostaddr that holds the backups; s3: where its agent spools the parts of uploads under way (created if missing). */
  path: absolutePathString().refine((p) => p !== '/', { message: 'must not be /' }),
  /** Encryption at rest of every object stored there (docs/backup-encryption.md): "on" (default) or "off". */
  encryption: enumString(BACKUP_ENCRYPTION_MODES).optional(),
});

export const deleteBackupStorageParas = z.object({
  name: storageNameString(),
});
