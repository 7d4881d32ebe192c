// A cluster's status as measured, never the stored word: a cluster whose instances are
// down is not "ready". The stored lifecycle states (creating, deleting) still show as they
// are: while a job builds or takes down a cluster, its instances are expected to be partial.

import type { ClusterStatus } from '../meta/state';

/** A measured status of one instance: `unknown` when its agent did not answer or has no such instance. */
export type InstanceStatus = 'online' | 'offline' | 'unknown';

/**
 * online: every instance answers; offline: none answers and some agent says so; unknown:
 * no agent answered for any of them; degraded: some answer and some do not.
 */
export type MeasuredClusterStatus = 'online' | 'degraded' | 'offline' | 'unknown';

export function measuredClusterStatus(stored: ClusterStatus, instances: readonly InstanceStatus[]): MeasuredClusterStatus | Exclude<ClusterStatus, 'ready'> {
  if (stored !== 'ready') return stored;
  const online = instances.filter((s) => s === 'online').length;
  if (online === instances.length) return 'online';
  if (online > 0) return 'degraded';
  return instances.every((s) => s === 'unknown') ? 'unknown' : 'offline';
}

/** "answering/total", e.g. "5/6". */
export function onlineCount(instances: readonly InstanceStatus[]): string {
  return `${instances.filter((s) => s === 'online').length}/${instances.length}`;
}
