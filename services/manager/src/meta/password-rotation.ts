// rotate_cluster_passwords in the replicated state: the new sealed passwords are recorded
// before any engine is touched (PasswordRotationStarted), each role is marked once every
// node accepts its new password (PasswordRotationApplied), and the new passwords become
// the cluster's accounts at the end (PasswordRotationFinished). Each apply is idempotent:
// a step re-run by a new leader proposes the same command again and changes nothing more.

import { accepted, refused, type ApplyOutcome } from './outcome';
import type { ClusterAccountRole, ClusterAccounts, ClusterRecord, MetaState, PasswordRotationRecord } from './state';
import type { CommandBase, CommandKind } from './command-numbers';

/**
 * Records a rotation's new (sealed) passwords before any engine is touched. With a rotation
 * of another job left unfinished, that one is taken over as it is (its passwords, what is
 * applied) and `accounts` is ignored: its passwords may already be on some nodes.
 */
export interface PasswordRotationStarted extends CommandBase<typeof CommandKind.PasswordRotationStarted> {
  clusterId: string;
  jobId: string;
  accounts: Partial<ClusterAccounts>;
}

/** Every node of the cluster accepts the rotation's new password of these roles. */
export interface PasswordRotationApplied extends CommandBase<typeof CommandKind.PasswordRotationApplied> {
  clusterId: string;
  jobId: string;
  roles: ClusterAccountRole[];
}

/** The rotation's passwords become the cluster's accounts; the rotation record goes. */
export interface PasswordRotationFinished extends CommandBase<typeof CommandKind.PasswordRotationFinished> {
  clusterId: string;
  jobId: string;
}

function clusterOf(state: MetaState, clusterId: string): ClusterRecord | undefined {
  return Object.hasOwn(state.clusters, clusterId) ? state.clusters[clusterId] : undefined;
}

export function applyPasswordRotationStarted(state: MetaState, cmd: PasswordRotationStarted): ApplyOutcome<PasswordRotationRecord> {
  const cluster = clusterOf(state, cmd.clusterId);
  if (!cluster) return refused('NOT_FOUND', `cluster ${cmd.clusterId} does not exist`);
  const earlier = cluster.passwordRotation;
  if (earlier) {
    // The same job again (a re-run step), or a new one finishing a rotation left part-way:
    // its passwords may already be on some nodes, so they are kept, never replaced.
    earlier.jobId = cmd.jobId;
    return accepted(earlier);
  }
  const roles = Object.keys(cmd.accounts);
  if (roles.length === 0) return refused('INVALID_PARAS', 'a password rotation needs at least one account');
  cluster.passwordRotation = { jobId: cmd.jobId, accounts: { ...cmd.accounts }, applied: [], startedAt: cmd.at };
  return accepted(cluster.passwordRotation);
}

function rotationOf(state: MetaState, clusterId: string, jobId: string): ApplyOutcome<PasswordRotationRecord> {
  const cluster = clusterOf(state, clusterId);
  if (!cluster) return refused('NOT_FOUND', `cluster ${clusterId} does not exist`);
  const rotation = cluster.passwordRotation;
  if (!rotation || rotation.jobId !== jobId) return refused('CONFLICT', `cluster ${clusterId} has no password rotation of job ${jobId}`);
  return accepted(rotation);
}

export function applyPasswordRotationApplied(state: MetaState, cmd: PasswordRotationApplied): ApplyOutcome<ClusterAccountRole[]> {
  const found = rotationOf(state, cmd.clusterId, cmd.jobId);
  if (!found.ok) return found;
  const rotation = found.value;
  for (const role of cmd.roles) if (rotation.accounts[role] && !rotation.applied.includes(role)) rotation.applied.push(role);
  return accepted([...rotation.applied]);
}

export function applyPasswordRotationFinished(state: MetaState, cmd: PasswordRotationFinished): ApplyOutcome<ClusterAccountRole[]> {
  const cluster = clusterOf(state, cmd.clusterId);
  if (!cluster) return refused('NOT_FOUND', `cluster ${cmd.clusterId} does not exist`);
  // Already finished (a re-run step after the commit): nothing left to do.
  if (!cluster.passwordRotation) return accepted([]);
  const found = rotationOf(state, cmd.clusterId, cmd.jobId);
  if (!found.ok) return found;
  const roles = Object.keys(found.value.accounts) as ClusterAccountRole[];
  for (const role of roles) cluster.accounts[role] = found.value.accounts[role]!;
  delete cluster.passwordRotation;
  return accepted(roles);
}
