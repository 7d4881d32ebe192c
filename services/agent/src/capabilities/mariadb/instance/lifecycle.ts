// Start, stop and remove a MariaDB instance. mariadbd runs detached as the mysql OS user,
// tracked by the pid file it writes under its instance dir, so it outlives the agent; an
// agent restart finds it again through the registry and the pid file.

import { readFile, rm } from 'node:fs/promises';
import { ONE_SHOT_MYSQL_OPTIONS } from '@kcm/common';
import mysql from 'mysql2/promise';
import type { AgentContext } from '../../../capability';
import { processAlive, spawnDetached } from '../../../ops/exec';
import { dropRecord, instanceLayout, loadRecord, mysqlUser, requireRecord, type InstanceLayout } from './instance-layout';
import type { MariaDbInstanceReply } from '@kcm/agent-api';
import { engineOf } from './engine';

const START_TIMEOUT_MS = 90_000;
const STOP_GRACE_MS = 60_000;

/**
 * The live mariadbd pid of this instance, or 0. A stale pid file naming another process is
 * not alive, nor one naming another instance's mariadbd (pids are reused after a reboot).
 */
export async function runningPid(layout: InstanceLayout): Promise<number> {
  let pid: number;
  try {
    pid = Number((await readFile(layout.pidFile, 'utf8')).trim());
  } catch {
    return 0;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !processAlive(pid)) return 0;
  const comm = await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '');
  if (comm.trim() !== 'mariadbd') return 0;
  const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
  return argv.includes(`--defaults-file=${layout.myCnf}`) ? pid : 0;
}

/**
 * True once the server answers on its socket. An access-denied reply counts: the server is
 * up, it just does not know this account yet (right after mariadb-install-db).
 */
async function serverAnswers(layout: InstanceLayout): Promise<boolean> {
  try {
    const conn = await mysql.createConnection({ ...ONE_SHOT_MYSQL_OPTIONS, socketPath: layout.socket, user: 'kcm_probe_no_such_user', connectTimeout: 2000 });
    await conn.end();
    return true;
  } catch (err) {
    const errno = (err as { errno?: number }).errno;
    return errno === 1045 || errno === 1698;
  }
}

async function errorLogTail(layout: InstanceLayout): Promise<string> {
  const text = await readFile(layout.errorLog, 'utf8').catch(() => '');
  return text.trim().split('\n').slice(-6).join(' | ');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function instanceReply(layout: InstanceLayout, state: MariaDbInstanceReply['state'], pid: number): MariaDbInstanceReply {
  return { port: layout.port, state, pid, instance_dir: layout.instanceDir, socket: layout.socket };
}

/**
 * Starts mariadbd unless it already runs, and waits until it answers on its socket (also
 * when it was already running: an agent restarted mid-start must not report it too early).
 */
export async function startInstance(ctx: AgentContext, layout: InstanceLayout): Promise<MariaDbInstanceReply> {
  let pid = await runningPid(layout);
  if (!pid) {
    await rm(layout.pidFile, { force: true });
    await rm(layout.socket, { force: true });
    // The engine its record names (engine.ts): a restart never changes an instance's version.
    const engine = await engineOf(ctx, layout.port);
    // --defaults-file first (mariadbd requires it; runningPid finds the instance by it).
    pid = spawnDetached(engine.mariadbd, [`--defaults-file=${layout.myCnf}`, ...engine.serverOptions], { logFile: layout.stdoutLog, runAs: mysqlUser(), cwd: layout.instanceDir });
    ctx.logger.info({ port: layout.port, pid, engine: engine.version }, 'mariadbd started');
  }
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (!processAlive(pid)) throw new Error(`mariadbd on port ${layout.port} exited during start: ${await errorLogTail(layout)}`);
    if ((await runningPid(layout)) === pid && (await serverAnswers(layout))) return instanceReply(layout, 'online', pid);
    await sleep(200);
  }
  process.kill(pid, 'SIGKILL');
  throw new Error(`mariadbd on port ${layout.port} did not answer within ${START_TIMEOUT_MS} ms: ${await errorLogTail(layout)}`);
}

/** SIGTERM (mariadbd shuts down cleanly on it), SIGKILL if it does not exit in time. */
export async function stopInstance(ctx: AgentContext, layout: InstanceLayout, graceMs = STOP_GRACE_MS): Promise<MariaDbInstanceReply> {
  const pid = await runningPid(layout);
  if (pid) {
    process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (processAlive(pid) && Date.now() < deadline) await sleep(100);
    if (processAlive(pid)) {
      ctx.logger.warn({ port: layout.port, pid }, 'mariadbd ignored SIGTERM; killing');
      process.kill(pid, 'SIGKILL');
      while (processAlive(pid)) await sleep(50);
    }
    ctx.logger.info({ port: layout.port, pid }, 'mariadbd stopped');
  }
  return instanceReply(layout, 'stopped', 0);
}

/** Stops the instance and deletes the three directories named after its port. */
export async function removeInstance(ctx: AgentContext, port: number): Promise<MariaDbInstanceReply> {
  const record = await loadRecord(ctx.stateDir, port);
  if (!record) return { port, state: 'removed', pid: 0, instance_dir: '', socket: '' };
  const layout = instanceLayout(record.spec);
  await stopInstance(ctx, layout);
  for (const dir of [layout.instanceDir, layout.logDir, layout.walDir]) await rm(dir, { recursive: true, force: true });
  await dropRecord(ctx.stateDir, port);
  ctx.logger.info({ port, dirs: [layout.instanceDir, layout.logDir, layout.walDir] }, 'mariadb instance removed');
  return instanceReply(layout, 'removed', 0);
}

export async function layoutOf(ctx: AgentContext, port: number): Promise<InstanceLayout> {
  return instanceLayout((await requireRecord(ctx.stateDir, port)).spec);
}
