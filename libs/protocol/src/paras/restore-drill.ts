/**
 * Restore drills (beyond the spec's list, issue 33 item 4; docs/restore-drills.md): a backup
 * set of a cluster is restored into a scratch cluster on machines the operator names, its
 * tables are checked against the row counts and checksums recorded when the set was taken,
 * RTO and data-age RPO are measured, and the scratch cluster is deleted.
 */
import { z } from 'zod';
import { addFieldIssue, enumString, hostAddressList, idString, integerString } from '../formats';
import { MIN_NODES_PER_SHARD, ZERO_ONE } from './clusters';

/** At most a year between scheduled drills: anything beyond is a typo. */
export const MAX_DRILL_EVERY_DAYS = 366;

/**
 * The scratch cluster's machines, create_cluster's placement paras: its storage nodes go on
 * storage_iplists, its compute node on computer_iplists (both required: a drill never lands
 * on machines nobody chose for it).
 */
export const drillMachineFields = {
  storage_iplists: hostAddressList(),
  computer_iplists: hostAddressList(),
};

export function requireDrillMachines(p: { storage_iplists?: string[]; computer_iplists?: string[] }, ctx: Parameters<typeof addFieldIssue>[0], prefix = ''): void {
  for (const field of ['storage_iplists', 'computer_iplists'] as const) {
    const list = p[field];
    if (Array.isArray(list) && list.length === 0) addFieldIssue(ctx, [`${prefix}${field}`], 'must name at least one machine for the scratch cluster', list);
  }
}

export const runRestoreDrillParas = z
  .object({
    /** The cluster whose backups are drilled. */
    cluster_id: idString(),
    ...drillMachineFields,
    /** Storage nodes per shard of the scratch cluster (default and minimum 3, as create_cluster). */
    nodes: integerString(MIN_NODES_PER_SHARD).optional(),
    /** The backup set to restore (default: the newest set of the cluster with recorded checksums). */
    backup_id: idString().optional(),
    /**
     * "1": a point-in-time drill: the set before backup_id is restored and the archived
     * binlogs replayed up to backup_id's point, then checked against backup_id's figures.
     */
    point_in_time: enumString(ZERO_ONE).default('0'),
  })
  .superRefine((p, ctx) => requireDrillMachines(p, ctx));
