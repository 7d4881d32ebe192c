/**
 * Key rotation of a backup storage's encryption at rest (beyond the spec's list, issue 33;
 * docs/backup-encryption.md): rotate_backup_key makes a new key-encryption key the one new
 * objects are wrapped with; old objects keep theirs. With retire_kek_id it retires an old
 * key instead, refused while it is active or a kept object needs it.
 */
import { z } from 'zod';
import { formatted, type Parsed } from '../formats';
import { parseStorageName } from './backup-storage';

const KEK_ID = /^kek_[0-9a-f]{8}$/;
function parseKekId(s: string): Parsed<string> {
  return KEK_ID.test(s) ? { ok: true, value: s } : { ok: false, rule: 'must be a key id kek_ and 8 hex digits' };
}

export const rotateBackupKeyParas = z.object({
  name: formatted(parseStorageName, 'storage name [A-Za-z0-9_-], at most 64'),
  /** Retire this older key instead of rotating (get_status of a rotation lists the storage's keys). */
  retire_kek_id: formatted(parseKekId, 'key id kek_<8 hex>').optional(),
});
