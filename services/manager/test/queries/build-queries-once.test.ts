// buildQueries builds the cluster queries once, with the manager's clock: the no-switch
// window get_cluster_detail shows is judged at the manager's `now`, not at Date.now (a
// second set built without `now` used to replace the first).

import type { ValidRequest } from '@kcm/protocol';
import { describe, expect, it } from 'vitest';
import type { Agents } from '@kcm/agent-api';
import { buildQueries } from '../../src/queries';
import { cluster, stateWith } from '../helpers/cluster-state';

const onlineAgents = {
  mariadb: () => ({ probe: async (port: number) => ({ port, state: 'online', is_replica: false, read_only: false, last_error: '', supervisor_restarts: 0 }) }),
  postgresProbe: () => ({ probe: async () => ({ installed: true, running: true, accepting: true, supervisor_restarts: 0 }) }),
} as unknown as Agents;

describe('buildQueries', () => {
  it("get_cluster_detail judges a no-switch window at the manager's clock, and still lists the cluster's backups", async () => {
    const state = stateWith(cluster('1', 'ready', [['1a', 'h1', 57001]], []));
    // The window ended (by the wall clock) long ago, but the manager's clock says it is still open.
    const untilMs = Date.now() - 3_600_000;
    state.clusters['1'].shards['11'].noSwitchUntil = untilMs;
    const queries = buildQueries({ conf: () => ({ voters: ['m1'], learners: [] }), leader: () => 'm1', withAgent: async () => { throw new Error('unused'); }, agents: onlineAgents, now: () => untilMs - 60_000 });
    const detail = (await queries.get('get_cluster_detail')!({ paras: { cluster_id: '1' } } as unknown as ValidRequest, state)) as {
      list_shard: { noswitch_until: string }[];
      list_backup: unknown[];
    };
    expect(detail.list_shard[0].noswitch_until).toBe(String(Math.floor(untilMs / 1000)));
    expect(detail.list_backup).toEqual([]);
  });
});
