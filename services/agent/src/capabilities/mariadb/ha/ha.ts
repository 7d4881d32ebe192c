// Shard high availability commands (proto/agent-mariadb-ha.proto): promote a standby,
// point an instance at a new master, fence an old master, wait for a GTID. Each is
// idempotent: run again, it finds its work done and reports what is.

import { readFile, rm, writeFile } from 'node:fs/promises';
import { killAndWait, processesNamed } from '../../cgroup/processes';
import type { AgentContext } from '../../../capability';
import { AgentFailure, isGtidPosText, type MariaDbFenceReply, type MariaDbFenceRequest, type MariaDbPromoteReply, type MariaDbPromoteRequest, type MariaDbRepointReply, type MariaDbRepointRequest, type MariaDbWaitForGtidReply, type MariaDbWaitForGtidRequest } from '@kcm/agent-api';
import { checkPort, loadAdminAccount, type InstanceLayout } from '../instance/instance-layout';
import { layoutOf, runningPid, startInstance } from '../instance/lifecycle';
import { fencedMarker, readReplicationFacts } from './ha-status';
import { attachToMaster, checkMaster } from '../instance/replication';
import { applySemiSync, persistRole } from '../instance/semi-sync';
import { adminSession, withAdmin } from '../instance/sql';

const FENCE_CONNECT_TIMEOUT_MS = 1500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function checkLevel(level: number): number {
  if (!(Number.isInteger(level) && level >= 0)) throw new AgentFailure('invalid_argument', `fullsync_level ${level} must be an integer >= 0`);
  return level;
}

/**
 * Stops receiving (the old master is fenced or being switched away from), waits until the
 * relay log is applied, then takes the master role. Already master: reports its position.
 */
export async function promote(ctx: AgentContext, req: MariaDbPromoteRequest): Promise<MariaDbPromoteReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  const level = checkLevel(req.fullsync_level);
  const admin = await loadAdminAccount(layout);
  const reply = await withAdmin(layout, admin, [], async (s) => {
    let facts = await readReplicationFacts(s);
    if (!facts.is_replica && !facts.read_only) {
      return { gtid_current_pos: facts.gtid_current_pos ?? '', semi_sync_master: facts.semi_sync_master_enabled ?? false, read_only: false, already_master: true, relay_applied: true };
    }
    if (facts.is_replica) await s.run('stop receiving', 'STOP SLAVE IO_THREAD');
    // Applying held by a backup (TableChecksums) and not stopped by an error: what it received
    // may be commits the master acknowledged on its semi-sync ack, so apply them first.
    if (facts.is_replica && !facts.sql_running && !facts.last_sql_error) await s.run('resume held applying', 'START SLAVE SQL_THREAD');
    const deadline = Date.now() + Math.max(0, req.wait_relay_ms);
    facts = await readReplicationFacts(s);
    while (!facts.relay_applied && facts.sql_running && Date.now() < deadline) {
      await sleep(50);
      facts = await readReplicationFacts(s);
    }
    const relayApplied = facts.relay_applied ?? false;
    await s.run('stop slave', 'STOP ALL SLAVES');
    await s.run('forget old master', "RESET SLAVE '' ALL");
    const sides = await applySemiSync(s, 'master', level);
    await s.run('allow writes', 'SET GLOBAL read_only = OFF');
    const [pos] = await s.rows<{ cur: string }>('read position', 'SELECT @@gtid_current_pos AS cur');
    return { gtid_current_pos: pos.cur, semi_sync_master: sides.semi_sync_master, read_only: false, already_master: false, relay_applied: relayApplied };
  });
  await persistRole(layout, 'master', level);
  await rm(fencedMarker(layout), { force: true });
  ctx.logger.warn({ port: layout.port, ...reply }, 'mariadb instance promoted to master');
  return reply;
}

/**
 * Makes the instance a read-only GTID standby of the given master. Started first when it is
 * down (a fenced old master: its kcm-role.cnf keeps it read-only from the first moment).
 * An instance that has no replication source (an old master) takes its own current
 * position as its slave position, so MASTER_USE_GTID=slave_pos resumes after its own
 * transactions; the caller has checked that none of them is errant.
 */
export async function repointStandby(ctx: AgentContext, req: MariaDbRepointRequest): Promise<MariaDbRepointReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  const level = checkLevel(req.fullsync_level);
  const master = checkMaster(req.master_host, req.master_port, req.replication);
  if (!(await runningPid(layout))) {
    await persistRole(layout, 'standby', level);
    await startInstance(ctx, layout);
  }
  const admin = await loadAdminAccount(layout);
  const reply = await withAdmin(layout, admin, [master.replication.password], async (s) => {
    await s.run('refuse client writes', 'SET GLOBAL read_only = ON');
    const facts = await readReplicationFacts(s);
    if (facts.is_replica && facts.master_host === master.host && facts.master_port === master.port && facts.io_running && facts.sql_running) {
      return { gtid_slave_pos: facts.gtid_slave_pos ?? '', io_running: true, sql_running: true };
    }
    await s.run('stop slave', 'STOP ALL SLAVES');
    if (!facts.is_replica) await s.run('resume after own transactions', 'SET GLOBAL gtid_slave_pos = @@gtid_current_pos');
    await applySemiSync(s, 'standby', level);
    await attachToMaster(s, master);
    const after = await readReplicationFacts(s);
    return { gtid_slave_pos: after.gtid_slave_pos ?? '', io_running: after.io_running ?? false, sql_running: after.sql_running ?? false };
  });
  await persistRole(layout, 'standby', level);
  await rm(fencedMarker(layout), { force: true });
  ctx.logger.warn({ port: layout.port, master: `${master.host}:${master.port}`, ...reply }, 'mariadb instance re-pointed as standby');
  return reply;
}

/**
 * Read-only on every later start first (kcm-role.cnf, the fenced marker), so nothing that
 * happens after this line can bring it back writable. Then:
 *
 * - with `stop` (a failover's fence, the lease's fence, a rejoin's first look): killed at
 *   once with SIGKILL, every mariadbd of this instance, one still starting included. Not
 *   made read-only first and never shut down cleanly: both end the commits that wait for a
 *   standby's acknowledgement (SET GLOBAL read_only waits for them, turning semi-sync off
 *   and a clean shutdown acknowledge them to their clients), so a write no standby has
 *   would be acknowledged by a master that is being replaced. Killed, such a commit is
 *   never acknowledged; the rejoin finds it errant. InnoDB and the binlog are crash-safe.
 *   `keepStopped` records the stop with the supervisor first (it must not restart it);
 *   `serialised` then kills again after whatever held the port, so a start that began
 *   before the fence cannot survive it (not waited for: see killFenced).
 * - without `stop` (a manual switch holding writes): read_only now, and the semi-sync
 *   master side off (its standbys are attached and the switch waits until the chosen one
 *   has everything the old master logged).
 */
export async function fence(
  ctx: AgentContext,
  req: MariaDbFenceRequest,
  keepStopped: (port: number) => Promise<void>,
  serialised: <T>(port: number, work: () => Promise<T>) => Promise<T>,
): Promise<MariaDbFenceReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  const reply = req.stop ? await killFenced(layout, keepStopped, serialised) : await readOnlyFenced(layout);
  ctx.logger.warn({ port: layout.port, ...reply }, 'mariadb instance fenced');
  return reply;
}

/** Marks the instance fenced: read-only and no semi-sync master side on every later start. */
async function markFenced(layout: InstanceLayout, why: string): Promise<void> {
  await writeFile(fencedMarker(layout), `fenced at ${new Date().toISOString()}: ${why}\n`);
  await persistRole(layout, 'standby', 0);
}

async function readOnlyFenced(layout: InstanceLayout): Promise<MariaDbFenceReply> {
  await markFenced(layout, 'read-only');
  const pids = await instancePids(layout);
  const reply: MariaDbFenceReply = { was_running: pids.length > 0, made_read_only: false, stopped: false, gtid_binlog_pos: '' };
  if (pids.length > 0) Object.assign(reply, await readOnlyNow(layout));
  return reply;
}

/** Fenced, kept stopped and killed (see fence()). Also the lease's fence (master-lease.ts). */
export async function killFenced(
  layout: InstanceLayout,
  keepStopped: (port: number) => Promise<void>,
  serialised: <T>(port: number, work: () => Promise<T>) => Promise<T>,
  why = 'stopped',
): Promise<MariaDbFenceReply> {
  await markFenced(layout, why);
  await keepStopped(layout.port);
  const pids = await instancePids(layout);
  await killAndWait(pids);
  // Whatever holds the port (a supervisor restart of a crashed master, crash recovery and
  // all) is not waited for: every mariadbd that read its settings before the fenced role
  // was written is among the pids just killed, so one it starts now comes up read-only. It
  // is killed once that start is done.
  void serialised(layout.port, async () => killAndWait(await instancePids(layout))).catch(() => {});
  return { was_running: pids.length > 0, made_read_only: false, stopped: true, gtid_binlog_pos: '' };
}

/** Every live mariadbd started with this instance's my.cnf (also one whose pid file is not written yet). */
function instancePids(layout: InstanceLayout): Promise<number[]> {
  return processesNamed('mariadbd', async (pid) => (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0').includes(`--defaults-file=${layout.myCnf}`));
}

async function readOnlyNow(layout: InstanceLayout): Promise<Pick<MariaDbFenceReply, 'made_read_only' | 'gtid_binlog_pos'>> {
  try {
    const s = await adminSession(layout, await loadAdminAccount(layout), [], FENCE_CONNECT_TIMEOUT_MS);
    try {
      // Semi-sync off first: SET GLOBAL read_only waits for the commits in progress, and
      // with no semi-sync timeout a commit whose ack is slow would hold it. The switch that
      // holds writes this way waits for its standby to reach the position read below.
      await s.run('no semi-sync master side', 'SET GLOBAL rpl_semi_sync_master_enabled = OFF');
      await s.run('refuse writes', 'SET GLOBAL read_only = ON');
      const [pos] = await s.rows<{ bl: string }>('read binlog position', 'SELECT @@gtid_binlog_pos AS bl');
      return { made_read_only: true, gtid_binlog_pos: pos.bl };
    } finally {
      await s.close();
    }
  } catch {
    return { made_read_only: false, gtid_binlog_pos: '' };
  }
}

export async function waitForGtid(ctx: AgentContext, req: MariaDbWaitForGtidRequest): Promise<MariaDbWaitForGtidReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  if (!isGtidPosText(req.gtid)) throw new AgentFailure('invalid_argument', `gtid ${JSON.stringify(req.gtid)} is not a GTID position`);
  if (!(req.timeout_ms >= 0)) throw new AgentFailure('invalid_argument', `timeout_ms ${req.timeout_ms} must be >= 0`);
  return withAdmin(layout, await loadAdminAccount(layout), [], async (s) => {
    const [r] = await s.rows<{ w: string | number }>('wait for gtid', 'SELECT MASTER_GTID_WAIT(?, ?) AS w', [req.gtid, req.timeout_ms / 1000]);
    const [pos] = await s.rows<{ sl: string; cur: string }>('read positions', 'SELECT @@gtid_slave_pos AS sl, @@gtid_current_pos AS cur');
    return { reached: Number(r.w) === 0, gtid_slave_pos: pos.sl, gtid_current_pos: pos.cur };
  });
}
