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

/**
 * The object type a db_table's shape names (spec 2.6): `.` only in a table's name, `_$$_`
 * only in a schema's; undefined when it has neither shape's marks in a valid position.
 */
export function objectTypeOfDbTable(dbTable: string): ObjectType | undefined {
  return OBJECT_TYPES.find((type) => parseDbTable(type, dbTable).ok);
}

type IssueContext = Parameters<typeof addFieldIssue>[0];

/**
 * The type the request gives, or the one every entry's db_table shape names when it gives
 * none (the spec does not mark backup_type / restore_type required). Entries of different
 * shapes without a type are refused on the first entry that differs.
 */
function inferObjectType(
  given: ObjectType | undefined,
  dbTables: readonly { path: PropertyKey[]; value: unknown }[],
  typeField: string,
  ctx: IssueContext,
): ObjectType | undefined {
  if (given !== undefined) return given;
  let inferred: { type: ObjectType; from: string } | undefined;
  for (const { path, value } of dbTables) {
    if (typeof value !== 'string') return undefined;
    const type = objectTypeOfDbTable(value);
    if (type === undefined) {
      addFieldIssue(ctx, path, `must be ${OBJECT_SHAPES} (${typeField} not given, so the shape names the type)`, value);
      return undefined;
    }
    if (inferred && inferred.type !== type) {
      addFieldIssue(ctx, path, `names a ${type} but ${inferred.from} names a ${inferred.type}: give ${typeField}, or list objects of one type`, value);
      return undefined;
    }
    inferred ??= { type, from: path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').slice(1) };
  }
  return inferred?.type;
}

const OBJECT_SHAPES = '<database>_$$_<schema>.<table>, <database>_$$_<schema> or <database>';

/** Checks every entry's db_table against the shape its object type requires (spec 2.6). */
function checkDbTables(
  type: ObjectType | undefined,
  entries: readonly { db_table: string }[] | undefined,
  listField: string,
  ctx: IssueContext,
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

/** logical_backup; validated paras always carry backup_type (given, or inferred from the db_table shapes). */
export const logicalBackupParas = z
  .object({
    cluster_id: idString(),
    backup_type: enumString(OBJECT_TYPES).optional(),
    backup: z.array(backupEntry).min(1, 'must list at least one backup entry'),
  })
  .transform((p, ctx) => {
    const type = inferObjectType(p.backup_type, p.backup.map((e, i) => ({ path: ['backup', i, 'db_table'], value: e.db_table })), 'backup_type', ctx);
    checkDbTables(type, p.backup, 'backup', ctx);
    return { ...p, backup_type: type as ObjectType };
  });

const restoreEntry = z.object({ db_table: z.string(), restore_time: restoreTimeString() });

/**
 * logical_restore takes `restore: [{db_table, restore_time}]`, or the older form with one
 * `db_table` and `restore_time` directly in paras (spec 4.4). Validated paras always carry
 * the `restore` list and restore_type (given, or inferred from the db_table shapes).
 */
export const logicalRestoreParas = z
  .object({
    src_cluster_id: idString(),
    dst_cluster_id: idString(),
    restore_type: enumString(OBJECT_TYPES).optional(),
    restore: z.array(restoreEntry).min(1, 'must list at least one restore entry').optional(),
    db_table: z.string().optional(),
    restore_time: restoreTimeString().optional(),
  })
  .transform(({ db_table, restore_time, restore, ...rest }, ctx) => {
    const olderForm = db_table !== undefined || restore_time !== undefined;
    if (restore !== undefined && olderForm) {
      addFieldIssue(ctx, ['db_table'], 'must not be given together with paras.restore (use one form)', db_table ?? restore_time);
      return z.NEVER;
    }
    if (restore === undefined) {
      if (db_table === undefined) {
        ctx.addIssue({ code: 'custom', message: 'is required (or the older form: db_table and restore_time in paras)', path: ['restore'] });
        return z.NEVER;
      }
      if (restore_time === undefined) {
        ctx.addIssue({ code: 'custom', message: 'is required with paras.db_table', path: ['restore_time'] });
        return z.NEVER;
      }
      const type = inferObjectType(rest.restore_type, [{ path: ['db_table'], value: db_table }], 'restore_type', ctx);
      if (type === undefined) return z.NEVER;
      const r = parseDbTable(type, db_table);
      if (!r.ok) addFieldIssue(ctx, ['db_table'], r.rule, db_table);
      return { ...rest, restore_type: type, restore: [{ db_table, restore_time }] };
    }
    const type = inferObjectType(rest.restore_type, restore.map((e, i) => ({ path: ['restore', i, 'db_table'], value: e.db_table })), 'restore_type', ctx);
    checkDbTables(type, restore, 'restore', ctx);
    return { ...rest, restore_type: type as ObjectType, restore };
  });
