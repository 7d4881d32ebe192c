// The XA branches compute nodes leave prepared, and their decisions (DESIGN.md section 12):
// what the leader's in-doubt resolver reads and ends through MariaDbHaAgent. SQL only, as the
// instance's admin account; every gtrid and bqual is checked as kcm's ASCII form and reaches
// a statement as a placeholder or a hex literal, never as text.
//
// Measured on MariaDB 10.11 (services/agent/test/mariadb/xa-agent.test.ts):
//  - a prepared branch survives its client's disconnect (and a SIGKILL of mariadbd), still
//    holding its row locks; XA PREPARE is binlogged, so a GTID standby (semi-sync or not)
//    holds it prepared too, and still does after Promote (STOP SLAVE, RESET SLAVE ALL,
//    read_only OFF), where XA COMMIT ends it;
//  - while the preparing session is still connected, XA RECOVER lists the branch, but XA
//    COMMIT / XA ROLLBACK from another session answer XAER_NOTA (1397) as for an unknown
//    xid: only that session ends it, until it disconnects (FinishXa reports it `held`).
//  - a branch held that way by a compute node that hangs (frozen, cut off with its TCP
//    session still open) would keep its row locks until the session times out (wait_timeout,
//    8 h): FinishXa kills the preparing session, which the bqual names, and the branch is
//    detached and ended the next round. Only branches the resolver found in doubt and decided
//    reach FinishXa, and the decision row settles the race with a compute node that resumes.
//  - read_only does not stop the admin account (ALL PRIVILEGES includes READ ONLY ADMIN):
//    whatever writes here checks read_only itself, inside the writing statement where it can.

import { AgentFailure, isKcmBqual, isKcmGtrid, kcmXidSql, parseKcmXidSql, preparingSessionOf, type MariaDbDecideXaReply, type MariaDbDecideXaRequest, type MariaDbFinishXaReply, type MariaDbFinishXaRequest, type MariaDbListXaReply, type MariaDbListXaRequest, type MariaDbPruneXaReply, type MariaDbPruneXaRequest, type MariaDbXaBranch } from '@kcm/agent-api';
import type { AgentContext } from '../../../capability';
import { checkPort, loadAdminAccount } from './instance-layout';
import { layoutOf } from './lifecycle';
import { account, MariaDbSqlError, withAdmin, type AdminSession } from './sql';

/**
 * The decision table every instance of every shard has (made at install, outside the binlog
 * like the accounts: each instance makes its own, physical copies carry it). A row is
 * written in the coordinator's own commit (`commit`) or by DecideXa (`abort`); no row means
 * no decision yet, which the resolver turns into abort.
 */
export const XA_DECISIONS_DDL = [
  'CREATE DATABASE IF NOT EXISTS kcm_sys',
  `CREATE TABLE IF NOT EXISTS kcm_sys.xa_decisions (
    gtrid VARBINARY(64) NOT NULL PRIMARY KEY,
    outcome ENUM('commit','abort') NOT NULL,
    decided_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
  ) ENGINE=InnoDB`,
];

/** The storage account (compute nodes) writes its commit decisions and reads them back. */
export function xaDecisionsGrant(storageUser: string): string {
  return `GRANT SELECT, INSERT ON kcm_sys.xa_decisions TO ${account(storageUser, '%')}`;
}

/** How long DecideXa waits for a row lock: a coordinator's commit in flight holds its row's. */
const DECIDE_LOCK_WAIT_S = 2;
const ER_DUP_ENTRY = 1062;
const ER_LOCK_WAIT_TIMEOUT = 1205;
const ER_LOCK_DEADLOCK = 1213;
const ER_NO_SUCH_TABLE = 1146;
const ER_XAER_NOTA = 1397;
/** Decision rows younger than this are never pruned, whatever the caller asks. */
const PRUNE_MIN_AGE_S = 60;
const PRUNE_MAX_KEEP = 100_000;
const PRUNE_BATCH_ROWS = 10_000;

const errnoOf = (err: unknown) => (err instanceof MariaDbSqlError ? err.errno : undefined);

function checkGtrid(gtrid: string): string {
  if (!isKcmGtrid(gtrid)) throw new AgentFailure('invalid_argument', `gtrid ${JSON.stringify(gtrid)} is not a kcm gtrid (kcm:<shard id>:<printable ASCII>, at most 64 bytes)`);
  return gtrid;
}

async function onInstance<T>(ctx: AgentContext, port: number, work: (s: AdminSession) => Promise<T>): Promise<T> {
  const layout = await layoutOf(ctx, checkPort(port));
  return withAdmin(layout, await loadAdminAccount(layout), [], work);
}

async function kcmBranches(s: AdminSession): Promise<MariaDbListXaReply> {
  const rows = await s.rows<{ formatID: number | string; data: string | Buffer }>('list prepared XA branches', "XA RECOVER FORMAT='SQL'");
  const branches: MariaDbXaBranch[] = [];
  let unreadable = 0;
  for (const row of rows) {
    const parsed = parseKcmXidSql(Number(row.formatID), typeof row.data === 'string' ? row.data : row.data.toString('latin1'));
    if (parsed === 'unreadable') unreadable++;
    else if (parsed) branches.push(parsed);
  }
  return { branches, unreadable };
}

/** A shard master only: a write by the admin account on a read_only instance would be errant. */
async function requireWritable(s: AdminSession, what: string): Promise<void> {
  const [row] = await s.rows<{ ro: number | string }>('read read_only', 'SELECT @@global.read_only AS ro');
  if (Number(row.ro) !== 0) throw new AgentFailure('failed_precondition', `${what}: the instance is read_only (not a shard's writable master)`);
}

export async function listPreparedXa(ctx: AgentContext, req: MariaDbListXaRequest): Promise<MariaDbListXaReply> {
  return onInstance(ctx, req.port, kcmBranches);
}

/**
 * Inserts the abort decision unless the gtrid has one: whoever inserts first wins, the
 * coordinator's commit or this. A coordinator commit in flight holds the row's lock, so the
 * insert waits for it (at most DECIDE_LOCK_WAIT_S, then `pending`) and then finds its row.
 * The read_only check is in the inserting statement: `SET GLOBAL read_only = ON` waits for
 * statements under way to end (commit included), so the row is either written before the
 * instance stopped taking writes or not at all.
 */
export async function decideXa(ctx: AgentContext, req: MariaDbDecideXaRequest): Promise<MariaDbDecideXaReply> {
  const gtrid = checkGtrid(req.gtrid);
  return onInstance(ctx, req.port, async (s) => {
    await s.run('short lock wait', `SET SESSION innodb_lock_wait_timeout = ${DECIDE_LOCK_WAIT_S}`);
    try {
      const inserted = await s.change('decide abort', "INSERT INTO kcm_sys.xa_decisions (gtrid, outcome) SELECT ?, 'abort' FROM DUAL WHERE @@global.read_only = 0", [gtrid]);
      if (inserted === 1) return { outcome: 'abort', decided_now: true };
      throw new AgentFailure('failed_precondition', 'decide XA: the instance is read_only (not the coordinator shard\'s writable master)');
    } catch (err) {
      const errno = errnoOf(err);
      if (errno === ER_LOCK_WAIT_TIMEOUT || errno === ER_LOCK_DEADLOCK) return { outcome: 'pending', decided_now: false };
      if (errno === ER_NO_SUCH_TABLE) throw new AgentFailure('failed_precondition', 'decide XA: kcm_sys.xa_decisions does not exist on the instance (installed before two-phase commit)');
      if (errno !== ER_DUP_ENTRY) throw err;
    }
    const [row] = await s.rows<{ outcome: 'commit' | 'abort' }>('read decision', 'SELECT outcome FROM kcm_sys.xa_decisions WHERE gtrid = ?', [gtrid]);
    return row ? { outcome: row.outcome, decided_now: false } : { outcome: 'pending', decided_now: false };
  });
}

/**
 * XA COMMIT or XA ROLLBACK of one branch, on a writable instance only. XAER_NOTA is success
 * (already ended) unless XA RECOVER still lists the branch: then a live session holds it.
 * The read_only check comes before the statement (XA COMMIT takes no condition): a
 * switchover that makes the instance read_only in between lets this one end through, and
 * the promoted standby's copy of the branch is ended by the next round there.
 */
export async function finishXa(ctx: AgentContext, req: MariaDbFinishXaRequest): Promise<MariaDbFinishXaReply> {
  const gtrid = checkGtrid(req.gtrid);
  if (!isKcmBqual(req.bqual)) throw new AgentFailure('invalid_argument', `bqual ${JSON.stringify(req.bqual)} is not a kcm bqual (<shard id>.<ordinal>[.<session id>])`);
  const xid = kcmXidSql(gtrid, req.bqual);
  return onInstance(ctx, req.port, async (s) => {
    await requireWritable(s, 'finish XA');
    try {
      await s.run(req.commit ? 'commit XA branch' : 'roll back XA branch', `XA ${req.commit ? 'COMMIT' : 'ROLLBACK'} ${xid}`);
      return { ended: true, held: false };
    } catch (err) {
      if (errnoOf(err) !== ER_XAER_NOTA) throw err;
    }
    const { branches } = await kcmBranches(s);
    const held = branches.some((b) => b.gtrid === gtrid && b.bqual === req.bqual);
    if (held) await endPreparingSession(ctx, s, req.bqual);
    return { ended: false, held };
  });
}

/**
 * Kills the session that prepared a branch and still holds it, so that the next round can end
 * the branch. Only a client session is killed: never the agent's own admin account's, a
 * replication thread or a system thread.
 */
async function endPreparingSession(ctx: AgentContext, s: AdminSession, bqual: string): Promise<void> {
  const session = preparingSessionOf(bqual);
  if (session === undefined) return;
  const [row] = await s.rows<{ user: string; command: string }>('find the preparing session', 'SELECT USER AS user, COMMAND AS command FROM information_schema.PROCESSLIST WHERE ID = ?', [session]);
  const [me] = await s.rows<{ user: string }>('who am I', 'SELECT SUBSTRING_INDEX(CURRENT_USER(), \'@\', 1) AS user');
  if (!row || row.user === me.user || row.user === 'system user' || /^(Binlog Dump|Slave_|Daemon)/.test(row.command)) return;
  await s.run('kill the session holding an in-doubt XA branch', `KILL CONNECTION ${Number(session)}`).catch((err) => {
    ctx.logger.warn({ err: (err as Error).message, session }, 'could not kill the session holding an in-doubt XA branch');
  });
  ctx.logger.warn({ session, user: row.user, bqual }, 'killed the shard session holding an in-doubt XA branch (its compute node hangs); the branch is ended next round');
}

/**
 * Deletes decision rows older than `older_than_seconds` (at least PRUNE_MIN_AGE_S) but those
 * of `keep_gtrids`, at most PRUNE_BATCH_ROWS per call; read_only checked in the statement.
 */
export async function pruneXaDecisions(ctx: AgentContext, req: MariaDbPruneXaRequest): Promise<MariaDbPruneXaReply> {
  if (!(Number.isInteger(req.older_than_seconds) && req.older_than_seconds >= PRUNE_MIN_AGE_S)) {
    throw new AgentFailure('invalid_argument', `older_than_seconds ${req.older_than_seconds} must be an integer >= ${PRUNE_MIN_AGE_S}`);
  }
  if (req.keep_gtrids.length > PRUNE_MAX_KEEP) throw new AgentFailure('invalid_argument', `at most ${PRUNE_MAX_KEEP} keep_gtrids`);
  const keep = [...new Set(req.keep_gtrids.map(checkGtrid))];
  return onInstance(ctx, req.port, async (s) => {
    await requireWritable(s, 'prune XA decisions');
    const deleted = await s.change(
      'prune XA decisions',
      `DELETE FROM kcm_sys.xa_decisions WHERE @@global.read_only = 0 AND decided_at < NOW(6) - INTERVAL ? SECOND${keep.length ? ' AND gtrid NOT IN (?)' : ''} LIMIT ${PRUNE_BATCH_ROWS}`,
      keep.length ? [req.older_than_seconds, keep] : [req.older_than_seconds],
    );
    return { deleted };
  });
}
