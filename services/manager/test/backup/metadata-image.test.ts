// A metadata backup image starts a brand-new member: seeded as its first snapshot, the
// member comes up with every cluster, machine and kept job of the image, the backup job
// itself closed as done, and a directory that already holds Raft state is refused.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createLogger } from '@kcm/common';
import { buildManager } from '../../src/app';
import { parseManagerConfig } from '../../src/config';
import { metadataBackupImage, readMetadataBackup, readMetadataBackupFile, seedRaftStorage } from '../../src/backup/metadata-image';
import { CommandKind } from '../../src/meta/commands';
import { applyCommand } from '../../src/meta/fsm';
import { cluster, stateWith } from '../helpers/cluster-state';
import { testSecretsKeyFile } from '../../../../test/helpers/secrets';

function stateWithRunningBackupJob() {
  const state = stateWith(cluster('7', 'ready', [['1', '127.0.2.1', 57001], ['2', '127.0.2.2', 57001], ['3', '127.0.2.3', 57001]], [['4', '127.0.2.1', 58001]]));
  applyCommand(state, { kind: CommandKind.MachineRegistered, at: 1, hostaddr: '127.0.2.1', machineType: 'storage', portLow: 57000, portHigh: 57100, rackId: 'r', datadir: '/d', logdir: '/l', walLogDir: '/w', compDatadir: '/c', totalMemMb: 1, totalCpuCores: 1, facts: null });
  applyCommand(state, { kind: CommandKind.JobSubmitted, at: 2, jobType: 'set_machine', sentJobType: 'set_machine', paras: {}, requestId: null, lockKey: null, stepNames: ['x'] });
  applyCommand(state, { kind: CommandKind.JobFinished, at: 3, jobId: '1', outcome: { ok: true, errorCode: 0, errorInfo: '', attachment: {} } });
  applyCommand(state, { kind: CommandKind.JobSubmitted, at: 4, jobType: 'manual_backup_cluster', sentJobType: 'manual_backup_cluster', paras: { cluster_id: '-1' }, requestId: null, lockKey: 'metadata-backup', stepNames: ['store metadata image', 'record backup set'] });
  return state;
}

describe('metadata backup image', () => {
  it('reads back as the state it was taken from, with its own backup job closed as done', () => {
    const image = metadataBackupImage(stateWithRunningBackupJob(), { backupJobId: '2', appliedIndex: 42, takenAt: 5 });
    const restored = readMetadataBackup(image);
    expect(restored.info).toEqual({ backupJobId: '2', appliedIndex: 42, takenAt: 5 });
    expect(Object.keys(restored.state.clusters)).toEqual(['7']);
    expect(restored.state.jobs['2']).toMatchObject({ status: 'done', result: { ok: true, errorInfo: 'the metadata was restored from this backup' } });
    expect(restored.state.runQueues['metadata-backup']).toBeUndefined();
    expect(restored.state.jobs['1'].status).toBe('done');
    expect(() => readMetadataBackup(new TextEncoder().encode('{"format":1,"state":{}}'))).toThrow(/no kcm_metadata_backup header/);
  });

  it('a file whose bytes do not match the manifest beside it is refused', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-meta-file-'));
    try {
      const image = metadataBackupImage(stateWithRunningBackupJob(), { backupJobId: '2', appliedIndex: 42, takenAt: 5 });
      const file = path.join(dir, 'metadata.json');
      await writeFile(file, image);
      await writeFile(`${file}.manifest.json`, JSON.stringify({ bytes: image.length, sha256: createHash('sha256').update(image).digest('hex') }));
      expect((await readMetadataBackupFile(file)).length).toBe(image.length);
      image[10] ^= 1;
      await writeFile(file, image);
      await expect(readMetadataBackupFile(file)).rejects.toThrow(/does not match its manifest/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('seeds a brand-new member that starts with the whole state, and refuses a directory with Raft state', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kcm-meta-seed-'));
    const member = `127.0.99.${2 + Math.floor(Math.random() * 200)}:${20000 + Math.floor(Math.random() * 20000)}`;
    try {
      const restored = readMetadataBackup(metadataBackupImage(stateWithRunningBackupJob(), { backupJobId: '2', appliedIndex: 42, takenAt: 5 }));
      const config = parseManagerConfig({ member, dataDir: path.join(dir, 'data'), agentPort: 1, tickMs: 20, logLevel: 'silent', secretsKeyFile: testSecretsKeyFile() });
      await seedRaftStorage(path.join(config.dataDir, 'raft'), [member], restored);
      await expect(seedRaftStorage(path.join(config.dataDir, 'raft'), [member], restored)).rejects.toThrow(/already holds Raft state/);
      const manager = await buildManager(config, { logger: createLogger({ name: 'manager', level: 'silent' }) });
      try {
        const deadline = Date.now() + 20_000;
        while (!manager.leadership.isLeader && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        expect(manager.leadership.isLeader).toBe(true);
        await manager.store.linearizableRead();
        const state = manager.store.state();
        expect(Object.keys(state.clusters)).toEqual(['7']);
        expect(Object.keys(state.machines)).toEqual(['127.0.2.1/storage']);
        expect(state.jobs['2'].status).toBe('done');
        expect(manager.raft.status().conf.voters).toEqual([member]);
      } finally {
        await manager.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
