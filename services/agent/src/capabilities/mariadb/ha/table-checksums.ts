// What a restore drill compares (docs/backup-policies.md, "Restore drills"): each user
// table's row count and CHECKSUM TABLE, read on a standby whose applying is held still so
// that the figures, and a backup taken meanwhile, belong to one GTID position.
//
// CHECKSUM TABLE (not an ordered md5 of rows): a physical restore gives back the same pages,
// row format and server version, so the figure is reproduced exactly; it is computed from
// the row images, which differ between row formats and server versions (MariaDB changed it
// for temporal types in 10.0), so it proves nothing across a logical dump or an upgrade.

import { AgentFailure, type MariaDbResumeApplyReply, type MariaDbResumeApplyRequest, type MariaDbTableChecksum, type MariaDbTableChecksumsReply, type MariaDbTableChecksumsRequest } from '@kcm/agent-api';
import type { AgentContext } from '../../../capability';
import { checkPort, loadAdminAccount } from '../instance/instance-layout';
import { layoutOf } from '../instance/lifecycle';
import { withAdmin, type AdminSession } from '../instance/sql';
import { readReplicationFacts } from './ha-status';

/** Not user data: the server's own schemas and kcm's (XA decisions, pruned on their own). */
const NOT_USER_SCHEMAS = ['mysql', 'information_schema', 'performance_schema', 'sys', 'kcm_sys'];

const quoteName = (name: string) => `\`${name.replace(/`/g, '``')}\``;

async function checksumsOf(s: AdminSession): Promise<MariaDbTableChecksum[]> {
  const tables = await s.rows<{ db: string; name: string }>(
    'list user tables',
    `SELECT TABLE_SCHEMA AS db, TABLE_NAME AS name FROM information_schema.TABLES
      WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN (${NOT_USER_SCHEMAS.map(() => '?').join(', ')})
      ORDER BY TABLE_SCHEMA, TABLE_NAME`,
    NOT_USER_SCHEMAS,
  );
  const out: MariaDbTableChecksum[] = [];
  for (const t of tables) {
    const name = `${quoteName(t.db)}.${quoteName(t.name)}`;
    const [count] = await s.rows<{ n: string | number }>(`count rows of ${t.db}.${t.name}`, `SELECT COUNT(*) AS n FROM ${name}`);
    const [sum] = await s.rows<{ Checksum: string | number | null }>(`checksum ${t.db}.${t.name}`, `CHECKSUM TABLE ${name}`);
    out.push({ database: t.db, table: t.name, rows: Number(count.n), checksum: sum?.Checksum === null || sum?.Checksum === undefined ? '' : String(sum.Checksum) });
  }
  return out;
}

export async function tableChecksums(ctx: AgentContext, req: MariaDbTableChecksumsRequest): Promise<MariaDbTableChecksumsReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  return withAdmin(layout, await loadAdminAccount(layout), [], async (s) => {
    let held = false;
    if (req.hold_apply) {
      const facts = await readReplicationFacts(s);
      if (!facts.is_replica) throw new AgentFailure('failed_precondition', `instance ${req.port} is no standby: there is no applying to hold`);
      // Waits for the transaction being applied to end; the IO thread goes on receiving.
      if (facts.sql_running) {
        await s.run('hold applying', 'STOP SLAVE SQL_THREAD');
        held = true;
      }
    }
    // @@gtid_current_pos: what mariabackup records as a backup's position (backup-info.ts), so
    // the caller can check that a backup taken during the hold is at this very point.
    const [pos] = await s.rows<{ cur: string }>('read position', 'SELECT @@gtid_current_pos AS cur');
    const tables = await checksumsOf(s);
    return { gtid_pos: pos.cur, tables, held };
  });
}

export async function resumeApply(ctx: AgentContext, req: MariaDbResumeApplyRequest): Promise<MariaDbResumeApplyReply> {
  const layout = await layoutOf(ctx, checkPort(req.port));
  return withAdmin(layout, await loadAdminAccount(layout), [], async (s) => {
    const facts = await readReplicationFacts(s);
    if (!facts.is_replica) return { sql_running: false };
    if (!facts.sql_running) await s.run('resume applying', 'START SLAVE SQL_THREAD');
    return { sql_running: (await readReplicationFacts(s)).sql_running ?? false };
  });
}
