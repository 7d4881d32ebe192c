// The agent's engines: which version an instance runs when none is named, and the programs
// of a named version (fetched into the host-wide cache on first use). Every instance runs
// from its recorded version's directory; only records written before engines were versioned
// name none, and those keep the system-wide binaries they were installed with.

import { exec } from '../../ops/exec';
import { EngineCache, type CachedEngine } from './engine-cache';
import { mariadbEngineAt, postgresEngineAt, SYSTEM_ENGINE, systemMariaDbEngine, systemPostgresEngine, type MariaDbEngine, type PostgresEngine } from './engine-paths';
import { indexPackage, postgresMajor, upstreamVersion, type EngineKind } from './engine-versions';

/** The PostgreSQL major whose Debian package names the system default (postgresql-15). */
const SYSTEM_POSTGRES_MAJOR = '15';

export interface EngineDefaults {
  /** A version, or '' for the version of the system-installed Debian package. */
  mariadb?: string;
  postgres?: string;
}

export interface PreparedEngine extends CachedEngine {
  dir: string;
}

export class Engines {
  private readonly measuredDefaults = new Map<EngineKind, Promise<string>>();

  constructor(
    readonly cache: EngineCache = new EngineCache(),
    private readonly defaults: EngineDefaults = {},
  ) {}

  /**
   * The version an install without one gets: the configured default, else the version of
   * the host's system-installed package (what scripts/setup.sh installed from the same apt
   * sources, so the archive has it).
   */
  defaultVersion(kind: EngineKind): Promise<string> {
    const configured = this.defaults[kind];
    if (configured) return Promise.resolve(configured);
    let measured = this.measuredDefaults.get(kind);
    if (!measured) {
      const pkg = indexPackage(kind, SYSTEM_POSTGRES_MAJOR);
      measured = exec('dpkg-query', ['-W', '-f=${Version}', pkg], { timeoutMs: 30_000 }).then(
        ({ stdout }) => upstreamVersion(stdout.trim()),
        (err: unknown) => {
          this.measuredDefaults.delete(kind);
          throw new Error(`no default ${kind} version: ${pkg} is not installed and the agent names none (--${kind}-version)`, { cause: err });
        },
      );
      this.measuredDefaults.set(kind, measured);
    }
    return measured;
  }

  /** `version`, or the default when it is ''. */
  async versionOrDefault(kind: EngineKind, version: string | undefined): Promise<string> {
    return version ? version : this.defaultVersion(kind);
  }

  /** Fetches the engine into the cache unless it is there; '' prepares the default. */
  async prepare(kind: EngineKind, version: string): Promise<PreparedEngine> {
    const resolved = await this.versionOrDefault(kind, version);
    const cached = await this.cache.ensure(kind, resolved);
    return { ...cached, dir: this.cache.rootOf(kind, resolved) };
  }

  /** The programs of MariaDB `version`; an instance record without one ran the system's. */
  async mariadb(version: string | undefined): Promise<MariaDbEngine> {
    if (!version || version === SYSTEM_ENGINE) return systemMariaDbEngine();
    await this.cache.ensure('mariadb', version);
    return mariadbEngineAt(this.cache.rootOf('mariadb', version), version);
  }

  async postgres(version: string | undefined): Promise<PostgresEngine> {
    if (!version || version === SYSTEM_ENGINE) return systemPostgresEngine(SYSTEM_POSTGRES_MAJOR);
    await this.cache.ensure('postgres', version);
    return postgresEngineAt(this.cache.rootOf('postgres', version), version, postgresMajor(version));
  }
}
