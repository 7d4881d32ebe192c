// Install, start, stop and remove a compute instance. Each is idempotent on its own (it
// looks at what exists before acting), and the op ledger in index.ts adds op_id replay.

import { access, chown, mkdir, readdir, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { makeDirWithMode, type Logger } from '@kcm/common';
import { exec, type RunAs } from '../../ops/exec';
import { writeInstanceConfig, validateVariables } from './config';
import { ADMIN_ROLE, instanceDatadir, validateIdentifier, validatePort, type InstanceRegistry, type PostgresInstance } from './layout';
import { killOrphanedBackends, postmasterStatus, startPostmaster, stopPostmaster } from './postmaster';
import { ident, literal, withAdmin } from './admin-session';
import { scramSha256Verifier } from './scram';
import { ddlHooksAvailable, ensureDdlHooks } from './ddl-hooks';
import type { InstallPostgresRequest, PostgresInstanceReply } from '@kcm/agent-api';
import { AgentFailure, INSTALL_MIN_FREE_BYTES } from '@kcm/agent-api';
import { namingFullDisk, requireFreeSpace } from '../../ops/disk-space';
import type { PostgresEngine } from '../engines/engine-paths';
import { reportedVersion } from '../engines/engine-versions';

/** SHOW server_version of the running instance, as kcm records it ("15.18"). */
export async function postgresServerVersion(instance: PostgresInstance): Promise<string> {
  return withAdmin(instance, 'postgres', async (db) => {
    const { rows } = await db.query<{ server_version: string }>('SHOW server_version');
    return reportedVersion(String(rows[0]?.server_version ?? ''));
  });
}

export interface PostgresHost {
  hostaddr: string;
  logger: Logger;
  registry: InstanceRegistry;
  /** The programs of an engine version ('' or absent: the system's, for records older than versioned engines). */
  engine(version: string | undefined): Promise<PostgresEngine>;
  /** The version an install naming none gets. */
  defaultVersion(): Promise<string>;
  /** The postgres OS user, looked up once. */
  runAs: () => RunAs;
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

function reply(instance: PostgresInstance, pid: number | undefined, detail: string): PostgresInstanceReply {
  return { port: instance.port, datadir: instance.datadir, pid: pid ?? 0, running: pid !== undefined, user: instance.user, detail };
}

/** Fails early, with the reason, when the postgres OS user could not reach its data directory. */
async function assertTraversable(host: PostgresHost, dir: string): Promise<void> {
  try {
    await exec('/usr/bin/test', ['-x', dir, '-a', '-d', dir], { runAs: host.runAs(), timeoutMs: 10_000 });
  } catch {
    throw new Error(`the postgres OS user cannot traverse ${dir}: every directory on the path needs search (x) permission for it`);
  }
}

/** initdb into `datadir`, which this op created (a stranger's was set aside): a half-done earlier attempt is started over. */
async function initdb(host: PostgresHost, engine: PostgresEngine, datadir: string): Promise<void> {
  if (await exists(datadir)) {
    for (const entry of await readdir(datadir)) await rm(path.join(datadir, entry), { recursive: true, force: true });
  } else {
    await mkdir(datadir, { mode: 0o700 });
  }
  const owner = host.runAs();
  await chown(datadir, owner.uid, owner.gid);
  await exec(
    path.join(engine.binDir, 'initdb'),
    ['-D', datadir, '-U', ADMIN_ROLE, '-E', 'UTF8', '--no-locale', '--auth-local=peer', '--auth-host=scram-sha-256'],
    { runAs: owner, cwd: datadir, env: { LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' }, timeoutMs: 300_000 },
  );
}

/**
 * An install never reuses a data directory it did not create (a leftover of a removed
 * instance, or of an install killed half-way by another op): nothing of a stranger's
 * catalog, accounts or settings may leak into a new compute node. A stopped one is moved
 * aside (kept, not deleted: it may be someone's data) and its path returned; a running one
 * is refused. Returns '' when there is nothing there.
 */
async function setAsideForeignDatadir(host: PostgresHost, datadir: string, opId: string): Promise<string> {
  const entries = await readdir(datadir).catch(() => [] as string[]);
  if (entries.length === 0) return '';
  const running = await postmasterStatus(datadir);
  if (running) throw new AgentFailure('failed_precondition', `${datadir} holds a running PostgreSQL (pid ${running.pid}) that install ${opId} did not create; refusing to touch it`);
  const aside = `${datadir}.set-aside-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  await rename(datadir, aside);
  host.logger.warn({ datadir, aside, op_id: opId }, 'postgres install found a data directory it did not create; moved it aside');
  return aside;
}

/** The compute account: created, or its password and login reset; the password goes as a SCRAM verifier. */
async function ensureComputeAccount(instance: PostgresInstance, password: string, ddlHooks: boolean): Promise<void> {
  await withAdmin(instance, 'postgres', async (db) => {
    const verifier = literal(scramSha256Verifier(password));
    const found = await db.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [instance.user]);
    const verb = found.rowCount === 0 ? 'CREATE' : 'ALTER';
    await db.query(`${verb} ROLE ${ident(instance.user)} WITH LOGIN CREATEDB PASSWORD ${verifier}`);
    await db.query(`GRANT CREATE ON DATABASE postgres TO ${ident(instance.user)}`);
  });
  // New databases copy template1, so what is set up there reaches every database: the
  // extensions, and the compute account's right to create tables in schema public
  // (PostgreSQL 15 no longer gives that to everyone).
  for (const database of ['template1', 'postgres']) {
    await withAdmin(instance, database, async (db) => {
      await db.query('CREATE EXTENSION IF NOT EXISTS mysql_fdw');
      await db.query(`GRANT USAGE, CREATE ON SCHEMA public TO ${ident(instance.user)}`);
      if (ddlHooks) await ensureDdlHooks(db);
    });
  }
}

export async function installPostgres(host: PostgresHost, req: InstallPostgresRequest): Promise<PostgresInstanceReply> {
  const port = validatePort(req.port);
  const user = validateIdentifier('user', req.user);
  if (user === ADMIN_ROLE) throw new AgentFailure('invalid_argument', `the compute account must not be the superuser ${ADMIN_ROLE}`);
  if (!req.password) throw new AgentFailure('invalid_argument', 'password is required');
  const variables = validateVariables(req.variables ?? {});
  const datadir = instanceDatadir(req.comp_datadir, port);
  const known = await host.registry.find(port);
  if (known && known.datadir !== datadir) throw new AgentFailure('failed_precondition', `port ${port} already belongs to the instance in ${known.datadir}`);
  // The engine before anything is written: a version that cannot be had leaves nothing behind.
  const engineVersion = req.engine_version || known?.engineVersion || (await host.defaultVersion());
  const engine = await host.engine(engineVersion);
  // initdb writes ~40 MB and its first WAL: refused up front on a full disk (unless a re-run
  // finds it done), and a failure the disk causes names it.
  const needs = [{ what: 'comp_datadir', dir: req.comp_datadir, bytes: INSTALL_MIN_FREE_BYTES.computeDatadir }];
  if (!(await exists(path.join(datadir, 'PG_VERSION')))) await requireFreeSpace(host.hostaddr, needs);
  return namingFullDisk(host.hostaddr, needs, () => installChecked(host, req, engine, { port, user, variables, datadir, known }));
}

async function installChecked(
  host: PostgresHost,
  req: InstallPostgresRequest,
  engine: PostgresEngine,
  { port, user, variables, datadir, known }: { port: number; user: string; variables: PostgresInstance['variables']; datadir: string; known: PostgresInstance | undefined },
): Promise<PostgresInstanceReply> {
  await makeDirWithMode(req.comp_datadir, 0o711);
  await assertTraversable(host, req.comp_datadir);
  const details: string[] = [];
  const ours = known?.createdByOp === req.op_id;
  const aside = ours ? '' : await setAsideForeignDatadir(host, datadir, req.op_id);
  if (aside) details.push(`a data directory this install did not create was moved aside to ${aside}`);
  const instance: PostgresInstance = {
    port,
    hostaddr: host.hostaddr,
    datadir,
    user,
    variables,
    catalogDatabases: ours ? known.catalogDatabases : [],
    createdByOp: req.op_id,
    engineVersion: engine.version,
  };
  // Recorded before initdb: an agent killed during the install leaves a data dir that the
  // registry names, so RemovePostgres (a rollback, delete_comp) finds and deletes it.
  await host.registry.save(instance);
  if (await exists(path.join(datadir, 'PG_VERSION'))) details.push('data directory already initialised by this op');
  else {
    await initdb(host, engine, datadir);
    details.push('initialised');
  }
  const ddlHooks = await ddlHooksAvailable(engine.binDir);
  if (!ddlHooks) host.logger.warn({ port }, 'kcm_ddl is not installed next to PostgreSQL (scripts/setup.sh builds it): DDL through this compute node is not carried to the shards');
  await writeInstanceConfig(instance, os.userInfo().username, host.runAs(), ddlHooks);

  let status = await postmasterStatus(datadir);
  if (status) {
    process.kill(status.pid, 'SIGHUP'); // pick up the rewritten configuration
    details.push('already running, configuration reloaded');
  } else {
    await startPostmaster(path.join(engine.binDir, 'postgres'), datadir, host.runAs());
    status = await postmasterStatus(datadir);
    details.push('started');
  }
  await ensureComputeAccount(instance, req.password, ddlHooks);
  const serverVersion = await postgresServerVersion(instance);
  host.logger.info({ port, datadir, user, pid: status?.pid, server_version: serverVersion }, 'postgres instance installed');
  return { ...reply(instance, status?.pid, details.join(', ')), server_version: serverVersion };
}

export async function startPostgres(host: PostgresHost, port: number): Promise<PostgresInstanceReply> {
  const instance = await host.registry.get(port);
  const status = await postmasterStatus(instance.datadir);
  if (status) return reply(instance, status.pid, 'already running');
  const orphans = await killOrphanedBackends(instance.datadir);
  if (orphans.length > 0) host.logger.warn({ port, pids: orphans }, 'backends left by a postmaster that died were killed before the start');
  // The engine its record names: a restart never changes an instance's version.
  const engine = await host.engine(instance.engineVersion);
  const pid = await startPostmaster(path.join(engine.binDir, 'postgres'), instance.datadir, host.runAs());
  host.logger.info({ port, pid, engine: engine.version }, 'postgres instance started');
  return reply(instance, pid, 'started');
}

export async function stopPostgres(host: PostgresHost, port: number): Promise<PostgresInstanceReply> {
  const instance = await host.registry.get(port);
  const status = await postmasterStatus(instance.datadir);
  if (!status) return reply(instance, undefined, 'already stopped');
  const how = await stopPostmaster(status.pid);
  host.logger.info({ port, pid: status.pid, how }, 'postgres instance stopped');
  return reply(instance, undefined, how);
}

/**
 * Stops the instance, deletes its data directory and forgets it. Removing what is gone
 * succeeds. With `compDatadir`, a data dir at <compDatadir>/<port> that the registry does
 * not name (an install killed before recording it, by an older agent) is deleted as well;
 * one a server runs from is refused, as nothing says it is the instance being removed.
 */
export async function removePostgres(host: PostgresHost, port: number, compDatadir = ''): Promise<PostgresInstanceReply> {
  const instance = await host.registry.find(validatePort(port));
  if (!instance) return removeUnregistered(host, port, compDatadir);
  const stopped = await stopPostgres(host, port);
  await rm(instance.datadir, { recursive: true, force: true });
  await host.registry.delete(port);
  host.logger.info({ port, datadir: instance.datadir }, 'postgres instance removed');
  return reply(instance, undefined, `${stopped.detail}, data directory removed`);
}

async function removeUnregistered(host: PostgresHost, port: number, compDatadir: string): Promise<PostgresInstanceReply> {
  const none = { port, datadir: '', pid: 0, running: false, user: '', detail: 'not installed' };
  if (!compDatadir) return none;
  const datadir = instanceDatadir(compDatadir, port);
  if (!(await exists(datadir))) return none;
  const running = await postmasterStatus(datadir);
  if (running) throw new AgentFailure('failed_precondition', `${datadir} has no registry entry and a running PostgreSQL (pid ${running.pid}); refusing to remove it`);
  await rm(datadir, { recursive: true, force: true });
  host.logger.warn({ port, datadir }, 'removed a postgres data directory the agent had no record of');
  return { ...none, datadir, detail: 'not registered; data directory removed' };
}
