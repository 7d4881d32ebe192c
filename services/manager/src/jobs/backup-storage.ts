// Job family: backup storage registration (create_backup_storage, delete_backup_storage;
// beyond the spec's list, issue 14). A storage is registered only after its agent answered
// and made the directory; the record (meta/backup.ts) is what get_backup_storage lists.

import { KcmError, type ParasOf } from '@kcm/protocol';
import { CommandKind } from '../meta/commands';
import { own } from '../meta/dict';
import type { BackupStorageRecord, MetaState, StorageEncryption } from '../meta/state';
import { newKekId, newSealedKek } from '../secrets/backup-keys';
import type { SecretBox } from '../secrets/secret-box';
import type { BackupStorage } from '../backup/storage';
import { orThrow } from './framework/errors';
import { checkS3Paras, s3RecordOf, sealS3Paras } from '../backup/s3-paras';
import type { JobOf } from './framework/workflow';

type CreateParas = ParasOf<'create_backup_storage'>;

/** Opens the implementation of a registered storage (tests pass fakes; default openBackupStorage). */
export type BackupStorageOpener = (record: BackupStorageRecord) => BackupStorage;

/** Every storage job runs in one queue: a create and a delete of one name never interleave. */
const STORAGE_LOCK = 'backup-storage';

function sameStorage(record: BackupStorageRecord, p: CreateParas): boolean {
  return record.stype === p.stype && record.hostaddr === p.hostaddr && record.port === Number(p.port) && record.path === p.path;
}

function checkCreate(p: CreateParas, state: MetaState): void {
  checkS3Paras(p);
  const existing = own(state.backupStorages, p.name);
  if (existing) throw KcmError.of('CONFLICT', `paras.name: backup storage ${p.name} already exists (${existing.stype} ${existing.hostaddr}:${existing.port} ${existing.path})`, { field: 'paras.name' });
  const samePlace = Object.values(state.backupStorages).find((s) => s.hostaddr === p.hostaddr && s.path === p.path);
  if (samePlace) throw KcmError.of('CONFLICT', `paras.path: ${p.path} on ${p.hostaddr} is already backup storage ${samePlace.name}`, { field: 'paras.path' });
}

/** A new storage's encryption: one KEK, active (secrets/backup-keys.ts). */
function firstKek(box: SecretBox, at: number): StorageEncryption {
  const id = newKekId();
  return { activeKekId: id, keks: [{ id, sealed: newSealedKek(box), createdAt: at }] };
}

interface CreateOutputs {
  'open storage': { freeBytes: number };
  'record storage': null;
}

export function createBackupStorageJob(openStorage: BackupStorageOpener): JobOf<'create_backup_storage', CreateOutputs> {
  return {
    jobType: 'create_backup_storage',
    validate: checkCreate,
    sealParas: sealS3Paras,
    lockKey: () => STORAGE_LOCK,
    steps: (p) => [
      {
        name: 'open storage',
        async run() {
          const storage = openStorage({ name: p.name, stype: p.stype, hostaddr: p.hostaddr, port: Number(p.port), path: p.path, createdAt: 0, ...s3RecordOf(p) });
          try {
            return await storage.open();
          } finally {
            storage.close();
          }
        },
      },
      {
        name: 'record storage',
        async run(ctx) {
          const existing = own(ctx.state().backupStorages, p.name);
          if (existing && sameStorage(existing, p)) return null; // re-run after a crash: recorded already
          // Encryption on (the default): the storage's first KEK, made here and sealed before it enters the log.
          const encryption = p.encryption === 'off' ? undefined : firstKek(ctx.secrets, ctx.now());
          orThrow(await ctx.propose({ kind: CommandKind.BackupStorageCreated, at: ctx.now(), name: p.name, stype: p.stype, hostaddr: p.hostaddr, port: Number(p.port), path: p.path, ...s3RecordOf(p), ...(encryption ? { encryption } : {}) }));
          return null;
        },
      },
    ],
    result: (o, p) => ({ name: p.name, stype: p.stype, hostaddr: p.hostaddr, port: String(p.port), path: p.path, free_bytes: String(o['open storage'].freeBytes), encryption: p.encryption ?? 'on' }),
  };
}

function checkDelete(p: ParasOf<'delete_backup_storage'>, state: MetaState): void {
  if (!own(state.backupStorages, p.name)) throw KcmError.of('NOT_FOUND', `paras.name: backup storage ${p.name} does not exist`, { field: 'paras.name' });
  const sets = Object.values(state.backupSets).filter((s) => s.storageName === p.name);
  if (sets.length > 0) {
    throw KcmError.of('CONFLICT', `paras.name: backup storage ${p.name} still holds ${sets.length} backup set(s) (${sets.slice(0, 5).map((s) => s.id).join(', ')}); restores need them`, { field: 'paras.name' });
  }
}

export const deleteBackupStorage: JobOf<'delete_backup_storage', { 'forget storage': null }> = {
  jobType: 'delete_backup_storage',
  validate: checkDelete,
  lockKey: () => STORAGE_LOCK,
  steps: (p) => [
    {
      name: 'forget storage',
      async run(ctx) {
        if (!own(ctx.state().backupStorages, p.name)) return null; // re-run after a crash: gone already
        // The files stay on the storage host: kcm forgets the place, it never wipes backups.
        orThrow(await ctx.propose({ kind: CommandKind.BackupStorageDeleted, at: ctx.now(), name: p.name }));
        return null;
      },
    },
  ],
  result: () => ({}),
};
