/**
 * Backup policies (beyond the spec's list, issue 33): per cluster, a full backup every
 * `full_every_hours` inside a daily window, and a retention (`keep_days` and/or `keep_sets`)
 * under which point-in-time restore stays possible to any moment (docs/backup-policies.md).
 */
import { z } from 'zod';
import { backupWindowString, formatted, hostAddressList, idString, integerString } from '../formats';
import { parseStorageName } from './backup-storage';
import { MAX_DRILL_EVERY_DAYS, requireDrillMachines } from './restore-drill';

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
    /** A restore drill (run_restore_drill) once every drill_every_days days, on the drill machines (docs/restore-drills.md). */
    drill_every_days: integerString(1, MAX_DRILL_EVERY_DAYS).optional(),
    drill_storage_iplists: hostAddressList().optional(),
    drill_computer_iplists: hostAddressList().optional(),
  })
  .superRefine((p, ctx) => {
    if (p.keep_days === undefined && p.keep_sets === undefined) {
      ctx.addIssue({ code: 'custom', message: 'names no retention: give keep_days, keep_sets or both', path: ['keep_days'] });
    }
    if (p.drill_every_days !== undefined) {
      for (const field of ['drill_storage_iplists', 'drill_computer_iplists'] as const) {
        if (p[field] === undefined) ctx.addIssue({ code: 'custom', message: 'is required with drill_every_days: the scheduled drills\' scratch machines', path: [field] });
      }
      requireDrillMachines({ storage_iplists: p.drill_storage_iplists, computer_iplists: p.drill_computer_iplists }, ctx, 'drill_');
    } else if (p.drill_storage_iplists !== undefined || p.drill_computer_iplists !== undefined) {
      ctx.addIssue({ code: 'custom', message: 'names drill machines but no drill_every_days', path: ['drill_every_days'] });
    }
  });

export const deleteBackupPolicyParas = z.object({
  cluster_id: idString(),
});
