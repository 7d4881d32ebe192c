// Job: set_noswitch (reference system's name and paras). Opens or closes a no-switch window
// on one shard, or on every shard the cluster has now: the leader's failure detector does
// not fail those masters over before the window ends (meta/noswitch.ts noSwitchUntil).
//
// The window's end is the job's submission time (replicated, stamped once) + timeout, so a
// step re-run by a new leader writes the same deadline. Its own lock key orders windows of
// one cluster among themselves without queueing them behind a long job on the cluster:
// maintenance is announced before it starts, not after the cluster's other work.

import { KcmError, type ParasOf, type SetNoswitchResult } from '@kcm/protocol';
import { CommandKind } from '../../meta/commands';
import type { NoSwitchWindow } from '../../meta/noswitch';
import type { MetaState } from '../../meta/state';
import { changeableCluster, shardOf } from '../cluster-lookup';
import { orThrow } from '../framework/errors';
import type { JobOf } from '../framework/workflow';

type NoswitchParas = ParasOf<'set_noswitch'>;

function targetShardIds(state: MetaState, p: NoswitchParas): string[] {
  const cluster = changeableCluster(state, p.cluster_id);
  if (p.shard_id !== undefined) return [shardOf(cluster, p.shard_id).id];
  const ids = Object.keys(cluster.shards);
  if (ids.length === 0) throw KcmError.of('CONFLICT', `paras.cluster_id: cluster ${p.cluster_id} has no shard`, { field: 'paras.cluster_id' });
  return ids;
}

export const windowResult = (clusterId: string, windows: NoSwitchWindow[]): SetNoswitchResult => ({
  cluster_id: clusterId,
  list_shard: windows.map((w) => ({ shard_id: w.shardId, noswitch_until: w.untilMs === null ? '' : String(Math.floor(w.untilMs / 1000)) })),
});

export const setNoswitch: JobOf<'set_noswitch', { 'set no-switch window': SetNoswitchResult }> = {
  jobType: 'set_noswitch',
  validate: (p, state) => void targetShardIds(state, p),
  lockKey: (p) => `noswitch:${p.cluster_id}`,
  steps: (p) => [
    {
      name: 'set no-switch window',
      async run(ctx) {
        const state = ctx.state();
        const submittedAt = state.jobs[ctx.jobId]?.submittedAt ?? ctx.now();
        const untilMs = p.type === '1' ? submittedAt + p.timeout! * 1000 : null;
        const windows = orThrow(
          await ctx.propose({ kind: CommandKind.NoSwitchSet, at: ctx.now(), clusterId: p.cluster_id, shardIds: targetShardIds(state, p), untilMs }),
        ) as NoSwitchWindow[];
        return windowResult(p.cluster_id, windows);
      },
    },
  ],
  result: (outputs) => outputs['set no-switch window'],
};
