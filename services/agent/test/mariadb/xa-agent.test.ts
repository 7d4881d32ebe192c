// Real engines, through the MariaDbHaAgent XA calls: a semi-sync master and a standby, a
// branch prepared the way a compute node prepares one (formatID 7037805, gtrid
// `kcm:<coordinator>:...`) from a client that then disconnects. It is listed, decided (abort
// written when no row exists, the coordinator's commit found when one does, pending while
// the coordinator's insert holds the row's lock), ended, and gone. Also the MariaDB 10.11
// facts two-phase commit through compute nodes stands on: a prepared branch outlives its
// client, holds its locks, is replicated to a standby and is still prepared there after
// Promote; another session cannot end a branch its live client still holds; savepoints work
// inside a branch; XA COMMIT ... ONE PHASE works after XA END, not after XA PREPARE.

import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kcmXidSql, MariaDbHaAgentClient } from '@kcm/agent-api';
import { HOSTS, secrets, startShardFixture, type ShardFixture } from './shard-fixture';

const MASTER = { host: HOSTS[0], port: 57141, serverId: 41, agent: 0 };
const STANDBY = { host: HOSTS[1], port: 57142, serverId: 42, agent: 1 };
const DB = 'xa_$$_public';
const FAILED_PRECONDITION = 9;
const INVALID_ARGUMENT = 3;

let f: ShardFixture;
let ha: MariaDbHaAgentClient[];

const connect = (node: { host: string; port: number }) => mysql.createConnection({ host: node.host, port: node.port, ...secrets.storage, connectTimeout: 5000 });

/** What a compute node does for one branch up to PREPARE, on its own connection (returned, still open). */
async function prepareBranch(node: { host: string; port: number }, gtrid: string, bqual: string, id: number): Promise<mysql.Connection> {
  const conn = await connect(node);
  const xid = kcmXidSql(gtrid, bqual);
  await conn.query(`XA START ${xid}`);
  await conn.query(`UPDATE \`${DB}\`.t SET v = v + 1 WHERE id = ?`, [id]);
  await conn.query(`XA END ${xid}`);
  await conn.query(`XA PREPARE ${xid}`);
  return conn;
}

async function valueOf(node: { host: string; port: number }, id: number): Promise<number> {
  const conn = await connect(node);
  try {
    const [rows] = await conn.query(`SELECT v FROM \`${DB}\`.t WHERE id = ?`, [id]);
    return Number((rows as { v: number }[])[0].v);
  } finally {
    await conn.end();
  }
}

/** Whether the row can be locked within 1 s (a prepared branch that updated it holds its lock). */
async function rowLocked(node: { host: string; port: number }, id: number): Promise<boolean> {
  const conn = await connect(node);
  try {
    await conn.query('SET SESSION innodb_lock_wait_timeout = 1');
    await conn.query('START TRANSACTION');
    await conn.query(`SELECT v FROM \`${DB}\`.t WHERE id = ? FOR UPDATE`, [id]);
    await conn.query('ROLLBACK');
    return false;
  } catch (err) {
    if ((err as { errno?: number }).errno === 1205) return true;
    throw err;
  } finally {
    await conn.end();
  }
}

async function settledOnStandby(): Promise<void> {
  const pos = (await ha[MASTER.agent].replicationStatus(MASTER.port)).gtid_binlog_pos;
  expect((await ha[STANDBY.agent].waitForGtid(STANDBY.port, pos, 10_000)).reached).toBe(true);
}

describe('MariaDbHaAgent XA calls (real mariadbd)', () => {
  beforeAll(async () => {
    f = await startShardFixture();
    ha = f.agents.map((a) => new MariaDbHaAgentClient(a.address));
    await Promise.all([MASTER, STANDBY].map((n) => f.clients[n.agent].install(f.installRequest(`xa-install-${n.port}`, n.port, n.serverId))));
    await f.clients[MASTER.agent].configureReplication({ op_id: 'xa-m', port: MASTER.port, role: 'master', master_host: '', master_port: 0, replication: secrets.replication, fullsync_level: 1 });
    await f.clients[STANDBY.agent].configureReplication({ op_id: 'xa-s', port: STANDBY.port, role: 'standby', master_host: MASTER.host, master_port: MASTER.port, replication: secrets.replication, fullsync_level: 1 });
    const conn = await connect(MASTER);
    await conn.query(`CREATE DATABASE \`${DB}\``);
    await conn.query(`CREATE TABLE \`${DB}\`.t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`);
    await conn.query(`INSERT INTO \`${DB}\`.t VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0)`);
    await conn.end();
  }, 180_000);

  afterAll(async () => {
    for (const c of ha ?? []) c.close();
    await f?.close();
  });

  it('every instance has the decision table: the storage account reads and inserts rows, deletes none; no cluster table listing shows it', async () => {
    await settledOnStandby();
    for (const node of [MASTER, STANDBY]) {
      const conn = await connect(node);
      const [rows] = await conn.query('SELECT COUNT(*) AS n FROM kcm_sys.xa_decisions');
      expect(Number((rows as { n: number }[])[0].n)).toBe(0);
      // 1142: no DELETE privilege (the standby, read_only, refuses any write before that).
      if (node === MASTER) await expect(conn.query("DELETE FROM kcm_sys.xa_decisions WHERE gtrid = 'x'")).rejects.toMatchObject({ errno: 1142 });
      await conn.end();
      expect((await f.clients[node.agent].listTables(node.port)).tables).toEqual([`${DB}.t`]);
    }
    const conn = await connect(MASTER);
    await conn.query("INSERT INTO kcm_sys.xa_decisions (gtrid, outcome) VALUES ('kcm:1:committed-1', 'commit')");
    await conn.end();
  });

  it('a branch outlives the client that prepared it: listed, its row still locked, replicated prepared to the standby', async () => {
    await (await prepareBranch(MASTER, 'kcm:1:lost-1', '2.1', 1)).end();
    // A foreign XA transaction (another formatID) on the same instance is not kcm's to list.
    const app = await connect(MASTER);
    await app.query("XA START 'app-gtrid','b',1");
    await app.query(`UPDATE \`${DB}\`.t SET v = v + 1 WHERE id = 5`);
    await app.query("XA END 'app-gtrid','b',1");
    await app.query("XA PREPARE 'app-gtrid','b',1");
    await app.end();
    expect(await ha[MASTER.agent].listPreparedXa(MASTER.port)).toEqual({ branches: [{ gtrid: 'kcm:1:lost-1', bqual: '2.1' }], unreadable: 0 });
    expect(await rowLocked(MASTER, 1)).toBe(true);
    await settledOnStandby();
    expect((await ha[STANDBY.agent].listPreparedXa(STANDBY.port)).branches).toEqual([{ gtrid: 'kcm:1:lost-1', bqual: '2.1' }]);
  });

  it('DecideXa writes abort when there is no row, answers the recorded outcome when there is, and pending while the row is being written', async () => {
    expect(await ha[MASTER.agent].decideXa(MASTER.port, 'kcm:1:lost-1')).toEqual({ outcome: 'abort', decided_now: true });
    expect(await ha[MASTER.agent].decideXa(MASTER.port, 'kcm:1:lost-1')).toEqual({ outcome: 'abort', decided_now: false });
    expect(await ha[MASTER.agent].decideXa(MASTER.port, 'kcm:1:committed-1')).toEqual({ outcome: 'commit', decided_now: false });
    // A coordinator committing right now: its row is inserted, its commit not done.
    const coordinator = await connect(MASTER);
    await coordinator.query('START TRANSACTION');
    await coordinator.query("INSERT INTO kcm_sys.xa_decisions (gtrid, outcome) VALUES ('kcm:1:racing-1', 'commit')");
    const started = Date.now();
    expect(await ha[MASTER.agent].decideXa(MASTER.port, 'kcm:1:racing-1')).toEqual({ outcome: 'pending', decided_now: false });
    expect(Date.now() - started).toBeLessThan(6_000);
    await coordinator.query('COMMIT');
    await coordinator.end();
    expect(await ha[MASTER.agent].decideXa(MASTER.port, 'kcm:1:racing-1')).toEqual({ outcome: 'commit', decided_now: false });
    // A coordinator whose insert comes second finds the abort and must roll back.
    const late = await connect(MASTER);
    await expect(late.query("INSERT INTO kcm_sys.xa_decisions (gtrid, outcome) VALUES ('kcm:1:lost-1', 'commit')")).rejects.toMatchObject({ errno: 1062 });
    await late.end();
  }, 30_000);

  it('only a writable master decides or ends a branch; what is not kcm\'s form is refused', async () => {
    await expect(ha[STANDBY.agent].decideXa(STANDBY.port, 'kcm:1:lost-1')).rejects.toMatchObject({ code: FAILED_PRECONDITION });
    await expect(ha[STANDBY.agent].finishXa({ port: STANDBY.port, gtrid: 'kcm:1:lost-1', bqual: '2.1', commit: false })).rejects.toMatchObject({ code: FAILED_PRECONDITION });
    await expect(ha[STANDBY.agent].pruneXaDecisions({ port: STANDBY.port, older_than_seconds: 600, keep_gtrids: [] })).rejects.toMatchObject({ code: FAILED_PRECONDITION });
    await expect(ha[MASTER.agent].decideXa(MASTER.port, "kcm:1:x' OR 1=1")).rejects.toMatchObject({ code: INVALID_ARGUMENT });
    await expect(ha[MASTER.agent].finishXa({ port: MASTER.port, gtrid: 'kcm:1:lost-1', bqual: "2.1'", commit: true })).rejects.toMatchObject({ code: INVALID_ARGUMENT });
    expect((await ha[STANDBY.agent].listPreparedXa(STANDBY.port)).branches).toHaveLength(1);
  });

  it('FinishXa rolls the branch back by its decision, releases its locks, and is a no-op the second time', async () => {
    expect(await ha[MASTER.agent].finishXa({ port: MASTER.port, gtrid: 'kcm:1:lost-1', bqual: '2.1', commit: false })).toEqual({ ended: true, held: false });
    expect(await ha[MASTER.agent].finishXa({ port: MASTER.port, gtrid: 'kcm:1:lost-1', bqual: '2.1', commit: false })).toEqual({ ended: false, held: false });
    expect((await ha[MASTER.agent].listPreparedXa(MASTER.port)).branches).toEqual([]);
    expect(await rowLocked(MASTER, 1)).toBe(false);
    expect(await valueOf(MASTER, 1)).toBe(0);
    await settledOnStandby();
    expect((await ha[STANDBY.agent].listPreparedXa(STANDBY.port)).branches).toEqual([]);
  });

  it('a branch its live client still holds is listed, but no other session can end it (XAER_NOTA): FinishXa says held', async () => {
    const client = await prepareBranch(MASTER, 'kcm:1:live-1', '2.1', 2);
    expect((await ha[MASTER.agent].listPreparedXa(MASTER.port)).branches).toEqual([{ gtrid: 'kcm:1:live-1', bqual: '2.1' }]);
    expect(await ha[MASTER.agent].finishXa({ port: MASTER.port, gtrid: 'kcm:1:live-1', bqual: '2.1', commit: false })).toEqual({ ended: false, held: true });
    await client.end(); // detached now: anyone may end it
    expect(await ha[MASTER.agent].finishXa({ port: MASTER.port, gtrid: 'kcm:1:live-1', bqual: '2.1', commit: true })).toEqual({ ended: true, held: false });
    expect(await valueOf(MASTER, 2)).toBe(1);
  });

  it('savepoints work inside a branch; XA COMMIT ONE PHASE works after XA END, not after XA PREPARE', async () => {
    const conn = await connect(MASTER);
    try {
      const a = kcmXidSql('kcm:1:facts-1', '1.1');
      await conn.query(`XA START ${a}`);
      await conn.query(`UPDATE \`${DB}\`.t SET v = 100 WHERE id = 3`);
      await conn.query('SAVEPOINT s1');
      await conn.query(`UPDATE \`${DB}\`.t SET v = 200 WHERE id = 3`);
      await conn.query('ROLLBACK TO SAVEPOINT s1');
      await conn.query('RELEASE SAVEPOINT s1');
      await conn.query(`XA END ${a}`);
      await conn.query(`XA COMMIT ${a} ONE PHASE`);
      expect(await valueOf(MASTER, 3)).toBe(100);
      const b = kcmXidSql('kcm:1:facts-2', '1.1');
      await conn.query(`XA START ${b}`);
      await conn.query(`UPDATE \`${DB}\`.t SET v = 300 WHERE id = 3`);
      await conn.query(`XA END ${b}`);
      await conn.query(`XA PREPARE ${b}`);
      await expect(conn.query(`XA COMMIT ${b} ONE PHASE`)).rejects.toMatchObject({ errno: 1398 }); // XAER_INVAL
      await conn.query(`XA ROLLBACK ${b}`);
      expect(await valueOf(MASTER, 3)).toBe(100);
    } finally {
      await conn.end();
    }
  });

  it('PruneXaDecisions deletes old rows but those of gtrids still prepared, never young ones', async () => {
    const conn = await connect(MASTER);
    await conn.query("INSERT INTO kcm_sys.xa_decisions (gtrid, outcome, decided_at) VALUES ('kcm:1:old-1', 'commit', NOW(6) - INTERVAL 1 HOUR), ('kcm:1:old-kept', 'abort', NOW(6) - INTERVAL 1 HOUR)");
    await expect(ha[MASTER.agent].pruneXaDecisions({ port: MASTER.port, older_than_seconds: 10, keep_gtrids: [] })).rejects.toMatchObject({ code: INVALID_ARGUMENT });
    expect(await ha[MASTER.agent].pruneXaDecisions({ port: MASTER.port, older_than_seconds: 600, keep_gtrids: ['kcm:1:old-kept'] })).toEqual({ deleted: 1 });
    const [rows] = await conn.query('SELECT gtrid FROM kcm_sys.xa_decisions ORDER BY gtrid');
    expect((rows as { gtrid: Buffer }[]).map((r) => r.gtrid.toString())).toEqual(['kcm:1:committed-1', 'kcm:1:lost-1', 'kcm:1:old-kept', 'kcm:1:racing-1']);
    await conn.end();
  });

  it('a branch prepared on the master is still prepared on the standby after Promote, and ends there', async () => {
    const client = await prepareBranch(MASTER, 'kcm:1:failover-1', '2.1', 4);
    await client.end();
    await settledOnStandby();
    await ha[MASTER.agent].fence('xa-fence', MASTER.port, true);
    // fullsync_level 0: no standby is attached to it here, and with 1 its commit would wait
    // for one (semi-sync never falls back to asynchronous).
    await ha[STANDBY.agent].promote({ op_id: 'xa-promote', port: STANDBY.port, fullsync_level: 0, wait_relay_ms: 5_000 });
    expect((await ha[STANDBY.agent].listPreparedXa(STANDBY.port)).branches).toEqual([{ gtrid: 'kcm:1:failover-1', bqual: '2.1' }]);
    expect(await rowLocked(STANDBY, 4)).toBe(true);
    expect(await ha[STANDBY.agent].finishXa({ port: STANDBY.port, gtrid: 'kcm:1:failover-1', bqual: '2.1', commit: true })).toEqual({ ended: true, held: false });
    expect(await valueOf(STANDBY, 4)).toBe(1);
    expect((await ha[STANDBY.agent].listPreparedXa(STANDBY.port)).branches).toEqual([]);
  }, 60_000);
});
