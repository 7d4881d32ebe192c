// `kcm local down --purge` removes the instances' cgroups of its own host addresses, on a
// stand-in cpu hierarchy (plain directories, named as the agent names them).

import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { instanceCgroupDir } from '../../../agent/src/capabilities/cgroup/cpu-limit';
import { isInstanceCgroupOf, purgeInstanceCgroups } from '../../src/local/cgroups';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'kcm-cgroup-purge-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('purging the local deployment instance cgroups', () => {
  const hierarchy = async () => ({ version: 'v1' as const, root });

  it('removes every instance cgroup of the deployment host addresses and keeps those of other hosts', async () => {
    const ours = [
      instanceCgroupDir({ version: 'v1', root }, { kind: 'mysql', hostaddr: '127.0.2.231', port: 57001 }),
      instanceCgroupDir({ version: 'v1', root }, { kind: 'pg', hostaddr: '127.0.2.232', port: 57010 }),
    ];
    const theirs = instanceCgroupDir({ version: 'v1', root }, { kind: 'mysql', hostaddr: '127.0.2.2', port: 57001 });
    for (const dir of [...ours, theirs]) await mkdir(dir, { recursive: true });

    const purge = await purgeInstanceCgroups(['127.0.2.231', '127.0.2.232'], hierarchy);
    expect(purge).toEqual({ removed: ours.sort(), problems: [] });
    expect(await readdir(path.join(root, 'kcm'))).toEqual([path.basename(theirs)]);
  });

  it('removes the kcm parent once no instance cgroup is left in it', async () => {
    await mkdir(instanceCgroupDir({ version: 'v1', root }, { kind: 'mysql', hostaddr: '127.0.2.231', port: 57001 }), { recursive: true });
    await purgeInstanceCgroups(['127.0.2.231'], hierarchy);
    expect(await readdir(root)).toEqual([]);
  });

  it('reports a cgroup it could not remove instead of calling the purge clean', async () => {
    const busy = instanceCgroupDir({ version: 'v1', root }, { kind: 'pg', hostaddr: '127.0.2.231', port: 57002 });
    await mkdir(path.join(busy, 'child'), { recursive: true }); // not empty: rmdir fails as a populated cgroup would
    const purge = await purgeInstanceCgroups(['127.0.2.231'], hierarchy);
    expect(purge.removed).toEqual([]);
    expect(purge.problems).toEqual([expect.stringContaining(busy)]);
  });

  it('matches only the agent naming: kind, exact address, a port', () => {
    expect(isInstanceCgroupOf('mysql-127.0.2.1-57001', ['127.0.2.1'])).toBe(true);
    expect(isInstanceCgroupOf('pg-127.0.2.1-57001', ['127.0.2.1'])).toBe(true);
    expect(isInstanceCgroupOf('mysql-127.0.2.11-57001', ['127.0.2.1'])).toBe(false);
    expect(isInstanceCgroupOf('mysql-127.0.2.1-57001-x', ['127.0.2.1'])).toBe(false);
    expect(isInstanceCgroupOf('other-127.0.2.1-57001', ['127.0.2.1'])).toBe(false);
  });
});
