// A cluster's restore drills in get_cluster_detail (docs/restore-drills.md): the last drill and
// the last one that passed, as run_restore_drill answers them, and the policy's last scheduled
// drill with its job's status measured from the job record (as the policy's backup run).

import { restoreDrillResult } from '../jobs/restore-drill/job';
import { policyOfCluster } from '../meta/backup-policies';
import { own } from '../meta/dict';
import { drillsOfCluster } from '../meta/restore-drills';
import type { ClusterRecord, MetaState } from '../meta/state';

export function restoreDrillDetail(state: MetaState, clusterId: string): Record<string, unknown> {
  const drills = drillsOfCluster(state, clusterId);
  const run = policyOfCluster(state, clusterId)?.lastDrill;
  const job = run?.jobId ? own(state.jobs, run.jobId) : undefined;
  return {
    ...(drills ? { restore_drill_last: restoreDrillResult(drills.last) } : {}),
    ...(drills?.lastPassed ? { restore_drill_last_passed: restoreDrillResult(drills.lastPassed) } : {}),
    ...(run
      ? {
          restore_drill_last_run: {
            period_start: String(Math.floor(run.periodStart / 1000)),
            job_id: run.jobId ?? '',
            status: run.jobId === null ? 'claimed' : job ? job.status : drills?.last.jobId === run.jobId ? (drills.last.passed ? 'done' : 'failed') : 'unknown (job record trimmed)',
          },
        }
      : {}),
  };
}

/** The mark of a restore drill's scratch cluster, for the cluster queries: never taken for a user's cluster. */
export function scratchMark(cluster: ClusterRecord): Record<string, unknown> {
  return cluster.scratchOfDrill ? { scratch_of_drill: { drill_job_id: cluster.scratchOfDrill.drillJobId, source_cluster_id: cluster.scratchOfDrill.sourceClusterId } } : {};
}
