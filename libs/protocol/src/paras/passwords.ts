/**
 * Password rotation, beyond the spec's list (issue 16: "say how a user rotates them"):
 * new generated passwords for some or all of a cluster's database accounts, applied on
 * every storage and compute node.
 */
import { z } from 'zod';
import { addFieldIssue, enumString, idString } from '../formats';

/**
 * The generated accounts of a cluster: `storage` and `computer` are the ones handed to the
 * client (create_cluster's storage_user/computer_user); `admin` (the agents' own) and
 * `replication` never leave kcm.
 */
export const CLUSTER_ACCOUNTS = ['admin', 'replication', 'storage', 'computer'] as const;
export type ClusterAccountName = (typeof CLUSTER_ACCOUNTS)[number];

export const rotateClusterPasswordsParas = z
  .object({
    cluster_id: idString(),
    /** Which accounts get a new password; absent = all four. */
    accounts: z.array(enumString(CLUSTER_ACCOUNTS)).min(1, 'must name at least one account (or leave accounts out for all four)').optional(),
  })
  .superRefine((p, ctx) => {
    if (!Array.isArray(p.accounts)) return;
    p.accounts.forEach((name, i) => {
      if (p.accounts!.indexOf(name) !== i) addFieldIssue(ctx, ['accounts', i], 'must not name an account twice', name);
    });
  });
