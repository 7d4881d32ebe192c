// Job: rotate_backup_key (issue 33; docs/backup-encryption.md). Without retire_kek_id: a new
// key-encryption key, made and sealed here, becomes the one the storage's new objects are
// wrapped with; objects already stored keep their wrapped keys and are never rewritten, and
// the old KEKs stay to open them. With retire_kek_id: that old KEK is removed from the state,
// refused while it is active or any kept backup set or archived binlog needs it.

import { KcmError, type ParasOf } from '@kcm/protocol';
import { CommandKind } from '../meta/commands';
import { whyKekStays } from '../meta/backup-keys';
import { own } from '../meta/dict';
import type { MetaState } from '../meta/state';
import { newKekId, newSealedKek } from '../secrets/backup-keys';
import { orThrow } from './framework/errors';
import type { JobOf } from './framework/workflow';

type Paras = ParasOf<'rotate_backup_key'>;

function check(p: Paras, state: MetaState): void {
  const storage = own(state.backupStorages, p.name);
  if (!storage) throw KcmError.of('NOT_FOUND', `paras.name: backup storage ${p.name} does not exist`, { field: 'paras.name' });
  if (!storage.encryption) throw KcmError.of('CONFLICT', `paras.name: backup storage ${p.name} stores in clear (encryption off): it has no key to rotate`, { field: 'paras.name' });
  if (p.retire_kek_id !== undefined) {
    const why = whyKekStays(state, p.name, p.retire_kek_id);
    if (why) throw KcmError.of('CONFLICT', `paras.retire_kek_id: ${why}`, { field: 'paras.retire_kek_id' });
  }
}

type KeysAfter = { active_kek_id: string; kek_ids: string };

function keysOf(state: MetaState, name: string): KeysAfter {
  const encryption = own(state.backupStorages, name)?.encryption;
  return { active_kek_id: encryption?.activeKekId ?? '', kek_ids: (encryption?.keks ?? []).map((k) => k.id).join(',') };
}

export const rotateBackupKey: JobOf<'rotate_backup_key', { 'record key': KeysAfter }> = {
  jobType: 'rotate_backup_key',
  validate: check,
  // The storage jobs' queue: never beside a create or delete of the storage.
  lockKey: () => 'backup-storage',
  steps: (p) => [
    {
      name: 'record key',
      async run(ctx) {
        if (p.retire_kek_id !== undefined) {
          orThrow(await ctx.propose({ kind: CommandKind.BackupKekRetired, at: ctx.now(), storageName: p.name, kekId: p.retire_kek_id }));
        } else {
          // A step re-run after a leader change may add one more key: harmless, the newest is active.
          orThrow(await ctx.propose({ kind: CommandKind.BackupKekAdded, at: ctx.now(), storageName: p.name, kek: { id: newKekId(), sealed: newSealedKek(ctx.secrets), createdAt: ctx.now() } }));
        }
        return keysOf(ctx.state(), p.name);
      },
    },
  ],
  result: (o, p) => ({ name: p.name, ...o['record key'] }),
};
