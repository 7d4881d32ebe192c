// Replication set-up: make an instance its shard's master, or a GTID standby of it
// (CHANGE MASTER ... MASTER_USE_GTID=slave_pos), with semi-sync per fullsync_level.

import type { AgentContext } from '../../../capability';
import { checkAccount, checkPort, loadAdminAccount, type InstanceLayout } from './instance-layout';
import { layoutOf } from './lifecycle';
import type { MariaDbAccount, MariaDbReplicationReply, MariaDbReplicationRequest, MariaDbRole } from '@kcm/agent-api';
import { applySemiSync, persistRole } from './semi-sync';
import { withAdmin, type AdminSession } from './sql';
import { AgentFailure } from '@kcm/agent-api';

const HOST = /^[A-Za-z0-9.:-]{1,255}$/;
const ATTACH_WAIT_MS = 20_000;

export interface MasterEndpoint {
  host: string;
  port: number;
  replication: MariaDbAccount;
}

export async function configureReplication(ctx: AgentContext, req: MariaDbReplicationRequest): Promise<MariaDbReplicationReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  if (req.role !== 'master' && req.role !== 'standby') throw new AgentFailure('invalid_argument', `role ${JSON.stringify(req.role)} must be master or standby`);
  const level = req.fullsync_level;
  if (!(level >= 0)) throw new AgentFailure('invalid_argument', `fullsync_level ${level} must be >= 0`);
  if (req.role === 'master') return becomeMaster(ctx, layout, level);
  return becomeStandby(ctx, layout, checkMaster(req.master_host, req.master_port, req.replication), level);
}

export function checkMaster(host: string, port: number, replication: MariaDbAccount): MasterEndpoint {
  if (!HOST.test(host)) throw new AgentFailure('invalid_argument', `master_host ${JSON.stringify(host)} is not a host name or address`);
  return { host, port: checkPort(port), replication: checkAccount('replication', replication) };
}

async function becomeMaster(ctx: AgentContext, layout: InstanceLayout, level: number): Promise<MariaDbReplicationReply> {
  const admin = await loadAdminAccount(layout);
  const sides = await withAdmin(layout, admin, [], async (s) => {
    await s.run('stop slave', 'STOP ALL SLAVES');
    await s.run('forget old master', "RESET SLAVE '' ALL");
    const applied = await applySemiSync(s, 'master', level);
    await s.run('allow writes', 'SET GLOBAL read_only = OFF');
    return applied;
  });
  await persistRole(layout, 'master', level);
  ctx.logger.info({ port: layout.port, fullsync_level: level, ...sides }, 'mariadb instance is master');
  return { role: 'master', ...sides, read_only: false };
}

async function becomeStandby(ctx: AgentContext, layout: InstanceLayout, master: MasterEndpoint, level: number): Promise<MariaDbReplicationReply> {
  const admin = await loadAdminAccount(layout);
  const sides = await withAdmin(layout, admin, [master.replication.password], async (s) => {
    const applied = await applySemiSync(s, 'standby', level);
    await s.run('refuse client writes', 'SET GLOBAL read_only = ON');
    await attachToMaster(s, master);
    return applied;
  });
  await persistRole(layout, 'standby', level);
  ctx.logger.info({ port: layout.port, master: `${master.host}:${master.port}`, fullsync_level: level, ...sides }, 'mariadb instance is standby');
  return { role: 'standby' as MariaDbRole, ...sides, read_only: true };
}

/**
 * Points the instance at its master from its gtid_slave_pos (set by the caller when it
 * differs, e.g. after a restore) and waits until both threads run. A replication error is
 * an error here, not later.
 */
export async function attachToMaster(s: AdminSession, master: MasterEndpoint): Promise<void> {
  await s.run('stop slave', 'STOP ALL SLAVES');
  // Reconnects every second: a master restarted in place holds its first commit until a
  // standby acknowledges it (semi-sync never falls back, my-cnf.ts), so until one is back.
  await s.run(
    'change master',
    'CHANGE MASTER TO MASTER_HOST = ?, MASTER_PORT = ?, MASTER_USER = ?, MASTER_PASSWORD = ?, MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1',
    [master.host, master.port, master.replication.user, master.replication.password],
  );
  await s.run('start slave', 'START SLAVE');
  const deadline = Date.now() + ATTACH_WAIT_MS;
  let last: SlaveStatus | undefined;
  while (Date.now() < deadline) {
    last = await slaveStatus(s);
    if (last && last.Slave_IO_Running === 'Yes' && last.Slave_SQL_Running === 'Yes') return;
    if (last && (last.Last_SQL_Error || (last.Slave_IO_Running === 'No' && last.Last_IO_Error))) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new AgentFailure('instance_failed', 
    `replication from ${master.host}:${master.port} did not start: io=${last?.Slave_IO_Running} sql=${last?.Slave_SQL_Running} ${last?.Last_IO_Error ?? ''} ${last?.Last_SQL_Error ?? ''}`.trim(),
  );
}

export interface SlaveStatus {
  Master_Host: string;
  Master_Port: string | number;
  Slave_IO_Running: string;
  Slave_SQL_Running: string;
  Seconds_Behind_Master: string | number | null;
  Last_IO_Error: string;
  Last_SQL_Error: string;
  Gtid_IO_Pos: string;
}

export async function slaveStatus(s: AdminSession): Promise<SlaveStatus | undefined> {
  return (await s.rows<SlaveStatus>('show slave status', 'SHOW SLAVE STATUS'))[0];
}
