// The two steps that take one storage node or compute node out of a cluster (delete_nodes,
// delete_comp), shared by both jobs.

import { CommandKind } from '../meta/commands';
import type { MetaState } from '../meta/state';
import { orThrow } from './framework/errors';
import { removeComp, removeStorageNode, type RemovedInstance } from './instance-ops';
import type { JobStep, StepContext } from './framework/workflow';

export type InstanceKind = 'storage node' | 'compute node';

/** The outputs of takeOutInstanceSteps, by step name. */
export type TakeOutOutputs<K extends InstanceKind> = Record<`remove ${K}`, RemovedInstance> & Record<`forget ${K}`, null>;

/**
 * Remove the instance from its host (instance, directories, cgroup), then forget it and
 * return its port. `find` re-checks the request on the state of the moment and names the
 * instance; the record is forgotten only once the instance is gone, so its port is free
 * when it is handed out again.
 */
export function takeOutInstanceSteps<P extends { cluster_id: string }, K extends InstanceKind>(
  kind: K,
  find: (state: MetaState, p: P) => RemovedInstance,
): JobStep<P, TakeOutOutputs<K>>[] {
  const removeStep: `remove ${K}` = `remove ${kind}`;
  const forgetStep: `forget ${K}` = `forget ${kind}`;
  // The compiler cannot resolve JobStep's mapped type over a generic K; these are its two keys.
  const steps = [
    {
      name: removeStep,
      async run(ctx: StepContext<P, TakeOutOutputs<K>>): Promise<RemovedInstance> {
        const found = find(ctx.state(), ctx.paras);
        const { id, hostaddr, port } = found;
        await (kind === 'storage node' ? removeStorageNode : removeComp)(ctx.agents, ctx.jobId, found);
        return { id, hostaddr, port };
      },
    },
    {
      name: forgetStep,
      async run(ctx: StepContext<P, TakeOutOutputs<K>>) {
        const { id } = ctx.outputs[removeStep];
        const ids = kind === 'storage node' ? { nodeIds: [id], compIds: [] } : { nodeIds: [], compIds: [id] };
        orThrow(await ctx.propose({ kind: CommandKind.InstancesRemoved, at: ctx.now(), clusterId: ctx.paras.cluster_id, shardIds: [], ...ids }));
        return null;
      },
    },
  ];
  return steps as JobStep<P, TakeOutOutputs<K>>[];
}
