// Job family: compute nodes (add_comps, delete_comp).
//
// add_comps places the new compute nodes in one command, installs them with the cluster's
// computer account, gives them the catalog (a foreign server per shard master and a foreign
// table per shard table) and their cpu limits. A failed step removes what it placed.
// delete_comp removes one compute node, never the last one.

import { KcmError, type ParasOf } from '@kcm/protocol';
import type { ClusterRecord, CompRecord, MetaState } from '../meta/state';
import type { ClusterJobDeps } from './cluster';
import { clusterOfStep, forEachInstance, readyCluster } from './cluster-lookup';
import { applyCpuLimit, installComp, placeOnce, syncCompCatalogs, takeOutInstanceSteps } from './instance-ops';
import { candidatesFor, computeDemand, placeComps } from './placement';
import { rollBackPlacement } from './rollback';
import type { JobDefinition, StepContext } from './workflow';

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

export function compJobs(deps: ClusterJobDeps): JobDefinition<any>[] {
  const { store, agents } = deps;

  const newCompsOf = (ctx: StepContext<AddParas>) => {
    const cluster = clusterOfStep(ctx, ctx.paras.cluster_id);
    const { compIds } = ctx.outputs['place compute nodes'] as { compIds: string[] };
    const comps = compIds.map((id) => {
      const comp = cluster.comps[id];
      if (!comp) throw KcmError.of('NOT_FOUND', `compute node ${id} placed by this job is no longer part of cluster ${cluster.id}`);
      return comp;
    });
    return { cluster, comps };
  };

  const addComps: JobDefinition<AddParas> = {
    jobType: 'add_comps',
    validate: (p, state) => void planNewComps(p, state),
    lockKey: (p) => `cluster:${p.cluster_id}`,
    steps: (p) => [
      {
        name: 'place compute nodes',
        async run(ctx) {
          const cluster = readyCluster(ctx.state(), p.cluster_id);
          const placed = await placeOnce(store, cluster, ctx.jobId, () => ({ newShards: [], newNodes: [], newComps: planNewComps(p, ctx.state()) }));
          return { compIds: placed.compIds };
        },
      },
      {
        name: 'install compute nodes',
        async run(ctx) {
          const { cluster, comps } = newCompsOf(ctx);
          await forEachInstance(comps, (c) => `${c.name} on ${c.hostaddr}:${c.port}`, (c) => installComp(agents, ctx.jobId, cluster, c));
          return null;
        },
      },
      {
        name: 'connect compute nodes to shards',
        async run(ctx) {
          const { cluster, comps } = newCompsOf(ctx);
          await syncCompCatalogs(agents, ctx.jobId, 'catalog', cluster, comps);
          return null;
        },
      },
      {
        name: 'apply cpu limits',
        async run(ctx) {
          const { cluster, comps } = newCompsOf(ctx);
          await forEachInstance(comps, (c) => `pg ${c.hostaddr}:${c.port}`, (c) => applyCpuLimit(agents, ctx.jobId, cluster, c, 'pg'));
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
    result: (outputs) => outputs['apply cpu limits'] as Record<string, unknown>,
    rollback: (ctx, failedStep, error) => rollBackPlacement(deps, ctx.jobId, 'add_comps', ctx.paras.cluster_id, failedStep, error.message),
  };

  const deleteComp: JobDefinition<DeleteParas> = {
    jobType: 'delete_comp',
    validate: (p, state) => void deletableComp(state, p),
    lockKey: (p) => `cluster:${p.cluster_id}`,
    steps: () => takeOutInstanceSteps<DeleteParas>(store, agents, 'compute node', (state, p) => deletableComp(state, p).comp),
    result: () => ({}),
  };

  return [addComps, deleteComp];
}
