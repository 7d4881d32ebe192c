/** Full backup, point-in-time restore, logical backup and restore (spec 2.6, 2.7, 4.4). */
import { z } from 'zod';
import {
  addFieldIssue,
  backupWindowString,
  enumString,
  formatted,
  idString,
  OBJECT_TYPES,
  parseDbTable,
  parseId,
  restoreTimeString,
  type ObjectType,
  type Parsed,
} from '../formats';

/** `-1` names the metadata cluster (spec 4.4, 8): kcm backs up a Raft snapshot. */
export const METADATA_CLUSTER_ID = '-1';

function parseBackupClusterId(s: string): Parsed<string> {
  if (s === METADATA_CLUSTER_ID || parseId(s).ok) return { ok: true, value: s };
  return { ok: false, rule: 'must be a positive integer id, or -1 for the metadata cluster' };
}

export const manualBackupClusterParas = z.object({
  cluster_id: formatted(parseBackupClusterId, 'positive integer id, or -1 for the metadata'),
});

export const clusterRestoreParas = z
  .object({
    src_cluster_id: idString(),
    dst_cluster_id: idString(), // must be a new, empty cluster: checked against state by the job
    restore_time: restoreTimeString(),
  })
  .superRefine((p, ctx) => {
    if (p.src_cluster_id === p.dst_cluster_id) {
      addFieldIssue(ctx, ['dst_cluster_id'], 'must differ from src_cluster_id (restore goes into a new empty cluster)', p.dst_cluster_id);
    }
  });

/** Checks every entry's db_table against the shape its object type requires (spec 2.6). */
function checkDbTables(
  type: ObjectType | undefined,
  entries: readonly { db_table: string }[] | undefined,
  listField: string,
  ctx: Parameters<typeof addFieldIssue>[0],
): void {
  if (type === undefined || !Array.isArray(entries)) return;
  const seen = new Set<string>();
  entries.forEach((entry, i) => {
    if (typeof entry?.db_table !== 'string') return;
    const r = parseDbTable(type, entry.db_table);
    if (!r.ok) addFieldIssue(ctx, [listField, i, 'db_table'], r.rule, entry.db_table);
    else if (seen.has(entry.db_table)) addFieldIssue(ctx, [listField, i, 'db_table'], 'must not be listed twice', entry.db_table);
    seen.add(entry.db_table);
  });
}

const backupEntry = z.object({ db_table: z.string(), backup_time: backupWindowString() });

export const logicalBackupParas = z
  .object({
    cluster_id: idString(),
    backup_type: enumString(OBJECT_TYPES),
    backup: z.array(backupEntry).min(1, 'must list at least one backup entry'),
  })
  .superRefine((p, ctx) => checkDbTables(p.backup_type, p.backup, 'backup', ctx));

const restoreEntry = z.object({ db_table: z.string(), restore_time: restoreTimeString() });

/**
 * logical_restore takes `restore: [{db_table, restore_time}]`, or the older form with one
 * `db_table` and `restore_time` directly in paras (spec 4.4). Validated paras always carry
 * the `restore` list.
 */
export const logicalRestoreParas = z
  .object({
    src_cluster_id: idString(),
    dst_cluster_id: idString(),
    restore_type: enumString(OBJECT_TYPES),
    restore: z.array(restoreEntry).min(1, 'must list at least one restore entry').optional(),
    db_table: z.string().optional(),
    restore_time: restoreTimeString().optional(),
  })
  .superRefine((p, ctx) => {
    const olderForm = p.db_table !== undefined || p.restore_time !== undefined;
    if (p.restore !== undefined && olderForm) {
      addFieldIssue(ctx, ['db_table'], 'must not be given together with paras.restore (use one form)', p.db_table ?? p.restore_time);
      return;
    }
    if (p.restore === undefined) {
      if (p.db_table === undefined) {
        ctx.addIssue({ code: 'custom', message: 'is required (or the older form: db_table and restore_time in paras)', path: ['restore'] });
        return;
      }
      if (p.restore_time === undefined) {
        ctx.addIssue({ code: 'custom', message: 'is required with paras.db_table', path: ['restore_time'] });
        return;
      }
      const r = parseDbTable(p.restore_type, p.db_table);
      if (!r.ok) addFieldIssue(ctx, ['db_table'], r.rule, p.db_table);
      return;
    }
    checkDbTables(p.restore_type, p.restore, 'restore', ctx);
  })
  .transform(({ db_table, restore_time, restore, ...rest }) => ({
    ...rest,
    restore: restore ?? [{ db_table: db_table as string, restore_time: restore_time as string }],
  }));
