// Live status of an instance, measured now: is mariadbd running, does it answer SQL, and
// how is its replication. The manager's health monitor and get_cluster_detail read this;
// rebuild uses it to judge a backup source.

import type { AgentContext } from '../../../capability';
import { checkPort, instanceLayout, loadAdminAccount, loadRecord } from './instance-layout';
import { runningPid } from './lifecycle';
import type { MariaDbProbeReply } from '@kcm/agent-api';
import { adminSession } from './sql';
import { slaveStatus } from './replication';

const PROBE_CONNECT_TIMEOUT_MS = 3000;

function blank(port: number, state: MariaDbProbeReply['state'], reason: string, pid = 0): MariaDbProbeReply {
  return {
    port, state, pid, reason,
    is_replica: false, io_running: false, sql_running: false, seconds_behind_master: -1, last_error: '',
    gtid_current_pos: '', read_only: false, semi_sync_master: false, semi_sync_master_clients: 0, master_host: '', master_port: 0,
    supervisor_restarts: 0, desired_state: '',
  };
}

export async function probeInstance(ctx: AgentContext, port: number): Promise<MariaDbProbeReply> {
  const record = await loadRecord(ctx.stateDir, checkPort(port));
  if (!record) return blank(port, 'unknown', 'no instance on this port is installed by this agent');
  const layout = instanceLayout(record.spec);
  const pid = await runningPid(layout);
  if (!pid) return blank(port, 'offline', 'no mariadbd process');
  let session;
  try {
    session = await adminSession(layout, await loadAdminAccount(layout), [], PROBE_CONNECT_TIMEOUT_MS);
  } catch (err) {
    return blank(port, 'offline', `process ${pid} does not answer: ${(err as Error).message}`, pid);
  }
  try {
    const [vars] = await session.rows<{ gtid: string; ro: number | string; semi: number | string }>(
      'read status variables',
      'SELECT @@gtid_current_pos AS gtid, @@read_only AS ro, @@rpl_semi_sync_master_enabled AS semi',
    );
    const [clients] = await session.rows<{ Value: string }>('read semi-sync clients', "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'");
    const slave = await slaveStatus(session);
    const lag = slave?.Seconds_Behind_Master;
    return {
      ...blank(port, 'online', '', pid),
      gtid_current_pos: vars.gtid,
      read_only: Number(vars.ro) === 1,
      semi_sync_master: Number(vars.semi) === 1,
      semi_sync_master_clients: Number(clients?.Value ?? 0),
      is_replica: slave !== undefined,
      io_running: slave?.Slave_IO_Running === 'Yes',
      sql_running: slave?.Slave_SQL_Running === 'Yes',
      seconds_behind_master: lag === null || lag === undefined ? -1 : Number(lag),
      last_error: slave ? [slave.Last_IO_Error, slave.Last_SQL_Error].filter(Boolean).join('; ') : '',
      master_host: slave?.Master_Host ?? '',
      master_port: slave ? Number(slave.Master_Port) : 0,
    };
  } catch (err) {
    return blank(port, 'offline', (err as Error).message, pid);
  } finally {
    await session.close();
  }
}
