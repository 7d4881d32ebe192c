// The password kcm itself uses for a cluster's account, wherever it connects or configures
// an engine (health probes, the failure detector, catalog sync, failover, rebuilds, new
// nodes). During a password rotation that is the new password as soon as every node
// accepts it (PasswordRotationRecord.applied), and the old one until then: the one the
// engines take at that moment.

import type { ClusterAccountRole, ClusterRecord, StoredAccount } from '../meta/state';
import { openAccount, type DbAccount } from './accounts';
import type { SecretBox } from './secret-box';

export function liveStoredAccount(cluster: ClusterRecord, role: ClusterAccountRole): StoredAccount {
  const rotation = cluster.passwordRotation;
  const rotated = rotation?.applied.includes(role) ? rotation.accounts[role] : undefined;
  return rotated ?? cluster.accounts[role];
}

export function liveAccount(box: SecretBox, cluster: ClusterRecord, role: ClusterAccountRole): DbAccount {
  return openAccount(box, liveStoredAccount(cluster, role));
}
