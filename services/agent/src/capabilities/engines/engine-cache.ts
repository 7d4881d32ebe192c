// The host-wide engine cache: Debian's builds of each engine version unpacked side by side.
//
//   <cache>/mariadb-10.11.18/usr/...       dpkg -x of the version's packages
//   <cache>/mariadb-10.11.18/kcm-engine.json   written last: what was unpacked, from which build
//   <cache>/.fetch-<kind>-<version>-XXXX/  one fetch under way (apt-get download + dpkg -x)
//
// Several agents on one machine share the cache. A fetch unpacks into its own temporary
// directory and renames it into place only once complete: rename is atomic, so an engine
// directory either does not exist or is whole, and a half-unpacked one is never used. Two
// agents fetching the same version at once both unpack; the first rename wins and the other
// discards its copy (a few seconds of work, no lock to leave behind when an agent dies).

import { access, chmod, lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AgentFailure } from '@kcm/agent-api';
import { exec } from '../../ops/exec';
import {
  availableVersions,
  engineDirName,
  enginePackages,
  EngineVersionUnavailable,
  fdwPackage,
  indexPackage,
  parseMadison,
  postgresMajor,
  resolveVersion,
  versionFormatProblem,
  type EngineKind,
} from './engine-versions';

export const DEFAULT_ENGINE_CACHE = '/var/cache/kcm/engines';
const MARKER = 'kcm-engine.json';
const FETCH_TIMEOUT_MS = 10 * 60_000;
/** A fetch directory older than this belongs to an agent that died mid-fetch (no live fetch lasts it). */
const ABANDONED_FETCH_MS = 6 * 3600_000;

/** What kcm-engine.json records about one unpacked engine. */
export interface CachedEngine {
  kind: EngineKind;
  version: string;
  debianVersion: string;
  packages: string[];
  fetchedAt: string;
}

/** Where the system's PostgreSQL has kcm_ddl (scripts/setup.sh installs it there with PGXS). */
export interface SystemExtensionDirs {
  libDir(major: string): string;
  extensionDir(major: string): string;
}

const debianExtensionDirs: SystemExtensionDirs = {
  libDir: (major) => `/usr/lib/postgresql/${major}/lib`,
  extensionDir: (major) => `/usr/share/postgresql/${major}/extension`,
};

/** What the cache needs of apt and dpkg (a seam for tests of the cache's own logic). */
export interface DebianTools {
  /** The output of `apt-cache madison <pkg>`. */
  madison(pkg: string): Promise<string>;
  /** `apt-get download` of `pkg=version` specs (or bare names) into `dir`. */
  download(packages: string[], dir: string): Promise<void>;
  /** `dpkg -x deb dir`. */
  unpack(deb: string, dir: string): Promise<void>;
}

export const debianTools: DebianTools = {
  madison: async (pkg) => (await exec('apt-cache', ['madison', pkg], { timeoutMs: 60_000 })).stdout,
  download: async (packages, dir) => {
    await exec('apt-get', ['download', '-q', ...packages], { cwd: dir, timeoutMs: FETCH_TIMEOUT_MS });
  },
  unpack: async (deb, dir) => {
    await exec('dpkg', ['-x', deb, dir], { timeoutMs: FETCH_TIMEOUT_MS });
  },
};

/** kcm's own extension: linked from the system install, never copied (see linkKcmExtension). */
const KCM_EXTENSION = 'kcm_ddl';

export class EngineCache {
  private readonly fetching = new Map<string, Promise<CachedEngine>>();

  constructor(
    readonly dir: string = DEFAULT_ENGINE_CACHE,
    private readonly systemExtensions: SystemExtensionDirs = debianExtensionDirs,
    private readonly tools: DebianTools = debianTools,
  ) {}

  /** The engine's directory in the cache (whether or not it is there yet). */
  rootOf(kind: EngineKind, version: string): string {
    return path.join(this.dir, engineDirName(kind, version));
  }

  /**
   * Makes sure `version` of `kind` is unpacked in the cache, fetching it once. Safe to call
   * from many requests and many agents at once. A version the host's apt sources do not
   * carry fails with one error naming it and the versions they do carry.
   */
  async ensure(kind: EngineKind, version: string): Promise<CachedEngine> {
    const problem = versionFormatProblem(kind, version);
    if (problem) throw new AgentFailure('invalid_argument', problem);
    const root = this.rootOf(kind, version);
    let cached = await this.readMarker(root);
    if (!cached) {
      const key = engineDirName(kind, version);
      let fetch = this.fetching.get(key);
      if (!fetch) {
        fetch = this.fetch(kind, version, root).finally(() => this.fetching.delete(key));
        this.fetching.set(key, fetch);
      }
      cached = await fetch;
    }
    // Every time, not only after a fetch: kcm_ddl may be installed (or rebuilt with new
    // script files) after the engine was cached.
    if (kind === 'postgres') await this.linkKcmExtension(root, postgresMajor(version));
    return cached;
  }

  /** The versions of `kind` the host's apt sources carry (for errors and reports). */
  async availableVersions(kind: EngineKind, version: string): Promise<string[]> {
    return availableVersions(await this.madison(indexPackage(kind, version))).map((a) => a.version);
  }

  private async readMarker(root: string): Promise<CachedEngine | undefined> {
    try {
      return JSON.parse(await readFile(path.join(root, MARKER), 'utf8')) as CachedEngine;
    } catch {
      return undefined;
    }
  }

  private async madison(pkg: string): Promise<string[]> {
    return parseMadison(await this.tools.madison(pkg), pkg);
  }

  private async fetch(kind: EngineKind, version: string, root: string): Promise<CachedEngine> {
    let build;
    try {
      build = resolveVersion(kind, version, await this.madison(indexPackage(kind, version)));
    } catch (err) {
      if (err instanceof EngineVersionUnavailable) throw new AgentFailure('invalid_argument', err.message, { cause: err });
      throw err;
    }
    await this.makeCacheDir();
    await this.sweepAbandonedFetches();
    const work = await mkdtemp(path.join(this.dir, `.fetch-${engineDirName(kind, version)}-`));
    try {
      const debs = path.join(work, 'debs');
      const unpacked = path.join(work, 'root');
      await mkdir(debs);
      const packages = enginePackages(kind, version).map((pkg) => `${pkg}=${build.debianVersion}`);
      // mysql_fdw has its own versions: the sources' candidate for this major.
      if (kind === 'postgres') packages.push(fdwPackage(version));
      await this.tools.download(packages, debs);
      await mkdir(unpacked);
      const files = (await readdir(debs)).filter((f) => f.endsWith('.deb')).sort();
      if (files.length < packages.length) throw new Error(`apt-get download of ${packages.join(' ')} gave ${files.length} packages`);
      for (const deb of files) await this.tools.unpack(path.join(debs, deb), unpacked);
      // The servers run as mysql and postgres: they must be able to read everything.
      await chmod(unpacked, 0o755);
      const cached: CachedEngine = { kind, version, debianVersion: build.debianVersion, packages, fetchedAt: new Date().toISOString() };
      await writeFile(path.join(unpacked, MARKER), JSON.stringify(cached, null, 2), { mode: 0o644 });
      await chmod(path.join(unpacked, MARKER), 0o644);
      try {
        await rename(unpacked, root);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // Another agent's fetch of the same version finished first: use its copy.
        const theirs = code === 'ENOTEMPTY' || code === 'EEXIST' ? await this.readMarker(root) : undefined;
        if (!theirs) throw err;
        return theirs;
      }
      return cached;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** Deletes what agents killed mid-fetch left (each up to ~100 MB unpacked). */
  private async sweepAbandonedFetches(now = Date.now()): Promise<void> {
    for (const entry of await readdir(this.dir).catch(() => [] as string[])) {
      if (!entry.startsWith('.fetch-')) continue;
      const dir = path.join(this.dir, entry);
      const st = await stat(dir).catch(() => undefined);
      if (st && now - st.mtimeMs > ABANDONED_FETCH_MS) await rm(dir, { recursive: true, force: true });
    }
  }

  /** The cache directory and any parent it creates: 0755 whatever the agent's umask. */
  private async makeCacheDir(): Promise<void> {
    const missing: string[] = [];
    for (let dir = this.dir; !(await exists(dir)); dir = path.dirname(dir)) missing.push(dir);
    await mkdir(this.dir, { recursive: true });
    for (const dir of missing) await chmod(dir, 0o755);
  }

  /**
   * kcm_ddl is kcm's own, built on this host against the system PostgreSQL (scripts/setup.sh),
   * not a Debian package: symlinks to the system install put it into every cached engine, so
   * a rebuilt kcm_ddl takes effect in all of them at once. Links only for files that exist.
   */
  private async linkKcmExtension(root: string, major: string): Promise<void> {
    const usr = path.join(root, 'usr');
    const targets: [string, string][] = [];
    const lib = path.join(this.systemExtensions.libDir(major), `${KCM_EXTENSION}.so`);
    if (await exists(lib)) targets.push([lib, path.join(usr, 'lib', 'postgresql', major, 'lib', `${KCM_EXTENSION}.so`)]);
    const extDir = this.systemExtensions.extensionDir(major);
    for (const file of await readdir(extDir).catch(() => [] as string[])) {
      if (file.startsWith(`${KCM_EXTENSION}.`) || file.startsWith(`${KCM_EXTENSION}--`)) {
        targets.push([path.join(extDir, file), path.join(usr, 'share', 'postgresql', major, 'extension', file)]);
      }
    }
    for (const [target, link] of targets) {
      if (await lstat(link).then(() => true, () => false)) continue;
      await symlink(target, link).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err; // another agent linked it meanwhile
      });
    }
  }
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

/** True when `dir` holds a complete engine (for tests and reports). */
export async function isCompleteEngine(dir: string): Promise<boolean> {
  return (await stat(path.join(dir, MARKER)).catch(() => undefined))?.isFile() ?? false;
}
