// Checksums at backup time (docs/backup-policies.md, "Restore drills"): a standby backup
// source is held still (its SQL thread stopped; the IO thread keeps receiving, so the
// master's semi-sync acks go on) while its tables are checksummed and it is backed up, so
// the figures and the backup belong to one GTID position X. The set's recorded position is
// checked to be X; otherwise no figures are recorded (a drill would compare against the
// wrong moment). A master source is never held: a set backed up from it has no figures.
//
// Crash safety: the hold always ends in a finally (ResumeApply). When the manager dies in
// between, the job's next leader re-runs the backup step, which holds and resumes again; a
// job that fails instead ends in its rollback, which resumes applying on every standby of
// the cluster (resumeHeldStandbys: idempotent, a standby applying already is left as it is).
// A promote resumes a held standby's applying itself before it takes the master role.

import { parseGtidPos, formatGtidPos, type Agents, type MariaDbBackupSource } from '@kcm/agent-api';
import type { ClusterRecord, TableChecksumRecord } from '../../meta/state';

export interface HeldBackup<T> {
  stored: T;
  /** Present when the backup's position is the held one. */
  tableChecksums?: TableChecksumRecord[];
  checksumsOmitted?: string;
}

/** One spelling of a GTID position (domains in order), so equal positions compare equal. */
export function sameGtidPos(a: string, b: string): boolean {
  try {
    return formatGtidPos(parseGtidPos(a)) === formatGtidPos(parseGtidPos(b));
  } catch {
    return a === b;
  }
}

/**
 * Runs `backup` of `source`; when the source is a standby, with its applying held and each
 * user table's figures read first. A failure to hold or read the figures does not stop the
 * backup: the set is then recorded without figures, saying why.
 */
export async function backUpHeld<T extends { gtidPos: string }>(agents: Agents, source: MariaDbBackupSource, backup: () => Promise<T>): Promise<HeldBackup<T>> {
  if (source.is_master) return { stored: await backup() };
  const ha = agents.mariadbHa(source.hostaddr);
  let held: { gtid_pos: string; tables: TableChecksumRecord[] } | undefined;
  let omitted: string | undefined;
  try {
    try {
      held = await ha.tableChecksums(source.port, true);
    } catch (err) {
      omitted = `the standby's tables could not be checksummed: ${err instanceof Error ? err.message : String(err)}`;
    }
    const stored = await backup();
    if (!held) return { stored, checksumsOmitted: omitted };
    if (!sameGtidPos(stored.gtidPos, held.gtid_pos)) return { stored, checksumsOmitted: `the backup's position ${stored.gtidPos} is not the held one ${held.gtid_pos}` };
    return { stored, tableChecksums: held.tables.map((t) => ({ database: t.database, table: t.table, rows: t.rows, checksum: t.checksum })) };
  } finally {
    // Also after a failed hold: the call may have stopped the SQL thread before it failed.
    await ha.resumeApply(source.port).catch(() => {});
  }
}

/**
 * A failed backup's rollback: applying resumed on every standby of the cluster (a hold the
 * job's finally did not end, its manager having died). Unreachable ones are named.
 */
export async function resumeHeldStandbys(agents: Agents, cluster: ClusterRecord): Promise<string[]> {
  const problems: string[] = [];
  for (const shard of Object.values(cluster.shards)) {
    for (const node of Object.values(shard.nodes)) {
      if (node.id === shard.masterNodeId) continue;
      await agents
        .mariadbHa(node.hostaddr)
        .resumeApply(node.port)
        .catch((err: unknown) => problems.push(`${node.hostaddr}:${node.port}: ${err instanceof Error ? err.message : String(err)}`));
    }
  }
  return problems;
}
