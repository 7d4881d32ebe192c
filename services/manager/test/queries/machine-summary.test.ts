import { describe, expect, it } from 'vitest';
import type { AgentClient, Agents } from '@kcm/agent-api';
import { parseRequest, type ValidRequest } from '@kcm/protocol';
import type { WithAgent } from '@kcm/agent-api';
import { CommandKind } from '../../src/meta/commands';
import { applyCommand } from '../../src/meta/fsm';
import { emptyMetaState, type MetaState } from '../../src/meta/state';
import { buildQueries } from '../../src/queries';

/** Agents of `answering` hosts answer health; every other host's agent is unreachable. */
function agentsAnswering(...answering: string[]): WithAgent {
  return async (hostaddr, use) => {
    if (!answering.includes(hostaddr)) throw new Error(`agent ${hostaddr} unreachable`);
    return use({ health: async () => ({}) } as unknown as AgentClient);
  };
}

function summary(state: MetaState, withAgent: WithAgent) {
  const queries = buildQueries({ conf: () => ({ voters: ['m1'], learners: [] }), leader: () => 'm1', withAgent, agents: {} as Agents });
  const req = parseRequest({ version: '1.0', job_type: 'get_machine_summary', timestamp: '1700000000', paras: {} });
  if (!req.ok) throw req.error;
  return queries.get('get_machine_summary')!(req.request as ValidRequest, state) as Promise<{ list_machine: Record<string, unknown>[] }>;
}

function register(state: MetaState, hostaddr: string): void {
  applyCommand(state, {
    kind: CommandKind.MachineRegistered, at: 0, hostaddr, machineType: 'storage', portLow: 5000, portHigh: 5009, rackId: 'r1',
    datadir: '/d', logdir: '/l', walLogDir: '/w', compDatadir: '/c', totalMemMb: 1024, totalCpuCores: 2, facts: null,
  });
}

describe('get_machine_summary', () => {
  it('a machine set dead is offline even while its agent answers; online needs running and an answering agent', async () => {
    const s = emptyMetaState();
    for (const h of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) register(s, h);
    applyCommand(s, { kind: CommandKind.MachineStatusSet, at: 0, hostaddr: '10.0.0.2', nodeStats: 'dead', reason: 'operator' });
    const { list_machine } = await summary(s, agentsAnswering('10.0.0.1', '10.0.0.2'));
    expect(list_machine).toEqual([
      { hostaddr: '10.0.0.1', status: 'online', node_stats: 'running', agent: 'reachable', machine_types: ['storage'] },
      { hostaddr: '10.0.0.2', status: 'offline', node_stats: 'dead', agent: 'reachable', machine_types: ['storage'] },
      { hostaddr: '10.0.0.3', status: 'offline', node_stats: 'running', agent: 'unreachable', machine_types: ['storage'] },
    ]);
  });
});
