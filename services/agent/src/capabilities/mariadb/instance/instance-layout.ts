// Where a MariaDB instance lives on disk, and the agent's record of it.
//
//   <datadir>/<port>/            instance dir, root:mysql 0750
//     my.cnf                     generated (my-cnf.ts); includes kcm-role.cnf
//     kcm-role.cnf               master/standby settings, rewritten by ConfigureReplication
//     agent-admin.json           the agent's admin account, root 0600 (reconnect after restart)
//     data/                      mariadbd --datadir (mysql)
//     run/                       mariadbd.sock, mariadbd.pid (mysql)
//     tmp/                       --tmpdir of this instance only (parallel installs sharing /tmp fail)
//   <logdir>/<port>/             error.log, slow.log, mariadbd.out (mysql)
//   <wal_log_dir>/<port>/        binlog/ (binlogs, relay logs), redo/ (InnoDB redo) (mysql)
//
// mariadbd runs as the `mysql` OS user (never root): the agent (root) creates these
// directories and hands them to mysql. Every parent directory must be traversable by mysql.
// The registry file <stateDir>/mariadb/<port>.json lets the port-only commands (start, stop,
// probe, remove) find the directories again after an agent restart.

import { chmod, chown, lstat, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { osUser, type RunAs } from '../../../ops/exec';
import type { MariaDbAccount, MariaDbInstanceSpec } from '@kcm/agent-api';
import { AgentFailure } from '@kcm/agent-api';

export const MARIADB_OS_USER = 'mysql';

export interface InstanceLayout {
  port: number;
  instanceDir: string;
  myCnf: string;
  roleCnf: string;
  adminFile: string;
  dataDir: string;
  runDir: string;
  socket: string;
  pidFile: string;
  tmpDir: string;
  logDir: string;
  errorLog: string;
  slowLog: string;
  stdoutLog: string;
  walDir: string;
  binlogDir: string;
  redoDir: string;
}

export function instanceLayout(spec: Pick<MariaDbInstanceSpec, 'port' | 'datadir' | 'logdir' | 'wal_log_dir'>): InstanceLayout {
  const port = String(spec.port);
  const instanceDir = path.join(spec.datadir, port);
  const runDir = path.join(instanceDir, 'run');
  const logDir = path.join(spec.logdir, port);
  const walDir = path.join(spec.wal_log_dir, port);
  return {
    port: spec.port,
    instanceDir,
    myCnf: path.join(instanceDir, 'my.cnf'),
    roleCnf: path.join(instanceDir, 'kcm-role.cnf'),
    adminFile: path.join(instanceDir, 'agent-admin.json'),
    dataDir: path.join(instanceDir, 'data'),
    runDir,
    socket: path.join(runDir, 'mariadbd.sock'),
    pidFile: path.join(runDir, 'mariadbd.pid'),
    tmpDir: path.join(instanceDir, 'tmp'),
    logDir,
    errorLog: path.join(logDir, 'error.log'),
    slowLog: path.join(logDir, 'slow.log'),
    stdoutLog: path.join(logDir, 'mariadbd.out'),
    walDir,
    binlogDir: path.join(walDir, 'binlog'),
    redoDir: path.join(walDir, 'redo'),
  };
}

/** The directories mariadbd itself writes to (owned by mysql). */
export function serverOwnedDirs(layout: InstanceLayout): string[] {
  return [layout.dataDir, layout.runDir, layout.tmpDir, layout.logDir, layout.binlogDir, layout.redoDir];
}

// ---- validation: every request value that reaches a path, a config file or SQL -----------

const USER_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$/;

export function checkSpec(spec: MariaDbInstanceSpec | undefined | null): MariaDbInstanceSpec {
  if (!spec) throw new AgentFailure('invalid_argument', 'spec is required');
  if (!Number.isInteger(spec.port) || spec.port < 1024 || spec.port > 65535) throw new AgentFailure('invalid_argument', `port ${spec.port} must be 1024-65535`);
  for (const key of ['datadir', 'logdir', 'wal_log_dir'] as const) checkDir(key, spec[key]);
  if (!Number.isInteger(spec.server_id) || spec.server_id < 1 || spec.server_id > 2 ** 31 - 1) throw new AgentFailure('invalid_argument', `server_id ${spec.server_id} must be a positive integer`);
  if (!(spec.innodb_size_mb >= 16)) throw new AgentFailure('invalid_argument', `innodb_size ${spec.innodb_size_mb} MB must be at least 16`);
  if (!(spec.max_connections >= 10 && spec.max_connections <= 100_000)) throw new AgentFailure('invalid_argument', `max_connections ${spec.max_connections} must be 10-100000`);
  if (spec.dbcfg !== 0 && spec.dbcfg !== 1) throw new AgentFailure('invalid_argument', `dbcfg ${spec.dbcfg} must be 0 or 1`);
  if (!(spec.fullsync_level >= 0)) throw new AgentFailure('invalid_argument', `fullsync_level ${spec.fullsync_level} must be >= 0`);
  return spec;
}

export function checkPort(port: number): number {
  if (!Number.isInteger(port) || port < 1024 || port > 65535) throw new AgentFailure('invalid_argument', `port ${port} must be 1024-65535`);
  return port;
}

function checkDir(name: string, dir: string): void {
  // Paths go into my.cnf: no newlines, quotes or '#', and no '..' games.
  if (!path.isAbsolute(dir) || path.normalize(dir) !== dir.replace(/\/+$/, '') || /["'\\#\n\r\0]/.test(dir)) {
    throw new AgentFailure('invalid_argument', `${name} ${JSON.stringify(dir)} must be a plain absolute path`);
  }
}

/** Account names go into SQL as quoted identifiers; passwords only as escaped literals or connection options. */
export function checkAccount(role: string, account: MariaDbAccount | undefined | null): MariaDbAccount {
  if (!account || !USER_NAME.test(account.user)) throw new AgentFailure('invalid_argument', `${role} user must match ${USER_NAME}`);
  if (account.password.length < 8 || account.password.length > 200 || /[\0-\x1f\x7f]/.test(account.password)) {
    throw new AgentFailure('invalid_argument', `${role} password must be 8-200 printable characters`);
  }
  return account;
}

// ---- ownership --------------------------------------------------------------------------

export function mysqlUser(): RunAs {
  return osUser(MARIADB_OS_USER);
}

/**
 * mariadbd (as mysql) must be able to walk down to its directories. A root-owned 0700
 * parent (mkdtemp's default) would make it fail later with a bare EACCES; say so now.
 */
export async function assertTraversableByMysql(dir: string, mysql: RunAs): Promise<void> {
  let probe = path.dirname(dir);
  for (;;) {
    const st = await stat(probe).catch(() => undefined);
    if (st) {
      const reachable = st.uid === mysql.uid ? (st.mode & 0o100) !== 0 : st.gid === mysql.gid ? (st.mode & 0o010) !== 0 : (st.mode & 0o001) !== 0;
      if (!reachable) throw new Error(`${probe} is not traversable by OS user ${MARIADB_OS_USER} (needs o+x); mariadbd could not reach ${dir}`);
    }
    const parent = path.dirname(probe);
    if (parent === probe) return;
    probe = parent;
  }
}

export async function createLayoutDirs(layout: InstanceLayout): Promise<void> {
  const mysql = mysqlUser();
  // Per-port roots that hold server dirs: root-owned, group mysql may enter.
  for (const dir of [layout.instanceDir, layout.walDir]) {
    await assertTraversableByMysql(dir, mysql);
    await mkdir(dir, { recursive: true });
    await chown(dir, 0, mysql.gid);
    await chmod(dir, 0o750);
  }
  for (const dir of serverOwnedDirs(layout)) {
    await assertTraversableByMysql(dir, mysql);
    await mkdir(dir, { recursive: true });
    await chown(dir, mysql.uid, mysql.gid);
    await chmod(dir, 0o750);
  }
}

/** chown -R without spawning: files restored by mariabackup (as root) must belong to mysql. */
export async function chownTree(dir: string, owner: RunAs): Promise<void> {
  const st = await lstat(dir);
  await chown(dir, owner.uid, owner.gid);
  if (!st.isDirectory()) return;
  for (const entry of await readdir(dir)) await chownTree(path.join(dir, entry), owner);
}

export async function isEmptyDir(dir: string): Promise<boolean> {
  try {
    return (await readdir(dir)).length === 0;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw err;
  }
}

/** Empties a directory (keeping it, its owner and mode). */
export async function emptyDir(dir: string): Promise<void> {
  for (const entry of await readdir(dir).catch(() => [] as string[])) await rm(path.join(dir, entry), { recursive: true, force: true });
}

/** Moves a directory's contents into `target` (created), leaving the directory empty. */
export async function moveContents(dir: string, target: string): Promise<void> {
  await mkdir(target, { recursive: true });
  for (const entry of await readdir(dir).catch(() => [] as string[])) await rename(path.join(dir, entry), path.join(target, entry));
}

// ---- the agent's records: registry and admin secret ---------------------------------------

export interface InstanceRecord {
  /** spec.engine_version: the engine version it runs (engine.ts); absent in records of older agents. */
  spec: MariaDbInstanceSpec;
  installedAt: string;
  /** An UpgradeEngine under way (upgrade-engine.ts): its op and the version measured before it. */
  engineUpgrade?: { opId: string; versionBefore: string };
}

function registryFile(stateDir: string, port: number): string {
  return path.join(stateDir, 'mariadb', `${port}.json`);
}

export async function saveRecord(stateDir: string, record: InstanceRecord): Promise<void> {
  const file = registryFile(stateDir, record.spec.port);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(`${file}.tmp`, JSON.stringify(record), { mode: 0o600 });
  await rename(`${file}.tmp`, file);
}

export async function loadRecord(stateDir: string, port: number): Promise<InstanceRecord | undefined> {
  try {
    return JSON.parse(await readFile(registryFile(stateDir, checkPort(port)), 'utf8')) as InstanceRecord;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

export async function requireRecord(stateDir: string, port: number): Promise<InstanceRecord> {
  const record = await loadRecord(stateDir, port);
  if (!record) throw new AgentFailure('not_found', `no MariaDB instance on port ${port} is installed by this agent`);
  return record;
}

export async function dropRecord(stateDir: string, port: number): Promise<void> {
  await rm(registryFile(stateDir, port), { force: true });
}

export async function saveAdminAccount(layout: InstanceLayout, admin: MariaDbAccount): Promise<void> {
  await writeFile(`${layout.adminFile}.tmp`, JSON.stringify({ user: admin.user, password: admin.password }), { mode: 0o600 });
  await chmod(`${layout.adminFile}.tmp`, 0o600);
  await rename(`${layout.adminFile}.tmp`, layout.adminFile);
}

export async function loadAdminAccount(layout: InstanceLayout): Promise<MariaDbAccount> {
  return JSON.parse(await readFile(layout.adminFile, 'utf8')) as MariaDbAccount;
}

/**
 * Debian's MariaDB command-line client, which speaks to any 10.11 server. Everything that
 * must match the server's version (mariadbd, mariadb-install-db, mariadb-upgrade, mariabackup,
 * mbstream) comes from the instance's engine (engine.ts).
 */
export const mariadbTools = {
  client: '/usr/bin/mariadb',
};
