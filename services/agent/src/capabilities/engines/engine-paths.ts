// Where the programs of one engine are, given the root it was unpacked into (Debian's own
// layout under <root>/usr). The system-wide install is the root "/": used only for instances
// an older agent installed before engines were versioned (their records name no version).

import path from 'node:path';

export interface MariaDbEngine {
  /** Upstream version, e.g. 10.11.18; 'system' for Debian's system-wide install. */
  version: string;
  root: string;
  mariadbd: string;
  installDb: string;
  upgrade: string;
  client: string;
  backup: string;
  mbstream: string;
  /**
   * Options every mariadbd of this engine is started with, so it reads its own error
   * messages, charsets and plugins rather than the system's (whose message count may
   * differ, which a server refuses to start with). mariadb-install-db takes them too.
   */
  serverOptions: string[];
}

export interface PostgresEngine {
  version: string;
  root: string;
  /** initdb, postgres, pg_ctl, pg_dump...: PostgreSQL finds its lib and share relative to them. */
  binDir: string;
  /** Where the server loads extension libraries from (mysql_fdw, kcm_ddl). */
  libDir: string;
  extensionDir: string;
}

export function mariadbEngineAt(root: string, version: string): MariaDbEngine {
  const usr = path.join(root, 'usr');
  const share = path.join(usr, 'share', 'mysql');
  return {
    version,
    root,
    mariadbd: path.join(usr, 'sbin', 'mariadbd'),
    installDb: path.join(usr, 'bin', 'mariadb-install-db'),
    upgrade: path.join(usr, 'bin', 'mariadb-upgrade'),
    client: path.join(usr, 'bin', 'mariadb'),
    backup: path.join(usr, 'bin', 'mariabackup'),
    mbstream: path.join(usr, 'bin', 'mbstream'),
    serverOptions: [
      `--basedir=${usr}`,
      `--lc-messages-dir=${share}`,
      `--character-sets-dir=${path.join(share, 'charsets')}`,
      `--plugin-dir=${path.join(usr, 'lib', 'mysql', 'plugin')}`,
    ],
  };
}

export function postgresEngineAt(root: string, version: string, major: string): PostgresEngine {
  const usr = path.join(root, 'usr');
  return {
    version,
    root,
    binDir: path.join(usr, 'lib', 'postgresql', major, 'bin'),
    libDir: path.join(usr, 'lib', 'postgresql', major, 'lib'),
    extensionDir: path.join(usr, 'share', 'postgresql', major, 'extension'),
  };
}

export const SYSTEM_ENGINE = 'system';

/** Debian's system-wide MariaDB, as an agent before versioned engines ran it (no extra options). */
export function systemMariaDbEngine(): MariaDbEngine {
  return { ...mariadbEngineAt('/', SYSTEM_ENGINE), mariadbd: '/usr/sbin/mariadbd', serverOptions: [] };
}

export function systemPostgresEngine(major = '15'): PostgresEngine {
  return postgresEngineAt('/', SYSTEM_ENGINE, major);
}
