// The compute nodes' hold on a shard through a master change (compute-holds.ts,
// docs/ride-through.md), against fake agents: a hold is a courtesy, never a condition of the
// switch; only what was held is released; only hosts whose drain ended transactions have
// their connections to the old master cut.

import * as grpc from '@grpc/grpc-js';
import { AgentCallError, AgentUnreachableError, type Agents } from '@kcm/agent-api';
import { silentLogger } from '@kcm/common';
import { describe, expect, it } from 'vitest';
import { cutEndedSessions, describeHolds, holdShardOnComputes, releaseShardOnComputes } from '../../src/jobs/shard-ha/compute-holds';
import { cluster } from '../helpers/cluster-state';

function fakeAgents(answers: Record<string, 'held' | 'ended' | 'unimplemented' | 'unreachable'>) {
  const calls: string[] = [];
  const agents = {
    shardRouting: (host: string) => ({
      async holdShard(port: number, shard: string, holdMs: number, drainMs: number) {
        calls.push(`hold ${host}:${port} shard ${shard} ${holdMs}/${drainMs}`);
        const answer = answers[host];
        if (answer === 'unimplemented') throw new AgentCallError(`${host}:58100`, grpc.status.UNIMPLEMENTED, 'unknown service kcm.agent.ShardRoutingAgent');
        if (answer === 'unreachable') throw new AgentUnreachableError(`${host}:58100`, new Error('connect ECONNREFUSED'));
        return { open_at_start: 2, drain_ms: 10, ended: answer === 'ended' ? 1 : 0 };
      },
      async releaseShard(port: number, shard: string) {
        calls.push(`release ${host}:${port} shard ${shard}`);
        return { was_held: true };
      },
    }),
    mariadbHa: (host: string) => ({
      async cutConnectionsTo(to: string, port: number) {
        calls.push(`cut ${host} -> ${to}:${port}`);
        return { closed: 3 };
      },
    }),
  } as unknown as Agents;
  return { agents, calls };
}

const comps = cluster('1', 'ready', [['11', 'm1', 57001]], [['1', 'c1', 56001], ['2', 'c2', 56002], ['3', 'c3', 56003], ['4', 'c4', 56004]]);

describe('compute nodes hold a shard through a master change', () => {
  it('holds on every compute node; one whose agent is older (UNIMPLEMENTED) or unreachable is named with why, and the rest are held', async () => {
    const { agents, calls } = fakeAgents({ c1: 'held', c2: 'ended', c3: 'unimplemented', c4: 'unreachable' });
    const holds = await holdShardOnComputes(agents, comps, '11', { holdMs: 10_000, drainMs: 1_000 }, silentLogger());
    expect(calls.filter((c) => c.startsWith('hold')).sort()).toEqual(['c1:56001', 'c2:56002', 'c3:56003', 'c4:56004'].map((at) => `hold ${at} shard 11 10000/1000`));
    const described = describeHolds(holds);
    expect(described.comps_held.split(',').sort()).toEqual(['comp_1', 'comp_2']);
    expect(described.comps_not_held.split('; ').sort()).toEqual([
      'comp_3 (its agent does not know HoldShard (an older kcm))',
      expect.stringMatching(/^comp_4 \(agent at c4:58100 is unreachable/),
    ]);
    expect(described).toMatchObject({ transactions_open_at_hold: 4, transactions_ended: 1 });

    // Only the host whose drain ended a transaction has its connections to the old master cut.
    const cut = await cutEndedSessions(agents, holds, comps.shards['11'].nodes['11']);
    expect(calls.filter((c) => c.startsWith('cut'))).toEqual(['cut c2 -> m1:57001']);
    expect(cut).toEqual({ c2: '3 closed' });

    // Only what was held is released.
    await releaseShardOnComputes(agents, holds, silentLogger());
    expect(calls.filter((c) => c.startsWith('release')).sort()).toEqual(['release c1:56001 shard 11', 'release c2:56002 shard 11']);
  });

  it('never asks for a drain longer than the hold', async () => {
    const { agents, calls } = fakeAgents({ c1: 'held', c2: 'held', c3: 'held', c4: 'held' });
    await holdShardOnComputes(agents, comps, '11', { holdMs: 500, drainMs: 1_000 }, silentLogger());
    expect(calls.every((c) => c.endsWith(' 500/500'))).toBe(true);
  });
});
