// The engine cache's own logic, with apt and dpkg replaced by a recording stand-in: how a
// version resolves to a Debian build, what an unknown version says, and that a cache shared
// by several agents only ever shows complete engine directories. (The real fetch of real
// builds runs in test/cluster/engine-versions.test.ts.)

import { mkdir, mkdtemp, readdir, readFile, readlink, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentFailure } from '@kcm/agent-api';
import { EngineCache, type DebianTools } from '../../src/capabilities/engines/engine-cache';
import {
  availableVersions,
  enginePackages,
  parseMadison,
  reportedVersion,
  resolveVersion,
  upstreamVersion,
  versionFormatProblem,
} from '../../src/capabilities/engines/engine-versions';

const MARIADB_MADISON = [
  'mariadb-server-core | 1:10.11.19-0+deb12u1 | http://deb.debian.org/debian-security bookworm-security/main amd64 Packages',
  'mariadb-server-core | 1:10.11.18-0+deb12u1 | http://deb.debian.org/debian bookworm/main amd64 Packages',
  '',
].join('\n');
const POSTGRES_MADISON = [
  'postgresql-15 | 15.20-0+deb12u1 | http://deb.debian.org/debian-security bookworm-security/main amd64 Packages',
  'postgresql-15 | 15.18-0+deb12u1 | http://deb.debian.org/debian bookworm/main amd64 Packages',
].join('\n');

describe('engine versions', () => {
  it('a Debian version reads as the upstream version the server reports', () => {
    expect(upstreamVersion('1:10.11.18-0+deb12u1')).toBe('10.11.18');
    expect(upstreamVersion('15.20-0+deb12u1')).toBe('15.20');
    expect(reportedVersion('10.11.18-MariaDB-0+deb12u1')).toBe('10.11.18');
    expect(reportedVersion('15.18 (Debian 15.18-0+deb12u1)')).toBe('15.18');
  });

  it('madison output lists the builds of the named package only, newest first', () => {
    expect(parseMadison(`${MARIADB_MADISON}other | 9.9 | x\n`, 'mariadb-server-core')).toEqual(['1:10.11.19-0+deb12u1', '1:10.11.18-0+deb12u1']);
    expect(availableVersions(parseMadison(POSTGRES_MADISON, 'postgresql-15')).map((a) => a.version)).toEqual(['15.20', '15.18']);
  });

  it('a version resolves to its Debian build; one the sources lack names those they have', () => {
    expect(resolveVersion('mariadb', '10.11.18', parseMadison(MARIADB_MADISON, 'mariadb-server-core')).debianVersion).toBe('1:10.11.18-0+deb12u1');
    expect(() => resolveVersion('mariadb', '10.11.2', parseMadison(MARIADB_MADISON, 'mariadb-server-core'))).toThrow(
      'MariaDB 10.11.2 is not in this host\'s apt sources (available: 10.11.19, 10.11.18)',
    );
  });

  it('a malformed version is refused with the shape expected', () => {
    expect(versionFormatProblem('mariadb', '10.11')).toMatch(/not a MariaDB version like 10.11.19/);
    expect(versionFormatProblem('postgres', '15.18; rm -rf /')).toMatch(/not a PostgreSQL version like 15.20/);
    expect(versionFormatProblem('postgres', '15.18')).toBe('');
  });

  it('MariaDB brings its backup tool and client of the same build; PostgreSQL its client and plpython3', () => {
    expect(enginePackages('mariadb', '10.11.18')).toEqual(['mariadb-server-core', 'mariadb-client-core', 'mariadb-backup']);
    expect(enginePackages('postgres', '15.18')).toEqual(['postgresql-15', 'postgresql-client-15', 'postgresql-plpython3-15']);
  });
});

/** apt and dpkg as files: a "deb" is a JSON list of files it unpacks; every call is recorded. */
function fakeDebian(opts: { failUnpack?: boolean; unpackDelayMs?: number } = {}): DebianTools & { downloads: string[][] } {
  const downloads: string[][] = [];
  return {
    downloads,
    madison: async (pkg) => (pkg === 'mariadb-server-core' ? MARIADB_MADISON : pkg === 'postgresql-15' ? POSTGRES_MADISON : ''),
    download: async (packages, dir) => {
      downloads.push(packages);
      for (const spec of packages) {
        const name = spec.split('=')[0];
        await writeFile(path.join(dir, `${name}.deb`), JSON.stringify([`usr/share/doc/${name}/copyright`]));
      }
    },
    unpack: async (deb, dir) => {
      await new Promise((r) => setTimeout(r, opts.unpackDelayMs ?? 0));
      if (opts.failUnpack) throw new Error(`dpkg -x ${deb} failed`);
      for (const file of JSON.parse(await readFile(deb, 'utf8')) as string[]) {
        await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
        await writeFile(path.join(dir, file), 'x');
      }
    },
  };
}

describe('the engine cache', () => {
  let tmp: string;
  let cacheDir: string;
  let system: { libDir: (major: string) => string; extensionDir: (major: string) => string };

  beforeEach(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'kcm-engine-cache-'));
    cacheDir = path.join(tmp, 'cache', 'engines');
    system = { libDir: () => path.join(tmp, 'syslib'), extensionDir: () => path.join(tmp, 'sysext') };
  });
  afterEach(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  it('fetches a version once, at its Debian build, and records what it unpacked', async () => {
    const debian = fakeDebian();
    const cache = new EngineCache(cacheDir, system, debian);
    const first = await cache.ensure('mariadb', '10.11.18');
    await cache.ensure('mariadb', '10.11.18');
    expect(debian.downloads).toEqual([['mariadb-server-core=1:10.11.18-0+deb12u1', 'mariadb-client-core=1:10.11.18-0+deb12u1', 'mariadb-backup=1:10.11.18-0+deb12u1']]);
    expect(first).toMatchObject({ kind: 'mariadb', version: '10.11.18', debianVersion: '1:10.11.18-0+deb12u1' });
    expect(await readdir(cacheDir)).toEqual(['mariadb-10.11.18']);
    expect(await readdir(path.join(cacheDir, 'mariadb-10.11.18', 'usr', 'share', 'doc'))).toEqual(['mariadb-backup', 'mariadb-client-core', 'mariadb-server-core']);
  });

  it('two agents sharing the cache and fetching at once end with one complete directory and nothing half-done', async () => {
    const a = new EngineCache(cacheDir, system, fakeDebian({ unpackDelayMs: 20 }));
    const b = new EngineCache(cacheDir, system, fakeDebian({ unpackDelayMs: 5 }));
    const results = await Promise.all([a.ensure('mariadb', '10.11.19'), b.ensure('mariadb', '10.11.19'), a.ensure('mariadb', '10.11.19')]);
    expect(results.map((r) => r.debianVersion)).toEqual(Array(3).fill('1:10.11.19-0+deb12u1'));
    expect(await readdir(cacheDir)).toEqual(['mariadb-10.11.19']);
    const marker = JSON.parse(await readFile(path.join(cacheDir, 'mariadb-10.11.19', 'kcm-engine.json'), 'utf8'));
    expect(marker.version).toBe('10.11.19');
  });

  it('a fetch that fails part-way leaves no engine directory and no temporary one', async () => {
    const cache = new EngineCache(cacheDir, system, fakeDebian({ failUnpack: true }));
    await expect(cache.ensure('mariadb', '10.11.18')).rejects.toThrow(/dpkg -x .* failed/);
    expect(await readdir(cacheDir)).toEqual([]);
  });

  it('a fetch directory an agent killed mid-fetch left hours ago is swept by the next fetch; a recent one is left to its fetch', async () => {
    await mkdir(path.join(cacheDir, '.fetch-mariadb-10.11.18-dead'), { recursive: true });
    await mkdir(path.join(cacheDir, '.fetch-mariadb-10.11.19-live'), { recursive: true });
    const hoursAgo = new Date(Date.now() - 7 * 3600_000);
    await utimes(path.join(cacheDir, '.fetch-mariadb-10.11.18-dead'), hoursAgo, hoursAgo);
    await new EngineCache(cacheDir, system, fakeDebian()).ensure('mariadb', '10.11.18');
    expect((await readdir(cacheDir)).sort()).toEqual(['.fetch-mariadb-10.11.19-live', 'mariadb-10.11.18']);
  });

  it('a version the sources lack fails with one error naming it and the available ones, downloading nothing', async () => {
    const debian = fakeDebian();
    const cache = new EngineCache(cacheDir, system, debian);
    const err = await cache.ensure('postgres', '15.3').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentFailure);
    expect((err as AgentFailure).kind).toBe('invalid_argument');
    expect((err as Error).message).toBe("PostgreSQL 15.3 is not in this host's apt sources (available: 15.20, 15.18)");
    expect(debian.downloads).toEqual([]);
  });

  it('PostgreSQL brings mysql_fdw for its major and links kcm_ddl from the system install, also when it is installed later', async () => {
    const debian = fakeDebian();
    const cache = new EngineCache(cacheDir, system, debian);
    await cache.ensure('postgres', '15.18');
    expect(debian.downloads[0]).toEqual(['postgresql-15=15.18-0+deb12u1', 'postgresql-client-15=15.18-0+deb12u1', 'postgresql-plpython3-15=15.18-0+deb12u1', 'postgresql-15-mysql-fdw']);
    // kcm_ddl built and installed after the engine was cached (scripts/setup.sh, or a rebuild adding a script).
    await mkdir(system.libDir('15'), { recursive: true });
    await mkdir(system.extensionDir('15'), { recursive: true });
    for (const file of ['kcm_ddl.control', 'kcm_ddl--1.0.sql']) await writeFile(path.join(system.extensionDir('15'), file), 'x');
    await writeFile(path.join(system.libDir('15'), 'kcm_ddl.so'), 'x');
    await mkdir(path.join(cacheDir, 'postgres-15.18', 'usr', 'lib', 'postgresql', '15', 'lib'), { recursive: true });
    await mkdir(path.join(cacheDir, 'postgres-15.18', 'usr', 'share', 'postgresql', '15', 'extension'), { recursive: true });
    await cache.ensure('postgres', '15.18');
    expect(await readlink(path.join(cacheDir, 'postgres-15.18', 'usr', 'lib', 'postgresql', '15', 'lib', 'kcm_ddl.so'))).toBe(path.join(system.libDir('15'), 'kcm_ddl.so'));
    expect((await readdir(path.join(cacheDir, 'postgres-15.18', 'usr', 'share', 'postgresql', '15', 'extension'))).sort()).toEqual(['kcm_ddl--1.0.sql', 'kcm_ddl.control']);
    expect(debian.downloads).toHaveLength(1);
  });
});
