// Measured replication state of one instance for failure detection and failover: is the
// process there, does it answer, its three GTID positions, its replication threads, and
// whether everything received is applied. Never throws for a down instance: that is an
// answer ("running: false"), the evidence the manager's failure detector needs.

import { access } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { AgentContext } from '../../../capability';
import { checkPort, instanceLayout, loadAdminAccount, loadRecord, type InstanceLayout } from '../instance/instance-layout';
import { runningPid } from '../instance/lifecycle';
import type { MariaDbHaStatusReply } from '@kcm/agent-api';
import { adminSession, type AdminSession } from '../instance/sql';

const CONNECT_TIMEOUT_MS = 1500;
const FENCED_MARKER = 'kcm-fenced';

export function fencedMarker(layout: InstanceLayout): string {
  return path.join(layout.instanceDir, FENCED_MARKER);
}

export async function isFenced(layout: InstanceLayout): Promise<boolean> {
  return access(fencedMarker(layout)).then(() => true, () => false);
}

function blank(port: number, reason: string): MariaDbHaStatusReply {
  return {
    port, installed: false, running: false, answering: false, pid: 0, reason,
    read_only: false, gtid_current_pos: '', gtid_slave_pos: '', gtid_binlog_pos: '',
    is_replica: false, io_running: false, sql_running: false, master_host: '', master_port: 0,
    last_io_error: '', last_sql_error: '', gtid_io_pos: '', relay_applied: false,
    semi_sync_slave_active: false, semi_sync_master_enabled: false, semi_sync_master_clients: 0,
    master_reachable: false, supervisor_restarts: 0, desired_state: '', fenced: false, supervisor_restarted_at_ms: 0,
  };
}

interface FullSlaveStatus {
  Master_Host: string;
  Master_Port: string | number;
  Slave_IO_Running: string;
  Slave_SQL_Running: string;
  Last_IO_Error: string;
  Last_SQL_Error: string;
  Gtid_IO_Pos: string;
  Master_Log_File: string;
  Read_Master_Log_Pos: string | number;
  Relay_Master_Log_File: string;
  Exec_Master_Log_Pos: string | number;
}

/** The SQL-side facts, read over an open admin session. */
export async function readReplicationFacts(s: AdminSession): Promise<Partial<MariaDbHaStatusReply>> {
  const [v] = await s.rows<{ cur: string; sl: string; bl: string; ro: string | number; semi: string | number }>(
    'read gtid positions',
    'SELECT @@gtid_current_pos AS cur, @@gtid_slave_pos AS sl, @@gtid_binlog_pos AS bl, @@read_only AS ro, @@rpl_semi_sync_master_enabled AS semi',
  );
  const status = new Map((await s.rows<{ Variable_name: string; Value: string }>('read semi-sync status', "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_%'")).map((r) => [r.Variable_name.toLowerCase(), r.Value]));
  const slave = (await s.rows<FullSlaveStatus>('show slave status', 'SHOW SLAVE STATUS'))[0];
  const relayApplied = !slave || (slave.Master_Log_File === slave.Relay_Master_Log_File && String(slave.Read_Master_Log_Pos) === String(slave.Exec_Master_Log_Pos));
  return {
    read_only: Number(v.ro) === 1,
    gtid_current_pos: v.cur,
    gtid_slave_pos: v.sl,
    gtid_binlog_pos: v.bl,
    semi_sync_master_enabled: Number(v.semi) === 1,
    semi_sync_master_clients: Number(status.get('rpl_semi_sync_master_clients') ?? 0),
    semi_sync_slave_active: status.get('rpl_semi_sync_slave_status') === 'ON',
    is_replica: slave !== undefined,
    io_running: slave?.Slave_IO_Running === 'Yes',
    sql_running: slave?.Slave_SQL_Running === 'Yes',
    master_host: slave?.Master_Host ?? '',
    master_port: slave ? Number(slave.Master_Port) : 0,
    last_io_error: slave?.Last_IO_Error ?? '',
    last_sql_error: slave?.Last_SQL_Error ?? '',
    gtid_io_pos: slave?.Gtid_IO_Pos ?? '',
    relay_applied: relayApplied,
  };
}

/**
 * Whether a MariaDB server answers at host:port within timeoutMs: a TCP connection (from
 * localAddress, when given) on which the server's greeting arrives. A connection alone is
 * not enough: the kernel accepts one for a stopped (SIGSTOP) or hung mariadbd, which
 * acknowledges nothing.
 */
export function mariadbGreets(host: string, port: number, timeoutMs: number, localAddress?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, localAddress });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('data', () => done(true));
    socket.once('error', () => done(false));
    socket.once('end', () => done(false));
  });
}

export async function replicationStatus(ctx: AgentContext, port: number, checkMasterMs: number): Promise<MariaDbHaStatusReply> {
  const record = await loadRecord(ctx.stateDir, checkPort(port));
  if (!record) return blank(port, 'no instance on this port is installed by this agent');
  const layout = instanceLayout(record.spec);
  const base = { ...blank(port, ''), installed: true, fenced: await isFenced(layout) };
  const pid = await runningPid(layout);
  if (!pid) return { ...base, reason: 'no mariadbd process' };
  let session: AdminSession;
  try {
    session = await adminSession(layout, await loadAdminAccount(layout), [], CONNECT_TIMEOUT_MS);
  } catch (err) {
    return { ...base, running: true, pid, reason: `process ${pid} does not answer: ${(err as Error).message}` };
  }
  try {
    const facts = await readReplicationFacts(session);
    const reply: MariaDbHaStatusReply = { ...base, ...facts, running: true, answering: true, pid };
    if (checkMasterMs > 0 && reply.is_replica && reply.master_host) reply.master_reachable = await mariadbGreets(reply.master_host, reply.master_port, checkMasterMs);
    return reply;
  } catch (err) {
    return { ...base, running: true, pid, reason: (err as Error).message };
  } finally {
    await session.close();
  }
}
