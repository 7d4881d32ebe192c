// Which engine versions exist and which Debian packages make one. Pure: no I/O, so the
// resolution rules are tested without apt (engine-versions.test.ts).
//
// A version is what an operator names and what the running server reports: MariaDB
// "10.11.18" (SELECT VERSION() says 10.11.18-MariaDB-...), PostgreSQL "15.18" (SHOW
// server_version says 15.18 (Debian ...)). It resolves to the Debian package version of the
// host's apt sources that carries it, e.g. 1:10.11.18-0+deb12u1.

export type EngineKind = 'mariadb' | 'postgres';

export const ENGINE_KINDS: readonly EngineKind[] = ['mariadb', 'postgres'];

const VERSION_FORMAT: Record<EngineKind, RegExp> = {
  mariadb: /^\d{1,3}\.\d{1,3}\.\d{1,3}$/,
  postgres: /^\d{2,3}\.\d{1,3}$/,
};

export const VERSION_EXAMPLE: Record<EngineKind, string> = { mariadb: '10.11.19', postgres: '15.20' };

export function isEngineKind(kind: string): kind is EngineKind {
  return kind === 'mariadb' || kind === 'postgres';
}

/** Why `version` is not a well-formed version of `kind`, or '' when it is. */
export function versionFormatProblem(kind: EngineKind, version: string): string {
  if (VERSION_FORMAT[kind].test(version)) return '';
  return `${JSON.stringify(version)} is not a ${kind === 'mariadb' ? 'MariaDB' : 'PostgreSQL'} version like ${VERSION_EXAMPLE[kind]}`;
}

/** PostgreSQL's major version ("15.18" -> "15"); Debian names its packages after it. */
export function postgresMajor(version: string): string {
  return version.split('.')[0];
}

/**
 * The package whose versions list the engine's versions: the server's own. MariaDB's
 * packages share one version, as do PostgreSQL's of one major.
 */
export function indexPackage(kind: EngineKind, version: string): string {
  return kind === 'mariadb' ? 'mariadb-server-core' : `postgresql-${postgresMajor(version)}`;
}

/**
 * The packages unpacked into one engine directory, all at the server's Debian version:
 * - mariadb-server-core: mariadbd, mariadb-install-db with its share files (system tables,
 *   error messages, charsets), mariadb-upgrade, resolveip;
 * - mariadb-client-core: mariadb, mariadb-check, my_print_defaults, which mariadb-upgrade and
 *   mariadb-install-db run from their own directory;
 * - mariadb-backup: mariabackup and mbstream, which must match the server that wrote the data;
 * - postgresql-N: postgres, initdb, pg_ctl, the server's lib and share;
 * - postgresql-client-N: pg_dump, pg_restore, psql;
 * - postgresql-plpython3-N: plpython3u, which kcm_ddl's triggers are written in.
 * mysql_fdw is versioned on its own (fdwPackage).
 */
export function enginePackages(kind: EngineKind, version: string): string[] {
  if (kind === 'mariadb') return ['mariadb-server-core', 'mariadb-client-core', 'mariadb-backup'];
  const major = postgresMajor(version);
  return [`postgresql-${major}`, `postgresql-client-${major}`, `postgresql-plpython3-${major}`];
}

/** mysql_fdw, built for one PostgreSQL major: the compute nodes' foreign tables. */
export function fdwPackage(version: string): string {
  return `postgresql-${postgresMajor(version)}-mysql-fdw`;
}

/** "1:10.11.18-0+deb12u1" -> "10.11.18"; "15.18-0+deb12u1" -> "15.18": no epoch, no Debian revision. */
export function upstreamVersion(debianVersion: string): string {
  const noEpoch = debianVersion.includes(':') ? debianVersion.slice(debianVersion.indexOf(':') + 1) : debianVersion;
  const dash = noEpoch.lastIndexOf('-');
  return dash < 0 ? noEpoch : noEpoch.slice(0, dash);
}

/** The Debian versions of a package that `apt-cache madison <pkg>` lists, newest first, without repeats. */
export function parseMadison(output: string, pkg: string): string[] {
  const versions: string[] = [];
  for (const line of output.split('\n')) {
    const [name, version] = line.split('|').map((field) => field.trim());
    if (name === pkg && version && !versions.includes(version)) versions.push(version);
  }
  return versions;
}

/** One version an engine can be had in, from the host's apt sources. */
export interface AvailableVersion {
  version: string;
  debianVersion: string;
}

/** The upstream versions behind a madison list (the first Debian build of each, i.e. the newest). */
export function availableVersions(debianVersions: string[]): AvailableVersion[] {
  const seen = new Map<string, AvailableVersion>();
  for (const debianVersion of debianVersions) {
    const version = upstreamVersion(debianVersion);
    if (!seen.has(version)) seen.set(version, { version, debianVersion });
  }
  return [...seen.values()];
}

export class EngineVersionUnavailable extends Error {
  constructor(
    readonly kind: EngineKind,
    readonly version: string,
    readonly available: string[],
  ) {
    const name = kind === 'mariadb' ? 'MariaDB' : 'PostgreSQL';
    const offer = available.length ? `available: ${available.join(', ')}` : 'none is available';
    super(`${name} ${version} is not in this host's apt sources (${offer})`);
    this.name = 'EngineVersionUnavailable';
  }
}

/** The Debian build of `version`, or EngineVersionUnavailable naming what the sources do offer. */
export function resolveVersion(kind: EngineKind, version: string, debianVersions: string[]): AvailableVersion {
  const available = availableVersions(debianVersions);
  const found = available.find((a) => a.version === version);
  if (!found) throw new EngineVersionUnavailable(kind, version, available.map((a) => a.version));
  return found;
}

/** The directory name of an engine in the cache: `<kind>-<version>`. */
export function engineDirName(kind: EngineKind, version: string): string {
  return `${kind}-${version}`;
}

/**
 * The version part of what a running server reports: "10.11.18-MariaDB-0+deb12u1" ->
 * "10.11.18", "15.18 (Debian 15.18-0+deb12u1)" -> "15.18"; '' for anything else.
 */
export function reportedVersion(serverText: string): string {
  return /^\d+(\.\d+)+/.exec(serverText.trim())?.[0] ?? '';
}
