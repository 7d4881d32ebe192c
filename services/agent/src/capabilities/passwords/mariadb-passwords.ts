// New passwords on one MariaDB instance (rotate_cluster_passwords). Accounts are local to
// each instance (install creates them with sql_log_bin = 0), so each instance is changed
// on its own and nothing reaches the binlog: a standby never replays another node's change.
//
// Every command sets the password it is given, so running it again (a resumed rotation)
// changes nothing. Passwords go only as escaped values or on the client's stdin; every
// error leaving here is scrubbed of them.

import type { AgentContext } from '../../capability';
import { AgentFailure, type MariaDbAccount, type SetMariaDbPasswordsReply, type SetMariaDbPasswordsRequest, type SetReplicationPasswordReply, type SetReplicationPasswordRequest } from '@kcm/agent-api';
import { exec, ExecError } from '../../ops/exec';
import { checkAccount, checkPort, loadAdminAccount, mariadbTools, saveAdminAccount, type InstanceLayout } from '../mariadb/instance/instance-layout';
import { layoutOf } from '../mariadb/instance/lifecycle';
import { attachToMaster, slaveStatus } from '../mariadb/instance/replication';
import { account, scrub, sqlString, withAdmin } from '../mariadb/instance/sql';

const ROLES = ['admin', 'replication', 'storage'] as const;
type Role = (typeof ROLES)[number];
/** Where each account may log in from, as install created it. */
const HOST_OF: Record<Role, string> = { admin: 'localhost', replication: '%', storage: '%' };

function checkRequest(req: SetMariaDbPasswordsRequest): Map<Role, MariaDbAccount> {
  const accounts = new Map<Role, MariaDbAccount>();
  for (const a of req.accounts) {
    if (!(ROLES as readonly string[]).includes(a.role)) throw new AgentFailure('invalid_argument', `accounts: role ${JSON.stringify(a.role)} must be one of ${ROLES.join(', ')}`);
    const role = a.role as Role;
    if (accounts.has(role)) throw new AgentFailure('invalid_argument', `accounts: role ${role} is named twice`);
    accounts.set(role, checkAccount(role, { user: a.user, password: a.password }));
  }
  if (accounts.size === 0) throw new AgentFailure('invalid_argument', 'accounts: at least one account is required');
  return accounts;
}

export async function setMariaDbPasswords(ctx: AgentContext, req: SetMariaDbPasswordsRequest): Promise<SetMariaDbPasswordsReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  const accounts = checkRequest(req);
  const secrets = [...accounts.values()].map((a) => a.password);
  const admin = accounts.get('admin');
  if (admin) await setAdminPassword(layout, admin, secrets);
  const others = [...accounts].filter(([role]) => role !== 'admin');
  if (others.length > 0) {
    // The admin account as it is now (just changed above, when it was in the request).
    await withAdmin(layout, await loadAdminAccount(layout), secrets, async (s) => {
      await s.run('disable binlog for account change', 'SET SESSION sql_log_bin = 0');
      for (const [role, acct] of others) await s.run(`set the ${role} password`, `ALTER USER ${account(acct.user, HOST_OF[role])} IDENTIFIED BY ?`, [acct.password]);
    });
  }
  ctx.logger.info({ port: layout.port, roles: [...accounts.keys()], users: [...accounts.values()].map((a) => a.user) }, 'mariadb account passwords set');
  return { roles: [...accounts.keys()] };
}

/**
 * The agent's own account: changed as root over the socket (unix_socket auth, no password
 * needed, so a retry works whichever password the account has now), then saved where the
 * agent reads it. The statement reaches the client on stdin, never argv.
 */
async function setAdminPassword(layout: InstanceLayout, admin: MariaDbAccount, secrets: string[]): Promise<void> {
  const current = await loadAdminAccount(layout);
  if (current.user !== admin.user) throw new AgentFailure('invalid_argument', `admin user ${admin.user} is not this instance's admin account (${current.user})`);
  const sql = ['SET SESSION sql_log_bin = 0;', `ALTER USER ${account(admin.user, HOST_OF.admin)} IDENTIFIED BY ${sqlString(admin.password)};`, ''].join('\n');
  try {
    await exec(mariadbTools.client, ['--no-defaults', `--socket=${layout.socket}`, '--user=root', '--batch'], { input: sql, timeoutMs: 30_000 });
  } catch (err) {
    if (err instanceof ExecError) throw new AgentFailure('instance_failed', `setting the admin password failed: ${scrub(err.message, secrets)}`);
    throw err;
  }
  await saveAdminAccount(layout, admin);
}

/**
 * A standby's replication password. Running replication is re-attached to the master it
 * has (MASTER_USE_GTID=slave_pos: it continues from what it applied) and must run again;
 * stopped replication only gets the new password (it stays stopped, as someone left it).
 */
export async function setReplicationPassword(ctx: AgentContext, req: SetReplicationPasswordRequest): Promise<SetReplicationPasswordReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  const replication = checkAccount('replication', { user: req.user, password: req.password });
  const reply = await withAdmin(layout, await loadAdminAccount(layout), [replication.password], async (s) => {
    const before = await slaveStatus(s);
    if (!before || !before.Master_Host) return { is_replica: false, master_host: '', master_port: 0, io_running: false, sql_running: false };
    const master = { host: before.Master_Host, port: Number(before.Master_Port), replication };
    const wasRunning = before.Slave_IO_Running === 'Yes' || before.Slave_SQL_Running === 'Yes';
    if (wasRunning) await attachToMaster(s, master);
    else {
      await s.run('stop slave', 'STOP ALL SLAVES');
      await s.run('change replication credentials', 'CHANGE MASTER TO MASTER_USER = ?, MASTER_PASSWORD = ?', [replication.user, replication.password]);
    }
    const after = await slaveStatus(s);
    return { is_replica: true, master_host: master.host, master_port: master.port, io_running: after?.Slave_IO_Running === 'Yes', sql_running: after?.Slave_SQL_Running === 'Yes' };
  });
  ctx.logger.info({ port: layout.port, user: replication.user, master: `${reply.master_host}:${reply.master_port}`, is_replica: reply.is_replica }, 'replication password set');
  return reply;
}
