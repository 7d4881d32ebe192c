// The cut-over's order on the compute nodes, with their agents faked: every hold before the
// tail is waited for, every re-point after it, and every hold released when one fails.
// (The data work of a move, copy, catch-up and comparison, is the agents' and is tested in
// services/agent/test/shard-data/.)

import { describe, expect, it } from 'vitest';
import { cutOver, type ForeignTableAgent } from '../../src/jobs/moves/cutover';

function fakeAgent(fail: 'repoint' | null) {
  const calls: string[] = [];
  const agent: ForeignTableAgent = {
    hold: async (h) => (calls.push(`hold ${h}`), { server: 'shard_1' }),
    repoint: async (h, _id, server) => {
      calls.push(`repoint ${h} ${server}`);
      if (fail === 'repoint' && h === 'b') throw new Error('refused');
      return { held_ms: h === 'a' ? 12 : 30 };
    },
    release: async (h) => calls.push(`release ${h}`),
    server: async () => ({ server: 'shard_1' }),
  };
  return { agent, calls };
}

describe('the cut-over holds every compute node before it waits for the tail', () => {
  const plan = (calls: string[]) => ({
    holdId: 'j1-0-1',
    comps: [{ hostaddr: 'a', port: 1 }, { hostaddr: 'b', port: 2 }],
    foreign: { database: 'd', schema: 's', table: 't' },
    targetServer: 'shard_2',
    holdMs: 5000,
    sourcePosition: async () => (calls.push('source position'), { file: 'f', pos: 9 }),
    caughtUp: async () => void calls.push('caught up'),
  });

  it('holds all, reads the source position, waits, then re-points all', async () => {
    const { agent, calls } = fakeAgent(null);
    const out = await cutOver(agent, plan(calls));
    expect(calls.slice(0, 2).sort()).toEqual(['hold a', 'hold b']);
    expect(calls.slice(2, 4)).toEqual(['source position', 'caught up']);
    expect(calls.slice(4).sort()).toEqual(['repoint a shard_2', 'repoint b shard_2']);
    expect(out.blockedMs).toBe(30);
    expect(out.cutOverMs).toBeGreaterThanOrEqual(0);
  });

  it('releases every hold when a re-point fails, so the source keeps serving', async () => {
    const { agent, calls } = fakeAgent('repoint');
    await expect(cutOver(agent, plan(calls))).rejects.toThrow(/source keeps serving: refused/);
    expect(calls.filter((c) => c.startsWith('release')).sort()).toEqual(['release a', 'release b']);
  });
});
