// get_cluster_summary and get_cluster_detail report a cluster's status as measured from
// its instances, against fake agents: never the stored "ready" while nodes are down.

import { AgentUnreachableError, type Agents } from '@kcm/agent-api';
import type { ValidRequest } from '@kcm/protocol';
import { describe, expect, it } from 'vitest';
import { clusterDetail, clusterSummary } from '../../src/queries/clusters';
import { measuredClusterStatus } from '../../src/queries/cluster-status';
import { cluster, stateWith } from '../helpers/cluster-state';

/** Agents answering for the instances listed as up; hosts listed unreachable do not answer. */
function agents(up: Set<string>, unreachable = new Set<string>()): Agents {
  const reach = (host: string) => {
    if (unreachable.has(host)) throw new AgentUnreachableError(`${host}:58100`, new Error('refused'));
  };
  return {
    mariadb: (host: string) => ({
      async probe(port: number) {
        reach(host);
        const online = up.has(`${host}:${port}`);
        return { port, state: online ? 'online' : 'offline', pid: online ? 7 : 0, reason: '', is_replica: false, read_only: false, master_host: '', master_port: 0, last_error: '', supervisor_restarts: port - 57001 };
      },
    }),
    postgresProbe: (host: string) => ({
      async probe(port: number) {
        reach(host);
        const online = up.has(`${host}:${port}`);
        return { installed: true, running: online, accepting: online, pid: 0, version: '', problem: '', supervisor_restarts: 5 };
      },
    }),
  } as unknown as Agents;
}

const shop = () => cluster('1', 'ready', [['11', 'h1', 57001], ['12', 'h2', 57002], ['13', 'h3', 57003]], [['21', 'h1', 57010]]);
const ALL = ['h1:57001', 'h2:57002', 'h3:57003', 'h1:57010'];
const summaryOf = async (up: string[], unreachable: string[] = []) =>
  ((await clusterSummary(stateWith(shop()), { agents: agents(new Set(up), new Set(unreachable)) })).list_cluster as Record<string, string>[])[0];

describe('measured cluster status', () => {
  it('the summary says online only while every instance answers, with the counts', async () => {
    expect(await summaryOf(ALL)).toEqual({ cluster_id: '1', cluster_name: 'cluster_1', nick_name: '', shards: '1', comps: '1', status: 'online', nodes_online: '3/3', comps_online: '1/1', measured_age_ms: expect.stringMatching(/^\d+$/) });
  });

  it('the summary says degraded when some instances are down and offline when none answers, not the stored ready', async () => {
    expect(await summaryOf(['h1:57001', 'h1:57010'])).toMatchObject({ status: 'degraded', nodes_online: '1/3', comps_online: '1/1' });
    expect(await summaryOf([])).toMatchObject({ status: 'offline', nodes_online: '0/3', comps_online: '0/1' });
    expect(await summaryOf([], ['h1', 'h2', 'h3'])).toMatchObject({ status: 'unknown' });
  });

  it('the detail derives the cluster status from the node statuses it measured, and shows how often each instance was restarted', async () => {
    const req = { paras: { cluster_name: 'cluster_1' } } as unknown as ValidRequest;
    const detail = (await clusterDetail(stateWith(shop()), req, { agents: agents(new Set(['h2:57002', 'h3:57003', 'h1:57010'])) })) as unknown as {
      status: string;
      list_shard: { list_node: { status: string; restarts: string }[] }[];
      list_comp: { restarts: string }[];
    };
    expect(detail.status).toBe('degraded');
    expect(detail.list_shard[0].list_node.map((n) => `${n.status} ${n.restarts}`)).toEqual(['offline 0', 'online 1', 'online 2']);
    expect(detail.list_comp[0].restarts).toBe('5');
  });

  it('keeps the stored lifecycle states while a job creates or deletes the cluster', () => {
    expect(measuredClusterStatus('creating', ['offline'])).toBe('creating');
    expect(measuredClusterStatus('deleting', ['online'])).toBe('deleting');
  });
});
