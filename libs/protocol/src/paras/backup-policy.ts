/**
 * Backup policies (beyond the spec's list, issue 33): per cluster, a full backup every
 * `full_every_hours` inside a daily window, and a retention (`keep_days` and/or `keep_sets`)
 * under which point-in-time restore stays possible to any moment (docs/backup-policies.md).
 */
import { z } from 'zod';
import { backupWindowString, formatted, idString, integerString } from '../formats';
import { parseStorageName } from './backup-storage';

/** At most a week between full backups, at most ten years kept: anything beyond is a typo. */
export const MAX_FULL_EVERY_HOURS = 168;
export const MAX_KEEP_DAYS = 3650;
export const MAX_KEEP_SETS = 1000;

export const setBackupPolicyParas = z
  .object({
    cluster_id: idString(),
    /** Hours between full backups (default 24: daily); each period's backup runs once, inside the window. */
    full_every_hours: integerString(1, MAX_FULL_EVERY_HOURS).optional(),
    /** The daily window (the manager's local time) a full backup may start in; default: all day. */
    window: backupWindowString().optional(),
    /** Point-in-time restore stays possible to any moment of the last keep_days days. */
    keep_days: integerString(1, MAX_KEEP_DAYS).optional(),
    /** The newest keep_sets full backups are kept (with the binlogs they need). */
    keep_sets: integerString(1, MAX_KEEP_SETS).optional(),
    /** The backup storage the policy's backups go to (default: the first registered). */
    storage_name: formatted(parseStorageName, 'storage name [A-Za-z0-9_-], at most 64').optional(),
  })
  .superRefine((p, ctx) => {
    if (p.keep_days === undefined && p.keep_sets === undefined) {
      ctx.addIssue({ code: 'custom', message: 'names no retention: give keep_days, keep_sets or both', path: ['keep_days'] });
    }
  });

export const deleteBackupPolicyParas = z.object({
  cluster_id: idString(),
});
