/**
 * upgrade_cluster, beyond the spec's list (issue 31): move a cluster's instances to other
 * engine versions one at a time while it serves: the standbys, then a planned switchover to
 * an upgraded standby, then the old master; the compute nodes one at a time.
 */
import { z } from 'zod';
import { formatted, idString, type Parsed } from '../formats';

/** MariaDB versions are `<major>.<minor>.<patch>` (10.11.19); kcm runs the 10.11 series. */
export function parseStorageVersion(s: string): Parsed<string> {
  return /^10\.11\.(0|[1-9][0-9]{0,2})$/.test(s) ? { ok: true, value: s } : { ok: false, rule: 'must be a MariaDB 10.11 version, e.g. 10.11.19' };
}

/** PostgreSQL versions are `<major>.<minor>` (15.20); kcm's extension and mysql_fdw are built for 15. */
export function parseComputerVersion(s: string): Parsed<string> {
  return /^15\.(0|[1-9][0-9]{0,2})$/.test(s) ? { ok: true, value: s } : { ok: false, rule: 'must be a PostgreSQL 15 version, e.g. 15.20' };
}

export const storageVersionString = () => formatted(parseStorageVersion, 'MariaDB 10.11 version, e.g. 10.11.19');
export const computerVersionString = () => formatted(parseComputerVersion, 'PostgreSQL 15 version, e.g. 15.20');

export const upgradeClusterParas = z
  .object({
    cluster_id: idString(),
    /** The MariaDB version every storage node of the cluster runs afterwards. */
    storage_version: storageVersionString().optional(),
    /** The PostgreSQL version every compute node of the cluster runs afterwards. */
    computer_version: computerVersionString().optional(),
  })
  .superRefine((p, ctx) => {
    if (p.storage_version === undefined && p.computer_version === undefined) {
      ctx.addIssue({ code: 'custom', message: 'names no version: give storage_version, computer_version or both', path: ['storage_version'] });
    }
  });
