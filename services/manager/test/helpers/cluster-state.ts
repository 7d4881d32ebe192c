// Small cluster records for tests that read the metadata (queries, leader services) without
// running the jobs that would make them.

import { emptyMetaState, type ClusterRecord, type MetaState } from '../../src/meta/state';

/** A cluster with one shard of the given nodes [id, hostaddr, port] (the first is master) and the given compute nodes. */
export function cluster(id: string, status: ClusterRecord['status'], nodes: Array<[string, string, number]>, comps: Array<[string, string, number]>): ClusterRecord {
  return {
    id,
    name: `cluster_${id}`,
    nickName: '',
    status,
    createdByJob: '1',
    createdAt: 0,
    options: {} as ClusterRecord['options'],
    accounts: {} as ClusterRecord['accounts'],
    shards: {
      [`${id}1`]: {
        id: `${id}1`,
        name: `shard_${id}1`,
        masterNodeId: nodes[0]?.[0] ?? '',
        nodes: Object.fromEntries(nodes.map(([nid, hostaddr, port]) => [nid, { id: nid, hostaddr, port, serverId: 1, datadir: '/d', logdir: '/l', walLogDir: '/w' }])),
      },
    },
    comps: Object.fromEntries(comps.map(([cid, hostaddr, port]) => [cid, { id: cid, name: `comp_${cid}`, hostaddr, port, compDatadir: '/c' }])),
  };
}

export function stateWith(...clusters: ClusterRecord[]): MetaState {
  const state = emptyMetaState();
  for (const c of clusters) state.clusters[c.id] = c;
  return state;
}
