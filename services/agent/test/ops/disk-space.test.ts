// A full disk named in the failures it causes (issue 35, defect 3): checked before work that
// writes a directory, and recognised in a failure (ENOSPC, or any failure while the disk is full).

import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentFailure, agentStatusOf, catalogErrorOf, AgentCallError } from '@kcm/agent-api';
import { freeBytes, fullDiskOr, namingFullDisk, requireFreeSpace } from '../../src/ops/disk-space';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-disk-'));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

async function failureOf(p: Promise<unknown>): Promise<AgentFailure> {
  try {
    await p;
  } catch (err) {
    if (err instanceof AgentFailure) return err;
    throw err;
  }
  throw new Error('expected an AgentFailure');
}

describe('disk space around work that writes a directory', () => {
  it('refuses work whose directory has less free space than it needs, naming the directory, the host and the free bytes', async () => {
    const datadir = path.join(tmp, 'not-yet', 'data');
    const free = await freeBytes(datadir);
    await expect(requireFreeSpace('127.0.2.1', [{ what: 'datadir', dir: datadir, bytes: 1 }])).resolves.toBeUndefined();
    const err = await failureOf(requireFreeSpace('127.0.2.1', [{ what: 'datadir', dir: datadir, bytes: free + 2 ** 40 }]));
    expect(err.kind).toBe('no_space');
    expect(err.message).toMatch(new RegExp(`^not enough disk space: datadir ${datadir} on 127\\.0\\.2\\.1 has .* free \\(\\d+ bytes\\), .* needed$`));
    // The manager reads it as NO_RESOURCES.
    expect(catalogErrorOf(new AgentCallError('127.0.2.1:58100', agentStatusOf(err), err.message))).toBe('NO_RESOURCES');
  });

  it('sums the needs of directories on one filesystem', async () => {
    const free = await freeBytes(tmp);
    const half = Math.floor(free / 2) + 2 ** 20;
    const err = await failureOf(requireFreeSpace('h', [{ what: 'datadir', dir: path.join(tmp, 'a'), bytes: half }, { what: 'wal_log_dir', dir: path.join(tmp, 'b'), bytes: half }]));
    expect(err.message).toMatch(/shared with wal_log_dir .*\/b/);
  });

  it('reports a failure that says ENOSPC as the full disk, keeping the original message', async () => {
    const enospc = Object.assign(new Error('write EPIPE'), { cause: Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }) });
    const err = await failureOf(namingFullDisk('127.0.2.1', [{ what: 'datadir', dir: tmp, bytes: 1 }], () => Promise.reject(enospc)));
    expect(err.kind).toBe('no_space');
    expect(err.message).toMatch(new RegExp(`^not enough disk space: datadir ${tmp} on 127\\.0\\.2\\.1 has .*; write EPIPE$`));
    expect(err.cause).toBe(enospc);
  });

  it('reports any failure as the full disk while a directory is below its need, and leaves others alone', async () => {
    const exit1 = new Error('mariadb-install-db exited with 1');
    const err = await failureOf(namingFullDisk('h', [{ what: 'datadir', dir: tmp, bytes: 2 ** 60 }], () => Promise.reject(exit1)));
    expect(err.message).toMatch(/^not enough disk space: datadir .* on h has .*; mariadb-install-db exited with 1$/);
    await expect(namingFullDisk('h', [{ what: 'datadir', dir: tmp, bytes: 1 }], () => Promise.reject(exit1))).rejects.toBe(exit1);
    await expect(namingFullDisk('h', [{ what: 'datadir', dir: tmp, bytes: 1 }], async () => 7)).resolves.toBe(7);
  });

  it('names a backup storage root whose writes failed with ENOSPC', async () => {
    const err = (await fullDiskOr(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }), 'backup storage root', tmp)) as AgentFailure;
    expect(err.message).toMatch(new RegExp(`^not enough disk space: backup storage root ${tmp} has `));
    const other = new Error('EACCES');
    expect(await fullDiskOr(other, 'backup storage root', tmp)).toBe(other);
  });
});
