// Install a MariaDB storage instance: directories, my.cnf, mariadb-install-db, start, the
// three accounts (admin for the agent, replication, the cluster's storage account) and the
// two-phase commit decision table (xa.ts).
// Idempotent by state as well as by op_id: each step finds its work done and moves on, so
// a re-run after a crash mid-install completes it instead of failing.

import { access, chmod, chown, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { AgentContext } from '../../../capability';
import { exec, ExecError } from '../../../ops/exec';
import {
  checkAccount,
  checkSpec,
  createLayoutDirs,
  emptyDir,
  instanceLayout,
  isEmptyDir,
  loadRecord,
  mariadbTools,
  mysqlUser,
  saveAdminAccount,
  saveRecord,
  type InstanceLayout,
} from './instance-layout';
import { runningPid, startInstance } from './lifecycle';
import { withStorageNodeSpace } from './disk-needs';
import { renderMyCnf, renderRoleCnf } from './my-cnf';
import type { MariaDbAccount, MariaDbInstallRequest, MariaDbInstanceReply, MariaDbInstanceSpec } from '@kcm/agent-api';
import { account, scrub, sqlString, withAdmin } from './sql';
import { XA_DECISIONS_DDL, xaDecisionsGrant } from './xa';
import { chooseEngineVersion, engineOf } from './engine';
import { serverVersionOf } from './server-version';

/** Every `D_$$_S` database (PostgreSQL database D, schema S): `_` is a LIKE wildcard, so it is escaped. */
export const CLUSTER_DATABASES_PATTERN = '%\\_$$\\_%';
const DB_PATTERN = /^[A-Za-z0-9_$%\\]{1,64}$/;

/** DDL and DML on the cluster's databases; nothing server-wide. */
export const STORAGE_PRIVILEGES = [
  'SELECT', 'INSERT', 'UPDATE', 'DELETE', 'CREATE', 'DROP', 'ALTER', 'INDEX', 'REFERENCES',
  'CREATE TEMPORARY TABLES', 'LOCK TABLES', 'CREATE VIEW', 'SHOW VIEW', 'TRIGGER',
].join(', ');

export const INITIALIZED_MARKER = '.kcm-initialized';
/** Holds the op_id of the install that created the instance dir. */
const CREATED_BY_OP_MARKER = '.kcm-created-by-op';

/**
 * Writes the instance's directories and config files (shared with seeding, which skips
 * mariadb-install-db). The agent's record is written first: an agent killed half-way leaves
 * directories that Remove (a rollback, delete_nodes) can still find and delete.
 * `createdByOp`: the install op that creates the instance, marked in its instance dir.
 */
export async function prepareInstanceFiles(ctx: AgentContext, requested: MariaDbInstanceSpec, admin: MariaDbAccount, createdByOp?: string): Promise<InstanceLayout> {
  // The engine first: a version that cannot be had leaves nothing behind.
  const spec = { ...requested, engine_version: await chooseEngineVersion(ctx, requested) };
  const layout = instanceLayout(spec);
  const previous = await loadRecord(ctx.stateDir, spec.port);
  await saveRecord(ctx.stateDir, { spec, installedAt: previous?.installedAt ?? new Date().toISOString() });
  await createLayoutDirs(layout);
  if (createdByOp !== undefined && (await creatorOp(layout)) === undefined) await writeFile(path.join(layout.instanceDir, CREATED_BY_OP_MARKER), createdByOp);
  const group = mysqlUser().gid;
  await writeFile(layout.myCnf, renderMyCnf(spec, layout, ctx.hostaddr), { mode: 0o640 });
  await chown(layout.myCnf, 0, group);
  // mysqld reads it as group mysql: the mode is set whatever the agent's umask (077) took away.
  await chmod(layout.myCnf, 0o640);
  if (!(await exists(layout.roleCnf))) {
    await writeFile(layout.roleCnf, renderRoleCnf('unassigned', spec.fullsync_level), { mode: 0o640 });
    await chown(layout.roleCnf, 0, group);
    await chmod(layout.roleCnf, 0o640);
  }
  await saveAdminAccount(layout, admin);
  return layout;
}

/** The op_id of the install that created the instance dir, if it has the marker. */
async function creatorOp(layout: InstanceLayout): Promise<string | undefined> {
  return readFile(path.join(layout.instanceDir, CREATED_BY_OP_MARKER), 'utf8').catch(() => undefined);
}

/**
 * An install never reuses an instance it did not create: directories left by a removed
 * instance, or by an install of another op killed half-way, would bring a stranger's data,
 * accounts and binlogs into a new storage node. A retry of the creating op (same op_id)
 * continues. A stopped stranger is moved aside (kept, not deleted: it may be someone's
 * data) and the new paths returned; a running one is refused.
 */
async function setAsideForeignInstance(ctx: AgentContext, layout: InstanceLayout, opId: string): Promise<string[]> {
  const creator = await creatorOp(layout);
  if (creator === opId) return [];
  const dirs = [];
  for (const dir of [layout.instanceDir, layout.logDir, layout.walDir]) if (!(await isEmptyDir(dir))) dirs.push(dir);
  if (dirs.length === 0) return [];
  const pid = await runningPid(layout);
  const by = creator === undefined ? 'an unknown op' : `op ${creator}`;
  if (pid) throw new Error(`port ${layout.port} has a running mariadbd (pid ${pid}) in ${layout.instanceDir}, created by ${by}, not by install ${opId}; refusing to touch it`);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const moved = [];
  for (const dir of dirs) {
    const aside = `${dir}.set-aside-${stamp}`;
    await rename(dir, aside);
    moved.push(aside);
  }
  ctx.logger.warn({ port: layout.port, op_id: opId, created_by: by, moved }, 'mariadb install found directories it did not create; moved them aside');
  return moved;
}

export async function installInstance(ctx: AgentContext, req: MariaDbInstallRequest): Promise<MariaDbInstanceReply> {
  const spec = checkSpec(req.spec);
  const admin = checkAccount('admin', req.admin);
  const replication = checkAccount('replication', req.replication);
  const storage = checkAccount('storage', req.storage);
  const patterns = req.storage_db_patterns.length ? req.storage_db_patterns : [CLUSTER_DATABASES_PATTERN];
  for (const p of patterns) if (!DB_PATTERN.test(p)) throw new Error(`storage_db_pattern ${JSON.stringify(p)} must match ${DB_PATTERN}`);
  const secrets = [admin.password, replication.password, storage.password];
  // A re-run of an install that got as far as an initialised data dir is not refused for
  // space: it writes nothing big any more.
  const initialized = await exists(path.join(instanceLayout(spec).instanceDir, INITIALIZED_MARKER));
  return withStorageNodeSpace(ctx, spec, { precheck: !initialized }, () => installChecked(ctx, req, spec, { admin, replication, storage }, patterns, secrets));
}

async function installChecked(
  ctx: AgentContext,
  req: MariaDbInstallRequest,
  spec: MariaDbInstanceSpec,
  { admin, replication, storage }: { admin: MariaDbAccount; replication: MariaDbAccount; storage: MariaDbAccount },
  patterns: string[],
  secrets: string[],
): Promise<MariaDbInstanceReply> {
  const movedAside = await setAsideForeignInstance(ctx, instanceLayout(spec), req.op_id);
  const layout = await prepareInstanceFiles(ctx, spec, admin, req.op_id);
  await initializeDataDir(ctx, layout);
  const started = await startInstance(ctx, layout);
  await createAdminAccount(layout, admin);
  const serverVersion = await withAdmin(layout, admin, secrets, async (s) => {
    // Accounts are local to each instance: they must not reach the binlog, or a standby
    // replicating from its master's first event would fail creating them a second time.
    await s.run('disable binlog for account set-up', 'SET SESSION sql_log_bin = 0');
    const anonymous = await s.rows<{ Host: string }>('list anonymous users', "SELECT Host FROM mysql.user WHERE User = ''");
    for (const { Host } of anonymous) await s.run('drop anonymous user', `DROP USER ${account('', Host)}`);
    await ensureUser(s, replication, '%');
    await s.run('grant replication', `GRANT REPLICATION SLAVE, BINLOG MONITOR, SLAVE MONITOR ON *.* TO ${account(replication.user, '%')}`);
    await ensureUser(s, storage, '%');
    for (const pattern of patterns) {
      await s.run('grant storage privileges', `GRANT ${STORAGE_PRIVILEGES} ON \`${pattern}\`.* TO ${account(storage.user, '%')}`);
    }
    // The decision table, local like the accounts (every instance makes its own; the rows
    // written into it later are replicated as any other). kcm_sys is no `D_$$_S` database:
    // catalog sync, table listings and logical dumps never see it.
    for (const ddl of XA_DECISIONS_DDL) await s.run('create the XA decision table', ddl);
    await s.run('grant XA decisions', xaDecisionsGrant(storage.user));
    return serverVersionOf(s);
  });
  ctx.logger.info({ port: spec.port, server_id: spec.server_id, admin: admin.user, replication: replication.user, storage: storage.user, server_version: serverVersion }, 'mariadb instance installed');
  const reply = { ...started, server_version: serverVersion };
  return movedAside.length === 0 ? reply : { ...reply, detail: `directories this install did not create were moved aside to ${movedAside.join(', ')}` };
}

async function ensureUser(s: { run(what: string, sql: string, values?: unknown[]): Promise<void> }, acct: MariaDbAccount, host: string): Promise<void> {
  await s.run(`create user ${acct.user}`, `CREATE USER IF NOT EXISTS ${account(acct.user, host)} IDENTIFIED BY ?`, [acct.password]);
  await s.run(`set password of ${acct.user}`, `ALTER USER ${account(acct.user, host)} IDENTIFIED BY ?`, [acct.password]);
}

/** mariadb-install-db once; a data dir without the marker is a half-done attempt and is redone. */
async function initializeDataDir(ctx: AgentContext, layout: InstanceLayout): Promise<void> {
  const marker = path.join(layout.instanceDir, INITIALIZED_MARKER);
  if (await exists(marker)) return;
  for (const dir of [layout.dataDir, layout.binlogDir, layout.redoDir, layout.tmpDir]) await emptyDir(dir);
  const started = Date.now();
  const engine = await engineOf(ctx, layout.port);
  await exec(
    engine.installDb,
    [
      `--defaults-file=${layout.myCnf}`,
      '--user=mysql',
      '--skip-test-db',
      // root@localhost logs in only through the socket as OS root: no password exists for it.
      '--auth-root-authentication-method=socket',
      '--skip-name-resolve',
      // The engine's own mariadbd, system tables and messages (the script passes what it does not know to mariadbd).
      ...engine.serverOptions,
    ],
    { timeoutMs: 180_000, cwd: layout.instanceDir },
  );
  await markInitialized(layout);
  ctx.logger.info({ port: layout.port, ms: Date.now() - started }, 'mariadb-install-db done');
}

/** Records that the data dir holds an initialized server (by mariadb-install-db or a restored copy). */
export async function markInitialized(layout: InstanceLayout): Promise<void> {
  await writeFile(path.join(layout.instanceDir, INITIALIZED_MARKER), new Date().toISOString());
}

/** A data dir about to be replaced is not initialized until the replacement is complete. */
export async function unmarkInitialized(layout: InstanceLayout): Promise<void> {
  await rm(path.join(layout.instanceDir, INITIALIZED_MARKER), { force: true });
}

/**
 * The admin account is made through the CLI as root over the socket (unix_socket auth:
 * mysql2 does not speak it). The password reaches the CLI on stdin, never argv.
 */
async function createAdminAccount(layout: InstanceLayout, admin: MariaDbAccount): Promise<void> {
  const who = account(admin.user, 'localhost');
  const sql = [
    'SET SESSION sql_log_bin = 0;',
    `CREATE USER IF NOT EXISTS ${who} IDENTIFIED BY ${sqlString(admin.password)};`,
    `ALTER USER ${who} IDENTIFIED BY ${sqlString(admin.password)};`,
    `GRANT ALL PRIVILEGES ON *.* TO ${who} WITH GRANT OPTION;`,
    '',
  ].join('\n');
  try {
    await exec(mariadbTools.client, ['--no-defaults', `--socket=${layout.socket}`, '--user=root', '--batch'], { input: sql, timeoutMs: 30_000 });
  } catch (err) {
    if (err instanceof ExecError) throw new Error(`creating the admin account failed: ${scrub(err.message, [admin.password])}`);
    throw err;
  }
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}
