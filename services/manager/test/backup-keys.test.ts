// Data keys of backup encryption at rest, wrapped by a storage's key-encryption key
// (secrets/backup-keys.ts, docs/backup-encryption.md): they unwrap only with that KEK under
// that KEK's id, and the KEK itself is kept sealed.

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newDataKey, newSealedKek, openKek, SEAL_META, unwrapDataKey, wrapDataKey } from '../src/secrets/backup-keys';
import { SecretBox } from '../src/secrets/secret-box';

describe('backup data keys', () => {
  const box = SecretBox.withKey(randomBytes(32));

  it('a new data key unwraps with its KEK and id, and with no other', () => {
    const sealedKek = newSealedKek(box);
    expect(sealedKek.startsWith('kcm-sealed:v1:')).toBe(true);
    const kek = openKek(box, sealedKek);
    const { dataKey, meta } = newDataKey(kek, 'kek_00000001');
    expect(meta[SEAL_META.kekId]).toBe('kek_00000001');
    expect(unwrapDataKey(kek, 'kek_00000001', meta[SEAL_META.wrappedKey]).equals(dataKey)).toBe(true);
    expect(() => unwrapDataKey(kek, 'kek_00000002', meta[SEAL_META.wrappedKey])).toThrow(/does not unwrap/);
    expect(() => unwrapDataKey(randomBytes(32), 'kek_00000001', meta[SEAL_META.wrappedKey])).toThrow(/does not unwrap/);
  });

  it('a wrapped key does not contain the data key', () => {
    const kek = randomBytes(32);
    const dataKey = randomBytes(32);
    const wrapped = Buffer.from(wrapDataKey(kek, 'kek_0000000a', dataKey).slice('kcm-dek:v1:'.length), 'base64url');
    expect(wrapped.includes(dataKey)).toBe(false);
  });
});
