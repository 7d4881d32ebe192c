// Job family: compute nodes (add_comps, delete_comp).
//
// add_comps places the new compute nodes in one command, installs them with the cluster's
// computer account, gives them the catalog (a foreign server per shard master and a foreign
// table per shard table) and their cpu limits. A failed step removes what it placed.
// delete_comp removes one compute node, never the last one.

import { KcmError, type AddCompsResult, type EmptyResult, type ParasOf } from '@kcm/protocol';
import type { ClusterRecord, CompRecord, MetaState } from '../meta/state';
import { clusterOfStep, forEachInstance, readyCluster } from './cluster-lookup';
import { applyCpuLimit, installComp, placeOnce, syncCompCatalogs } from './instance-ops';
import { candidatesFor, computeDemand, placeComps } from './placement';
import { rollBackGrowJob } from './rollback';
import { takeOutInstanceSteps, type TakeOutOutputs } from './take-out-instance';
import type { JobOf, StepContext } from './framework/workflow';
import { recordMeasuredVersions } from './engine-versions';

type AddParas = ParasOf<'add_comps'>;
type DeleteParas = ParasOf<'delete_comp'>;

/** Hosts of the new compute nodes on the current state; throws the first reason they cannot be placed. */
export function planNewComps(p: AddParas, state: MetaState): string[] {
  const cluster = readyCluster(state, p.cluster_id);
  return placeComps(candidatesFor(state, 'computer', p.computer_iplists, 'computer_iplists', computeDemand(cluster.options)), p.comps, 'computer_iplists');
}

function deletableComp(state: MetaState, p: DeleteParas): { cluster: ClusterRecord; comp: CompRecord } {
  const cluster = readyCluster(state, p.cluster_id);
  const comp = cluster.comps[p.comp_id];
  if (!comp) throw KcmError.of('NOT_FOUND', `paras.comp_id: compute node ${p.comp_id} is not part of cluster ${cluster.id}`, { field: 'paras.comp_id' });
  if (Object.keys(cluster.comps).length === 1) {
    throw KcmError.of('CONFLICT', `paras.comp_id: ${comp.name} is the last compute node of cluster ${cluster.id}; a cluster keeps at least one (delete_cluster removes it all)`, {
      field: 'paras.comp_id',
    });
  }
  return { cluster, comp };
}

interface AddOutputs {
  'place compute nodes': { compIds: string[] };
  'install compute nodes': null;
  'connect compute nodes to shards': null;
  'apply cpu limits': AddCompsResult;
}

const newCompsOf = (ctx: StepContext<AddParas, AddOutputs>) => {
  const cluster = clusterOfStep(ctx, ctx.paras.cluster_id);
  const { compIds } = ctx.outputs['place compute nodes'];
  const comps = compIds.map((id) => {
    const comp = cluster.comps[id];
    if (!comp) throw KcmError.of('NOT_FOUND', `compute node ${id} placed by this job is no longer part of cluster ${cluster.id}`);
    return comp;
  });
  return { cluster, comps };
};

export const addComps: JobOf<'add_comps', AddOutputs> = {
  jobType: 'add_comps',
  validate: (p, state) => void planNewComps(p, state),
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: (p) => [
    {
      name: 'place compute nodes',
      async run(ctx) {
        const cluster = readyCluster(ctx.state(), p.cluster_id);
        const placed = await placeOnce(ctx, cluster, ctx.jobId, () => ({ newShards: [], newNodes: [], newComps: planNewComps(p, ctx.state()) }));
        return { compIds: placed.compIds };
      },
    },
    {
      name: 'install compute nodes',
      async run(ctx) {
        const { cluster, comps } = newCompsOf(ctx);
        await forEachInstance(comps, (c) => `${c.name} on ${c.hostaddr}:${c.port}`, (c) => installComp(ctx.agents, ctx.secrets, ctx.jobId, cluster, c));
        await recordMeasuredVersions(ctx, cluster, { comps });
        return null;
      },
    },
    {
      name: 'connect compute nodes to shards',
      async run(ctx) {
        const { cluster, comps } = newCompsOf(ctx);
        await syncCompCatalogs(ctx.agents, ctx.secrets, ctx.jobId, 'catalog', cluster, comps);
        return null;
      },
    },
    {
      name: 'apply cpu limits',
      async run(ctx) {
        const { cluster, comps } = newCompsOf(ctx);
        await forEachInstance(comps, (c) => `pg ${c.hostaddr}:${c.port}`, (c) => applyCpuLimit(ctx.agents, ctx.jobId, cluster, c, 'pg'));
        return {
          cluster_id: cluster.id,
          cluster_name: cluster.name,
          shards: String(Object.keys(cluster.shards).length),
          comps: String(Object.keys(cluster.comps).length),
          list_comp: comps.map((c) => ({ comp_id: c.id, comp_name: c.name, hostaddr: c.hostaddr, port: String(c.port) })),
        };
      },
    },
  ],
  result: (outputs) => outputs['apply cpu limits'],
  rollback: rollBackGrowJob('add_comps'),
};

export const deleteComp: JobOf<'delete_comp', TakeOutOutputs<'compute node'>> = {
  jobType: 'delete_comp',
  validate: (p, state) => void deletableComp(state, p),
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: () => takeOutInstanceSteps('compute node', (state, p: DeleteParas) => deletableComp(state, p).comp),
  result: () => ({}),
};
