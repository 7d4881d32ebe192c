// Data keys of backup encryption at rest, wrapped by a storage's key-encryption key
// (secrets/backup-keys.ts, docs/backup-encryption.md): they unwrap only with that KEK under
// that KEK's id, and the KEK itself is kept sealed. A rotation adds a KEK for new objects;
// an old one is retired only when no kept object needs it.

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { newDataKey, newSealedKek, openKek, SEAL_META, unwrapDataKey, wrapDataKey } from '../src/secrets/backup-keys';
import { SecretBox } from '../src/secrets/secret-box';
import { sealAll } from '../../agent/src/capabilities/storage/sealed-stream';
import { applyBackupKekAdded, applyBackupKekRetired, whyKekStays } from '../src/meta/backup-keys';
import { applyBackupStorageCreated } from '../src/meta/backup';
import { CommandKind } from '../src/meta/commands';
import { emptyMetaState, type ArchivedBinlogRecord, type BackupKekRecord, type ShardBackupRecord } from '../src/meta/state';

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

describe('rotating and retiring a storage\'s key-encryption keys (meta/backup-keys.ts)', () => {
  const kek = (id: string): BackupKekRecord => ({ id, sealed: 'kcm-plain:v1:x', createdAt: 1 });
  const stateWithSetUnder = (kekId: string) => {
    const state = emptyMetaState();
    applyBackupStorageCreated(state, { kind: CommandKind.BackupStorageCreated, at: 1, name: 'b', stype: 'fs', hostaddr: '10.0.0.9', port: 1, path: '/b', encryption: { activeKekId: kekId, keks: [kek(kekId)] } });
    const shard = { key: 'cluster_1/backup_7/shard_1.mbstream', sealed: { kekId, wrappedKey: 'kcm-dek:v1:x' } } as ShardBackupRecord;
    state.backupSets['7'] = { id: '7', clusterId: '1', storageName: 'b', startedAt: 1, finishedAt: 2, shards: [shard], catalog: [] };
    return state;
  };

  it('a rotation makes the new key active and keeps the old one; the old one cannot be retired while a kept set needs it, nor the active one ever', () => {
    const state = stateWithSetUnder('kek_00000001');
    expect(applyBackupKekAdded(state, { kind: CommandKind.BackupKekAdded, at: 2, storageName: 'b', kek: kek('kek_00000002') }).ok).toBe(true);
    expect(state.backupStorages.b.encryption).toMatchObject({ activeKekId: 'kek_00000002', keks: [{ id: 'kek_00000001' }, { id: 'kek_00000002' }] });
    expect(whyKekStays(state, 'b', 'kek_00000001')).toMatch(/1 kept object\(s\) of backup storage b need kek_00000001 to be restored \(cluster_1\/backup_7\/shard_1\.mbstream\)/);
    expect(applyBackupKekRetired(state, { kind: CommandKind.BackupKekRetired, at: 3, storageName: 'b', kekId: 'kek_00000001' })).toMatchObject({ ok: false, refusal: 'CONFLICT' });
    expect(applyBackupKekRetired(state, { kind: CommandKind.BackupKekRetired, at: 3, storageName: 'b', kekId: 'kek_00000002' })).toMatchObject({ ok: false, refusal: 'CONFLICT', message: expect.stringMatching(/is the active key/) });
    // Once the set is gone (expired or deleted), the old key goes.
    delete state.backupSets['7'];
    expect(applyBackupKekRetired(state, { kind: CommandKind.BackupKekRetired, at: 4, storageName: 'b', kekId: 'kek_00000001' }).ok).toBe(true);
    expect(state.backupStorages.b.encryption!.keks.map((k) => k.id)).toEqual(['kek_00000002']);
  });

  it('an archived binlog wrapped by a key keeps it too; a storage in clear has no key to rotate', () => {
    const state = stateWithSetUnder('kek_00000003');
    delete state.backupSets['7'];
    applyBackupKekAdded(state, { kind: CommandKind.BackupKekAdded, at: 2, storageName: 'b', kek: kek('kek_00000004') });
    state.binlogArchives['1/1'] = { clusterId: '1', shardId: '1', files: [{ key: 'cluster_1/binlogs/x', storageName: 'b', sealed: { kekId: 'kek_00000003', wrappedKey: 'kcm-dek:v1:x' } } as ArchivedBinlogRecord] };
    expect(whyKekStays(state, 'b', 'kek_00000003')).toMatch(/cluster_1\/binlogs\/x/);
    applyBackupStorageCreated(state, { kind: CommandKind.BackupStorageCreated, at: 1, name: 'clear', stype: 'fs', hostaddr: '10.0.0.9', port: 1, path: '/c' });
    expect(applyBackupKekAdded(state, { kind: CommandKind.BackupKekAdded, at: 2, storageName: 'clear', kek: kek('kek_00000005') })).toMatchObject({ ok: false, refusal: 'CONFLICT' });
  });
});

describe('decrypting by hand (scripts/backup-open.mjs, docs/backup-encryption.md)', () => {
  it('with the KEK and the object\'s manifest, as the storage keeps them, the script gives back the plaintext', async () => {
    const kek = randomBytes(32);
    const { dataKey, meta } = newDataKey(kek, 'kek_0000000b');
    const plain = randomBytes(2 * 1024 * 1024 + 5);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-open-'));
    try {
      const manifest = path.join(dir, 'shard_1.mbstream.manifest.json');
      await writeFile(manifest, JSON.stringify({ key: 'shard_1.mbstream', meta }));
      const script = path.join(__dirname, '../../../scripts/backup-open.mjs');
      const out = execFileSync('node', [script, '--kek', kek.toString('base64'), '--manifest', manifest], { input: sealAll(dataKey, plain), maxBuffer: 64 * 1024 * 1024 });
      expect(out.equals(plain)).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
