// The manager's BackupStorage (stype fs) against a real agent server in this process: the
// verify primitive a restore runs before writing anything refuses an altered backup set.
import { mkdtempSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { startAgent, type RunningAgent } from '@kcm/agent';
import { KcmError } from '@kcm/protocol';
import { openBackupStorage, requireIntact, type BackupStorage } from '@kcm/manager';

describe('BackupStorage fs through the storage host agent', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'kcm-bstore-'));
  const root = path.join(tmp, 'backups');
  let agent: RunningAgent;
  let storage: BackupStorage;

  beforeAll(async () => {
    agent = await startAgent({ hostaddr: '127.0.0.1', port: 0, logger: silentLogger(), stateDir: path.join(tmp, 'agent') });
    storage = openBackupStorage({ name: 'local', stype: 'fs', hostaddr: '127.0.0.1', port: Number(agent.address.split(':')[1]), path: root, createdAt: 0 });
    await storage.open();
  });

  afterAll(async () => {
    storage.close();
    await agent.stop();
    await rm(tmp, { recursive: true, force: true });
  });

  it('a backup set whose file was altered is refused with DATA_CHECK_FAILED naming the file', async () => {
    const keys = ['cluster_1/backup_7/shard_1.mbstream', 'cluster_1/backup_7/shard_2.mbstream'];
    for (const key of keys) await storage.put(key, Buffer.alloc(200_000, key.length));
    await requireIntact(storage, keys); // whole: no error

    const altered = path.join(root, keys[1]);
    const bytes = await readFile(altered);
    bytes[123_456] ^= 0xff;
    await writeFile(altered, bytes);

    const err = await requireIntact(storage, keys).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KcmError);
    expect((err as KcmError).errorName).toBe('DATA_CHECK_FAILED');
    expect((err as Error).message).toMatch(/shard_2\.mbstream: sha256 is [0-9a-f]{64}, manifest says/);
    expect((err as Error).message).not.toMatch(/shard_1/);
  });

  it('a missing object is refused the same way', async () => {
    await expect(requireIntact(storage, ['cluster_1/backup_8/shard_1.mbstream'])).rejects.toThrow(/backup_8\/shard_1\.mbstream: .*no object/);
  });

  it('lists what it stored with sizes and checksums', async () => {
    const listed = await storage.list('cluster_1/backup_7/');
    expect(listed.map((o) => [o.key, o.bytes])).toEqual([
      ['cluster_1/backup_7/shard_1.mbstream', 200_000],
      ['cluster_1/backup_7/shard_2.mbstream', 200_000],
    ]);
    expect(listed.every((o) => /^[0-9a-f]{64}$/.test(o.sha256))).toBe(true);
  });
});
