// Closing a master's binlog dump threads for good before RESET MASTER (restore of a master).

import { account, type AdminSession } from '../instance/sql';

/**
 * The standbys of the cluster being restored into still point at this master and reconnect as
 * soon as it is up. A binlog dump thread open across RESET MASTER can hang in MariaDB 10.11
 * (its semi-sync dump stops, it is killed when its standby reconnects, and stays "Waiting to
 * finalize termination" for good): its standby is then refused as a duplicate server_id and a
 * semi-sync commit, such as the restore's binlog replay, waits for an ACK forever (seen in a
 * restore drill). Even when it does not hang, such a dump sends nothing of the new binlog, so
 * the first commit after the reset waits for an ACK until its standby reconnects (3 of 3 tries
 * on 10.11.19). So the replication account is locked, every dump thread killed and waited
 * out before the reset; the returned function unlocks the account after it. The session must
 * have sql_log_bin = 0: a binlogged lock would reach the standbys and lock their own account.
 */
export async function closeBinlogDumps(s: AdminSession, replicationUser: string): Promise<() => Promise<void>> {
  const hosts = (await s.rows<{ Host: string }>('find the replication account', 'SELECT Host FROM mysql.user WHERE User = ?', [replicationUser])).map((r) => r.Host);
  for (const host of hosts) await s.run('lock the replication account', `ALTER USER ${account(replicationUser, host)} ACCOUNT LOCK`);
  const dumps = () => s.rows<{ id: number }>('list binlog dump threads', "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'");
  const deadline = Date.now() + DUMP_CLOSE_TIMEOUT_MS;
  for (let open = await dumps(); open.length > 0; open = await dumps()) {
    if (Date.now() > deadline) throw new Error(`binlog dump threads ${open.map((d) => d.id).join(', ')} did not end within ${DUMP_CLOSE_TIMEOUT_MS / 1000} s of being killed; the restore stops before RESET MASTER`);
    for (const { id } of open) await s.run('end a binlog dump', `KILL CONNECTION ${Number(id)}`).catch(() => {}); // gone meanwhile
    await new Promise((r) => setTimeout(r, 100));
  }
  return async () => {
    for (const host of hosts) await s.run('unlock the replication account', `ALTER USER ${account(replicationUser, host)} ACCOUNT UNLOCK`);
  };
}

const DUMP_CLOSE_TIMEOUT_MS = 30_000;
