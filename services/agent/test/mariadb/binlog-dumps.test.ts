// Real engines: closeBinlogDumps, which a restore of a master runs before RESET MASTER
// (restore-backup.ts), on a semi-sync master with one connected GTID standby. A dump thread
// left open across RESET MASTER could hang for good in MariaDB 10.11 (c2c5b9a); here every
// dump is gone and the standby cannot log back in until the unlock, the reset and the next
// semi-sync commit complete, and the standby, restarted, replicates that commit.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MariaDbHaAgentClient } from '@kcm/agent-api';
import { closeBinlogDumps } from '../../src/capabilities/mariadb/restore/binlog-dumps';
import { instanceLayout } from '../../src/capabilities/mariadb/instance/instance-layout';
import { adminSession, type AdminSession } from '../../src/capabilities/mariadb/instance/sql';
import { slaveStatus, type SlaveStatus } from '../../src/capabilities/mariadb/instance/replication';
import { HOSTS, secrets, startShardFixture, type ShardFixture } from './shard-fixture';

const MASTER = { host: HOSTS[0], port: 57151, serverId: 51, agent: 0 };
const STANDBY = { host: HOSTS[1], port: 57152, serverId: 52, agent: 1 };

let f: ShardFixture;
let ha: MariaDbHaAgentClient[];
const sessions: AdminSession[] = [];

const admin = async (node: { port: number; serverId: number }): Promise<AdminSession> => {
  const s = await adminSession(instanceLayout(f.spec(node.port, node.serverId)), secrets.admin);
  sessions.push(s);
  return s;
};

const binlogDumps = (s: AdminSession) => s.rows<{ id: number; state: string }>('list dumps', "SELECT ID AS id, STATE AS state FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'");
const semiSyncClients = async (s: AdminSession) => Number((await s.rows<{ Value: string }>('clients', "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'"))[0].Value);

/** Polls until `done` holds; fails with the last value seen when it has not within `ms` (a bound on a wait, not an assertion on time). */
async function waitFor<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('closeBinlogDumps before RESET MASTER (real mariadbd, semi-sync master and standby)', () => {
  beforeAll(async () => {
    f = await startShardFixture();
    ha = f.agents.map((a) => new MariaDbHaAgentClient(a.address));
    await Promise.all([MASTER, STANDBY].map((n) => f.clients[n.agent].install(f.installRequest(`dumps-install-${n.port}`, n.port, n.serverId))));
    await f.clients[MASTER.agent].configureReplication({ op_id: 'dumps-m', port: MASTER.port, role: 'master', master_host: '', master_port: 0, replication: secrets.replication, fullsync_level: 1 });
    await f.clients[STANDBY.agent].configureReplication({ op_id: 'dumps-s', port: STANDBY.port, role: 'standby', master_host: MASTER.host, master_port: MASTER.port, replication: secrets.replication, fullsync_level: 1 });
    const m = await admin(MASTER);
    await m.run('db', 'CREATE DATABASE dumps_db');
    await m.run('table', 'CREATE TABLE dumps_db.t (id INT PRIMARY KEY) ENGINE=InnoDB');
    await m.run('row', 'INSERT INTO dumps_db.t VALUES (1)');
    const pos = (await ha[MASTER.agent].replicationStatus(MASTER.port)).gtid_binlog_pos;
    expect((await ha[STANDBY.agent].waitForGtid(STANDBY.port, pos, 10_000)).reached).toBe(true);
  }, 180_000);

  afterAll(async () => {
    for (const s of sessions) await s.close();
    for (const c of ha ?? []) c.close();
    await f?.close();
  });

  it('no dump survives and the standby stays out until the unlock; RESET MASTER and the next semi-sync commit complete; the restarted standby has that commit', async () => {
    const master = await admin(MASTER);
    const standby = await admin(STANDBY);
    // The standby is dumping this binlog as a semi-sync client: the situation of the restore drill.
    const before = await waitFor('the standby connected as a semi-sync client', async () => ({ dumps: (await binlogDumps(master)).length, clients: await semiSyncClients(master) }), (v) => v.dumps === 1 && v.clients === 1);
    expect(before).toEqual({ dumps: 1, clients: 1 });

    // (1) As restoreInto does it: account changes kept out of the binlog, then the dumps closed.
    await master.run('no binlog', 'SET SESSION sql_log_bin = 0');
    const started = performance.now();
    const unlock = await closeBinlogDumps(master, secrets.replication.user);
    const closeMs = Math.round(performance.now() - started);
    expect(await binlogDumps(master)).toEqual([]);
    // The IO thread reconnects every second (MASTER_CONNECT_RETRY = 1) and is refused.
    const refused = await waitFor(
      "the standby's IO thread refused by the locked account",
      async () => (await slaveStatus(standby)) as SlaveStatus,
      (st) => st.Slave_IO_Running !== 'Yes' && /locked/i.test(st.Last_IO_Error),
    );
    expect(refused.Slave_IO_Running).not.toBe('Yes');
    expect(refused.Last_IO_Error).toMatch(/account is locked/i);
    expect(await binlogDumps(master)).toEqual([]);
    const lockedOnStandby = await standby.rows<{ locked: string }>('lock on the standby', "SELECT JSON_VALUE(Priv, '$.account_locked') AS locked FROM mysql.global_priv WHERE User = ?", [secrets.replication.user]);
    expect(lockedOnStandby.map((r) => r.locked)).not.toContain('true'); // the lock stayed out of the binlog

    // (2) The reset and the next commit, which waits for a semi-sync ACK (the master never falls back).
    const gtidState = (await master.rows<{ state: string }>('gtid state', 'SELECT @@GLOBAL.gtid_binlog_state AS state'))[0].state;
    await master.run('reset', 'RESET MASTER');
    await master.run('keep the GTID position', 'SET GLOBAL gtid_binlog_state = ?', [gtidState]);
    const yesTx = async () => Number((await master.rows<{ Value: string }>('acked', "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_yes_tx'"))[0].Value);
    const ackedBefore = await yesTx();
    const writer = await admin(MASTER);
    const write = writer.run('the write after the reset', 'INSERT INTO dumps_db.t VALUES (2)');

    // (3) Unlocked, the standby's IO thread restarted: it logs in, acknowledges and replicates the write.
    await unlock();
    await standby.run('stop io', 'STOP SLAVE IO_THREAD');
    await standby.run('start io', 'START SLAVE IO_THREAD');
    await write;
    expect(await yesTx()).toBe(ackedBefore + 1); // committed with the standby's ACK, not without one
    const pos = (await master.rows<{ pos: string }>('pos', 'SELECT @@GLOBAL.gtid_binlog_pos AS pos'))[0].pos;
    expect((await ha[STANDBY.agent].waitForGtid(STANDBY.port, pos, 10_000)).reached).toBe(true);
    expect((await standby.rows<{ id: number }>('rows', 'SELECT id FROM dumps_db.t ORDER BY id')).map((r) => Number(r.id))).toEqual([1, 2]);
    const after = await slaveStatus(standby);
    expect(after).toMatchObject({ Slave_IO_Running: 'Yes', Slave_SQL_Running: 'Yes', Last_IO_Error: '', Last_SQL_Error: '' });
    // One dump again, streaming (none left finalizing its termination).
    expect((await binlogDumps(master)).map((d) => d.state)).not.toContain('Waiting to finalize termination');
    expect(await semiSyncClients(master)).toBe(1);
    console.log(`closeBinlogDumps: 1 dump closed in ${closeMs} ms; standby refused with "${refused.Last_IO_Error}" (io=${refused.Slave_IO_Running}); write after RESET MASTER acked, standby at ${pos}`);
  }, 30_000);
});
