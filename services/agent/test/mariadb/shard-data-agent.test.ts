// Real mariadbd, through the ShardDataAgent gRPC service (proto/agent-shard-data.proto): the
// sessions an agent holds for the manager, a move's copy between two instances (binary and
// composite keys), its catch-up across binlog rotations, the comparison, and a cancelled copy.
// The source master is on the first agent's host, the target on the second's, as in a move.

import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentCallError, ShardDataAgentClient, type CopyRowsProgress, type CopyRowsRequest, type TableShape } from '@kcm/agent-api';
import * as grpc from '@grpc/grpc-js';
import { instanceLayout } from '../../src/index';
import { HOSTS, secrets, startShardFixture, type ShardFixture } from './shard-fixture';

const SOURCE = 57141;
const TARGET = 57142;
const DB = 'shop_$$_public';
const ROWS = 20_000;
let f: ShardFixture;
let atSource: ShardDataAgentClient;
let atTarget: ShardDataAgentClient;

const storage = (host: string, port: number) => ({ host, port, ...secrets.storage });
const sourceLogin = () => storage(HOSTS[0], SOURCE);
const targetLogin = () => storage(HOSTS[1], TARGET);
const replicationLogin = () => ({ host: HOSTS[0], port: SOURCE, ...secrets.replication });

/** Statements as the instance's admin over its socket (FLUSH BINARY LOGS needs RELOAD). */
async function admin<T = unknown>(port: number, serverId: number, statement: string): Promise<T> {
  const conn = await mysql.createConnection({ socketPath: instanceLayout(f.spec(port, serverId)).socket, ...secrets.admin, multipleStatements: true });
  try {
    return (await conn.query(statement))[0] as T;
  } finally {
    await conn.end();
  }
}
const onSource = <T = unknown>(statement: string) => admin<T>(SOURCE, 1, statement);
const onTarget = <T = unknown>(statement: string) => admin<T>(TARGET, 2, statement);

/** items: a composite key of a binary code and an integer; every kind of value a copy must keep. */
const ITEMS_DDL = 'CREATE TABLE `shop_$$_public`.items (code VARBINARY(8) NOT NULL, id BIGINT UNSIGNED NOT NULL, note VARCHAR(40), amount DECIMAL(12,2), at DATETIME(3), raw BLOB, PRIMARY KEY (code, id))';
const ITEMS_SHAPE: TableShape = {
  columns: ['code', 'id', 'note', 'amount', 'at', 'raw'],
  text: ['note'],
  key: [
    { name: 'code', ordinal: 1 },
    { name: 'id', ordinal: 2 },
  ],
};
const table = (login: ReturnType<typeof storage>, name: string) => ({ login, db: DB, table: name });

function copyRequest(moveId: string, name: string, more: Partial<CopyRowsRequest> = {}): CopyRowsRequest {
  return {
    move_id: moveId,
    source: table(sourceLogin(), name),
    target: table(targetLogin(), name),
    shape: ITEMS_SHAPE,
    chunk_rows: 1000,
    commit_rows: 5000,
    commit_bytes: 4 << 20,
    commit_ms: 1000,
    rows_per_second: 0,
    max_target_lag_trx: 0,
    target_standbys: [],
    from_start: false,
    resume_after_json: '',
    ...more,
  };
}

async function fillItems(name: string, rows: number): Promise<void> {
  await onSource(
    `SET SESSION max_recursive_iterations = 1000000; ${ITEMS_DDL.replace('.items', `.${name}`)};` +
      `INSERT INTO \`${DB}\`.${name} WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${rows}) ` +
      `SELECT UNHEX(LPAD(HEX(i MOD 7), 2, '0')), 18446744073709551000 - i, CONCAT('note ', i, ' é'), i / 100, TIMESTAMP('2026-01-01') + INTERVAL i SECOND, IF(i MOD 3 = 0, NULL, UNHEX(CONCAT('00FF', LPAD(HEX(i), 4, '0')))) FROM n`,
  );
}

/** The failure a call ended with (the test fails if it succeeded). */
async function failureOf(call: Promise<unknown>): Promise<AgentCallError> {
  const err = await call.then(() => new Error('the call succeeded'), (e: unknown) => e);
  if (!(err instanceof AgentCallError)) throw err;
  return err;
}

describe('the ShardDataAgent service on real mariadbd', () => {
  beforeAll(async () => {
    f = await startShardFixture();
    await Promise.all([f.clients[0].install(f.installRequest('shard-data-src', SOURCE, 1)), f.clients[1].install(f.installRequest('shard-data-dst', TARGET, 2))]);
    atSource = new ShardDataAgentClient(f.agents[0].address);
    atTarget = new ShardDataAgentClient(f.agents[1].address);
    await onSource(`CREATE DATABASE \`${DB}\``);
    await onTarget(`CREATE DATABASE \`${DB}\``);
    await fillItems('items', ROWS);
  }, 180_000);

  afterAll(async () => {
    atSource?.close();
    atTarget?.close();
    await f?.close();
  });

  it('a session runs the manager\'s statements: rows (binary values kept), result headers, and MariaDB\'s own errors', async () => {
    const s = await atSource.openSession(sourceLogin(), DB);
    try {
      const rows = await atSource.sessionQuery<unknown[][]>(s, 'SELECT code, id, note, amount, raw FROM items WHERE id = ?', ['18446744073709550999'], true);
      expect(rows).toEqual([[Buffer.from([1]), '18446744073709550999', 'note 1 é', '0.01', Buffer.from('00ff0001', 'hex')]]);
      const created = await atSource.sessionQuery<{ 'Create Table': string }[]>(s, 'SHOW CREATE TABLE items');
      // The manager's "create the target like the source", in a session on the target's agent.
      const t = await atTarget.openSession(targetLogin(), DB);
      try {
        await atTarget.sessionQuery(t, created[0]['Create Table']);
        const header = await atTarget.sessionQuery<{ affectedRows: number }>(t, 'INSERT INTO items (code, id) VALUES (?, ?), (?, ?)', [Buffer.from([0xff, 0]), 1, Buffer.from([0xff, 0]), 2]);
        expect(header.affectedRows).toBe(2);
        expect(await atTarget.sessionQuery(t, 'SELECT code FROM items WHERE id = 2', [], true)).toEqual([[Buffer.from([0xff, 0])]]);
        expect((await atTarget.sessionQuery<{ affectedRows: number }>(t, 'DELETE FROM items')).affectedRows).toBe(2);
      } finally {
        await atTarget.closeSession(t);
      }
      const failed = await failureOf(atSource.sessionQuery(s, 'SELECT * FROM no_such_table'));
      expect(failed.code).toBe(grpc.status.ABORTED);
      expect(failed.message).toMatch(/MariaDB at 127\.0\.2\.1:57141: Table 'shop_\$\$_public\.no_such_table' doesn't exist \(ER_NO_SUCH_TABLE\)/);
      // A failed statement leaves the session usable.
      expect(await atSource.sessionQuery(s, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    } finally {
      await atSource.closeSession(s);
    }
    const gone = await failureOf(atSource.sessionQuery(s, 'SELECT 1'));
    expect(gone.code).toBe(grpc.status.NOT_FOUND);
    const refused = await failureOf(atSource.openSession({ ...sourceLogin(), port: 57149 }));
    expect(refused.message).toMatch(/MariaDB at 127\.0\.2\.1:57149 did not accept a session/);
  });

  let start = { file: '', pos: 0 };

  it('copies 20,000 rows with binary composite keys from a snapshot, one progress message per target commit, and the comparison finds them equal', async () => {
    // The move's start: the position of a consistent snapshot, read in a session as the manager does.
    const s = await atSource.openSession(sourceLogin());
    await atSource.sessionQuery(s, 'START TRANSACTION WITH CONSISTENT SNAPSHOT');
    const status = await atSource.sessionQuery<{ Variable_name: string; Value: string }[]>(s, "SHOW STATUS LIKE 'binlog_snapshot_%'");
    await atSource.sessionQuery(s, 'COMMIT');
    await atSource.closeSession(s);
    const snap = new Map(status.map((r) => [r.Variable_name.toLowerCase(), r.Value]));
    start = { file: snap.get('binlog_snapshot_file')!, pos: Number(snap.get('binlog_snapshot_position')) };
    const progress: CopyRowsProgress[] = [];
    const last = await atSource.copyRows(copyRequest('move-items', 'items'), (p) => progress.push(p), new AbortController().signal);
    expect(last).toMatchObject({ rows: ROWS, chunks: ROWS / 1000, done: true, resumed_after_json: '' });
    expect(progress.map((p) => p.rows)).toEqual([5000, 10000, 15000, 20000]);
    const [{ n }] = await onTarget<{ n: number }[]>(`SELECT COUNT(*) AS n FROM \`${DB}\`.items`);
    expect(Number(n)).toBe(ROWS);
    const same = await atTarget.compare({ sources: [table(sourceLogin(), 'items')], target: table(targetLogin(), 'items'), shape: ITEMS_SHAPE, chunk_rows: 3000 }, null);
    expect(same).toMatchObject({ sourceRows: [ROWS], chunks: 7, differing: [] });
  }, 60_000);

  it('the catch-up applies later writes, across FLUSH BINARY LOGS, and answers its state to a second start', async () => {
    const request = { move_id: 'move-items', binlog_login: replicationLogin(), source: table(sourceLogin(), 'items'), target: table(targetLogin(), 'items'), shape: ITEMS_SHAPE, start };
    const started = await atSource.startCatchUp(request);
    expect(started.running).toBe(true);
    await onSource(`UPDATE \`${DB}\`.items SET note = 'changed' WHERE id = 18446744073709550999`);
    await onSource('FLUSH BINARY LOGS');
    await onSource(`INSERT INTO \`${DB}\`.items (code, id, note) VALUES (0x0a0b, 7, 'new'); DELETE FROM \`${DB}\`.items WHERE id = 18446744073709550998`);
    await onSource('FLUSH BINARY LOGS');
    const level = await atSource.catchUpTo('move-items', null, 30_000);
    expect(level.rotations_crossed).toBeGreaterThanOrEqual(2);
    expect(level.rows_resynced).toBeGreaterThanOrEqual(2);
    const again = await atSource.startCatchUp(request);
    expect(again).toMatchObject({ running: true, applied: level.applied });
    expect(await onTarget(`SELECT HEX(code) AS code, CAST(id AS CHAR) AS id, note FROM \`${DB}\`.items WHERE id IN (7, 18446744073709550999, 18446744073709550998) ORDER BY note`)).toEqual([
      { code: '01', id: '18446744073709550999', note: 'changed' },
      { code: '0A0B', id: '7', note: 'new' },
    ]);
    // Inside a hold: the tail, then halt and stop.
    await onSource(`UPDATE \`${DB}\`.items SET note = 'in the hold' WHERE code = 0x0a0b AND id = 7`);
    const at = await atSource.sourcePosition('move-items');
    const tail = await atSource.catchUpTail('move-items', at, 10_000);
    // The running catch-up may have applied the UPDATE before the tail was asked for (a CI
    // run on a loaded machine saw tail_rows 0): what the tail guarantees is the position and the row.
    expect(tail.state.applied).toEqual(at);
    expect(await onTarget(`SELECT note FROM \`${DB}\`.items WHERE code = 0x0a0b AND id = 7`)).toEqual([{ note: 'in the hold' }]);
    const same = await atTarget.compare({ sources: [table(sourceLogin(), 'items')], target: table(targetLogin(), 'items'), shape: ITEMS_SHAPE, chunk_rows: 3000 }, null);
    expect(same.differing).toEqual([]);
    expect((await atSource.haltCatchUp('move-items')).running).toBe(false);
    expect((await atSource.stopCatchUp('move-items')).running).toBe(false);
    const gone = await failureOf(atSource.sourcePosition('move-items'));
    expect(gone.code).toBe(grpc.status.NOT_FOUND);
  }, 60_000);

  it('the comparison names the key of a row changed behind the copy\'s back, and compares only named keys when asked', async () => {
    await onTarget(`UPDATE \`${DB}\`.items SET amount = amount + 1 WHERE code = 0x03 AND id = 18446744073709550997`);
    await onTarget(`INSERT INTO \`${DB}\`.items (code, id) VALUES (0xee, 1)`);
    const request = { sources: [table(sourceLogin(), 'items')], target: table(targetLogin(), 'items'), shape: ITEMS_SHAPE, chunk_rows: 3000 };
    const all = await atTarget.compare(request, null);
    expect(all.differing).toEqual([
      [Buffer.from([3]), '18446744073709550997'],
      [Buffer.from([0xee]), '1'],
    ]);
    const some = await atTarget.compare(request, [all.differing[0], [Buffer.from([1]), '18446744073709550999']]);
    expect(some).toMatchObject({ sourceRows: [2], chunks: 1, differing: [all.differing[0]] });
  }, 60_000);

  it('a cancelled copy stops writing, and the next copy resumes after what the first committed', async () => {
    await fillItems('slow', 6000);
    const s = await atTarget.openSession(targetLogin(), DB);
    await atTarget.sessionQuery(s, ITEMS_DDL.replace('`shop_$$_public`.items', 'slow'));
    const stop = new AbortController();
    const first = atSource.copyRows(copyRequest('move-slow', 'slow', { chunk_rows: 200, commit_rows: 200, rows_per_second: 2000 }), (p) => {
      if (p.rows >= 1000) stop.abort(new Error('enough'));
    }, stop.signal);
    await expect(first).rejects.toThrow(/enough/);
    const count = async () => Number((await atTarget.sessionQuery<{ n: string }[]>(s, 'SELECT COUNT(*) AS n FROM slow'))[0].n);
    // The agent sees the cancel a moment later; what it had open is rolled back.
    await new Promise((r) => setTimeout(r, 300));
    const after = await count();
    await new Promise((r) => setTimeout(r, 1000));
    expect(await count()).toBe(after);
    expect(after).toBeLessThan(6000);
    const second = await atSource.copyRows(copyRequest('move-slow', 'slow'), () => {}, new AbortController().signal);
    expect(second.rows).toBe(6000 - after);
    expect(second.resumed_after_json).not.toBe('');
    expect(await count()).toBe(6000);
    await atTarget.closeSession(s);
  }, 60_000);
});
