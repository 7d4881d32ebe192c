// The leader's in-doubt resolver against fake agents: an XA branch prepared past the timeout
// is ended by its coordinator shard's decision (written as abort when there is none) on every
// master holding a branch of the transaction; what cannot be decided or reached now is
// retried next round; a transaction whose coordinator no one knows is left alone.

import { createLogger, silentLogger } from '@kcm/common';
import { AgentUnreachableError, type Agents, type MariaDbFinishXaRequest, type MariaDbXaBranch, type XaOutcome } from '@kcm/agent-api';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { InDoubtResolver, type XaResolution } from '../src/leader/in-doubt-resolver';
import { createManagerMetrics } from '../src/metrics';
import { cluster, stateWith } from './helpers/cluster-state';
import { until } from './helpers/local-store';

/** One shard master as its agent answers: its prepared kcm branches and its decision rows. */
interface FakeMaster {
  branches: MariaDbXaBranch[];
  decisions: Map<string, 'commit' | 'abort'>;
  /** The agent does not answer. */
  down?: boolean;
  /** gtrids whose decision row is locked by a coordinator's commit in flight. */
  pending?: Set<string>;
  /** Branches held by a live client session (FinishXa cannot end them). */
  held?: Set<string>;
}

const TIMEOUT_MS = 3_000;

/** Cluster 7: shards 71, 72, 73, masters on h1, h2, h3 (standbys elsewhere). */
function setUp() {
  const c = cluster('7', 'ready', [['1', 'h1', 3301], ['2', 'h1s', 3301]], []);
  for (const n of [2, 3]) {
    c.shards[`7${n}`] = { id: `7${n}`, name: `shard_7${n}`, masterNodeId: `${n}1`, nodes: { [`${n}1`]: { id: `${n}1`, hostaddr: `h${n}`, port: 3300 + n, serverId: n, datadir: '/d', logdir: '/l', walLogDir: '/w' } } };
  }
  const state = stateWith(c);
  const masters: Record<string, FakeMaster> = { h1: { branches: [], decisions: new Map() }, h2: { branches: [], decisions: new Map() }, h3: { branches: [], decisions: new Map() } };
  const calls: string[] = [];
  const finished: Array<{ host: string } & MariaDbFinishXaRequest> = [];
  const reach = (host: string) => {
    if (masters[host]?.down) throw new AgentUnreachableError(`${host}:58100`, new Error('connect ECONNREFUSED'));
    return masters[host];
  };
  const agents = {
    mariadbHa: (host: string) => ({
      async listPreparedXa() {
        calls.push(`list ${host}`);
        return { branches: [...reach(host).branches], unreadable: 0 };
      },
      async decideXa(_port: number, gtrid: string): Promise<{ outcome: XaOutcome; decided_now: boolean }> {
        calls.push(`decide ${host} ${gtrid}`);
        const m = reach(host);
        if (m.pending?.has(gtrid)) return { outcome: 'pending', decided_now: false };
        const row = m.decisions.get(gtrid);
        if (row) return { outcome: row, decided_now: false };
        m.decisions.set(gtrid, 'abort');
        return { outcome: 'abort', decided_now: true };
      },
      async finishXa(req: MariaDbFinishXaRequest) {
        calls.push(`finish ${host} ${req.gtrid} ${req.bqual} ${req.commit ? 'commit' : 'rollback'}`);
        const m = reach(host);
        if (m.held?.has(req.bqual)) return { ended: false, held: true };
        const i = m.branches.findIndex((b) => b.gtrid === req.gtrid && b.bqual === req.bqual);
        if (i < 0) return { ended: false, held: false };
        m.branches.splice(i, 1);
        finished.push({ host, ...req });
        return { ended: true, held: false };
      },
      async pruneXaDecisions(req: { keep_gtrids: string[] }) {
        calls.push(`prune ${host} keep=${req.keep_gtrids.join(',')}`);
        reach(host);
        return { deleted: 0 };
      },
    }),
  } as unknown as Agents;
  let clock = 1_000_000;
  const resolved: Array<[XaResolution, number]> = [];
  const logLines: Array<{ level: number; msg: string; gtrid?: string; outcome?: string; ageMs?: number; cluster?: string }> = [];
  const logger = createLogger({ name: 'test', level: 'debug', destination: { write: (line: string) => void logLines.push(JSON.parse(line)) } });
  const resolver = new InDoubtResolver({ store: { state: () => state }, agents, logger, inDoubtAfterMs: TIMEOUT_MS, now: () => clock, onResolved: (o, n) => void resolved.push([o, n]) });
  return {
    state, masters, calls, finished, resolved, logLines, resolver,
    advance: (ms: number) => void (clock += ms),
    /** A transaction coordinated by `coordinator` left prepared on the given shards. */
    prepare: (gtrid: string, ...participants: number[]) => {
      for (const n of participants) masters[`h${n}`].branches.push({ gtrid, bqual: `7${n}.1` });
    },
    callsLike: (prefix: string) => calls.filter((c) => c.startsWith(prefix)),
  };
}

describe('in-doubt resolver', () => {
  it('leaves a branch prepared for less than the timeout alone', async () => {
    const t = setUp();
    t.prepare('kcm:71:a', 2);
    await t.resolver.resolveAll();
    t.advance(TIMEOUT_MS - 1);
    await t.resolver.resolveAll();
    expect(t.callsLike('decide')).toEqual([]);
    expect(t.masters.h2.branches).toHaveLength(1);
    expect(t.resolver.inDoubt()).toEqual([{ clusterId: '7', branches: 0, oldestSeconds: 0 }]);
  });

  it('asks the coordinator shard\'s master for the decision and commits every branch of the transaction where it lies', async () => {
    const t = setUp();
    t.prepare('kcm:71:b', 2, 3);
    t.masters.h1.decisions.set('kcm:71:b', 'commit');
    await t.resolver.resolveAll();
    t.advance(TIMEOUT_MS);
    await t.resolver.resolveAll();
    expect(t.callsLike('decide')).toEqual(['decide h1 kcm:71:b']);
    expect(t.finished.map((f) => `${f.host} ${f.bqual} ${f.commit}`).sort()).toEqual(['h2 72.1 true', 'h3 73.1 true']);
    expect(t.resolved).toEqual([['commit', 2]]);
    expect(t.resolver.inDoubt()).toEqual([{ clusterId: '7', branches: 0, oldestSeconds: 0 }]);
    const log = t.logLines.find((l) => l.msg.startsWith('in-doubt XA transaction resolved'));
    expect(log).toMatchObject({ cluster: 'cluster_7', gtrid: 'kcm:71:b', outcome: 'commit', ageMs: TIMEOUT_MS });
  });

  it('without a decision row, writes abort on the coordinator first and rolls every branch back', async () => {
    const t = setUp();
    t.prepare('kcm:72:c', 1, 3);
    await t.resolver.resolveAll();
    t.advance(TIMEOUT_MS);
    await t.resolver.resolveAll();
    expect(t.masters.h2.decisions.get('kcm:72:c')).toBe('abort');
    expect(t.finished.map((f) => `${f.host} ${f.bqual} ${f.commit}`).sort()).toEqual(['h1 71.1 false', 'h3 73.1 false']);
    expect(t.resolved).toEqual([['abort', 2]]);
    // A later round finds nothing to do.
    await t.resolver.resolveAll();
    expect(t.callsLike('decide')).toHaveLength(1);
  });

  it('a decision still being written (pending) is asked again next round, and nothing is ended before it', async () => {
    const t = setUp();
    t.prepare('kcm:71:d', 2);
    t.masters.h1.pending = new Set(['kcm:71:d']);
    await t.resolver.resolveAll();
    t.advance(TIMEOUT_MS);
    await t.resolver.resolveAll();
    expect(t.callsLike('finish')).toEqual([]);
    expect(t.resolver.inDoubt()).toEqual([{ clusterId: '7', branches: 1, oldestSeconds: TIMEOUT_MS / 1000 }]);
    // The coordinator's commit landed.
    t.masters.h1.pending.clear();
    t.masters.h1.decisions.set('kcm:71:d', 'commit');
    t.advance(1_000);
    await t.resolver.resolveAll();
    expect(t.callsLike('finish')).toEqual(['finish h2 kcm:71:d 72.1 commit']);
    expect(t.resolved).toEqual([['commit', 1]]);
  });

  it('an agent that does not answer (coordinator, or a branch\'s master) is retried next round; the others are ended', async () => {
    const t = setUp();
    t.prepare('kcm:71:e', 2, 3);
    t.masters.h1.down = true;
    await t.resolver.resolveAll();
    t.advance(TIMEOUT_MS);
    await t.resolver.resolveAll();
    expect(t.callsLike('finish')).toEqual([]);
    expect(t.resolver.inDoubt()[0].branches).toBe(2);
    // The coordinator answers again (an abort is decided); h3 is down now.
    t.masters.h1.down = false;
    t.masters.h3.down = true;
    t.advance(1_000);
    await t.resolver.resolveAll();
    expect(t.finished.map((f) => f.host)).toEqual(['h2']);
    // h3's branch keeps its age while its master is unreachable, and is ended once it answers.
    t.masters.h3.down = false;
    t.advance(1_000);
    await t.resolver.resolveAll();
    expect(t.finished.map((f) => `${f.host} ${f.commit}`)).toEqual(['h2 false', 'h3 false']);
    expect(t.callsLike('decide h1')).toHaveLength(3);
    expect(t.resolver.inDoubt()[0].branches).toBe(0);
  });

  it('a branch held by a live client session stays in doubt and is tried again', async () => {
    const t = setUp();
    t.prepare('kcm:71:f', 2);
    t.masters.h2.held = new Set(['72.1']);
    await t.resolver.resolveAll();
    t.advance(TIMEOUT_MS);
    await t.resolver.resolveAll();
    t.advance(1_000);
    await t.resolver.resolveAll();
    expect(t.callsLike('finish')).toHaveLength(2);
    expect(t.resolver.inDoubt()).toEqual([{ clusterId: '7', branches: 1, oldestSeconds: (TIMEOUT_MS + 1_000) / 1000 }]);
    expect(t.resolved).toEqual([]);
  });

  it('leaves a transaction whose coordinator shard is not in the metadata prepared, counts it in doubt and says so as an error', async () => {
    const t = setUp();
    t.prepare('kcm:99:g', 2);
    await t.resolver.resolveAll();
    t.advance(TIMEOUT_MS + 5_000);
    await t.resolver.resolveAll();
    expect(t.callsLike('decide')).toEqual([]);
    expect(t.callsLike('finish')).toEqual([]);
    expect(t.resolver.inDoubt()).toEqual([{ clusterId: '7', branches: 1, oldestSeconds: (TIMEOUT_MS + 5_000) / 1000 }]);
    const errors = t.logLines.filter((l) => l.level >= 50 && l.gtrid === 'kcm:99:g');
    expect(errors).toHaveLength(1);
    expect(errors[0].msg).toMatch(/coordinator shard is not in the cluster's metadata/);
  });

  it('keeps a branch\'s age across a failover of its shard: the promoted master\'s copy is ended by the same decision', async () => {
    const t = setUp();
    t.prepare('kcm:71:h', 2);
    t.masters.h1.decisions.set('kcm:71:h', 'commit');
    await t.resolver.resolveAll();
    // Shard 72 fails over to a standby on h4 that holds the branch prepared (replicated).
    const shard = t.state.clusters['7'].shards['72'];
    shard.nodes['42'] = { id: '42', hostaddr: 'h4', port: 3304, serverId: 42, datadir: '/d', logdir: '/l', walLogDir: '/w' };
    shard.masterNodeId = '42';
    t.masters.h4 = { branches: [...t.masters.h2.branches], decisions: new Map() };
    t.advance(TIMEOUT_MS);
    await t.resolver.resolveAll();
    expect(t.callsLike('finish')).toEqual(['finish h4 kcm:71:h 72.1 commit']);
  });

  it('prunes decision rows only in a round every master answered, keeping the gtrids still prepared', async () => {
    const t = setUp();
    t.prepare('kcm:71:i', 2);
    t.masters.h3.down = true;
    await t.resolver.resolveAll();
    expect(t.callsLike('prune')).toEqual([]);
    t.masters.h3.down = false;
    await t.resolver.resolveAll();
    expect(t.callsLike('prune').sort()).toEqual(['prune h1 keep=kcm:71:i', 'prune h2 keep=kcm:71:i', 'prune h3 keep=kcm:71:i']);
    // At most once a minute.
    await t.resolver.resolveAll();
    expect(t.callsLike('prune')).toHaveLength(3);
  });

  it('clusters not ready are not looked at', async () => {
    const t = setUp();
    t.state.clusters['7'].status = 'deleting';
    await t.resolver.resolveAll();
    expect(t.calls).toEqual([]);
    expect(t.resolver.inDoubt()).toEqual([]);
  });

  it('a cluster a cluster_restore is writing into is not looked at: the restore ends what its replay left prepared', async () => {
    const t = setUp();
    t.prepare('kcm:99:from-the-source', 2);
    t.state.jobs['5'] = { id: '5', jobType: 'cluster_restore', sentJobType: 'cluster_restore', paras: { src_cluster_id: '6', dst_cluster_id: '7' }, status: 'ongoing' } as unknown as (typeof t.state.jobs)[string];
    t.state.runQueues['cluster:7'] = ['5'];
    await t.resolver.resolveAll();
    expect(t.calls).toEqual([]);
    t.state.jobs['5'].status = 'done';
    t.state.runQueues['cluster:7'] = [];
    await t.resolver.resolveAll();
    expect(t.callsLike('list')).toHaveLength(3);
  });

  it('runs rounds while leading and none after leadership stops; a follower reports nothing in doubt', async () => {
    const t = setUp();
    const resolver = new InDoubtResolver({ store: { state: () => t.state }, agents: { mariadbHa: (h: string) => ({ listPreparedXa: async () => (t.calls.push(`list ${h}`), { branches: [{ gtrid: 'kcm:99:j', bqual: '72.1' }], unreadable: 0 }) }) } as unknown as Agents, logger: silentLogger(), intervalMs: 10, inDoubtAfterMs: 1 });
    resolver.start();
    await until(() => t.callsLike('list').length >= 9);
    await until(() => resolver.inDoubt()[0]?.branches === 3);
    await resolver.stop();
    const after = t.calls.length;
    await new Promise((r) => setTimeout(r, 60));
    expect(t.calls.length).toBe(after);
    expect(resolver.inDoubt()).toEqual([]);
  });

  it('exports the in-doubt count and age per cluster and the ended branches by outcome', async () => {
    const t = setUp();
    const registry = new Registry();
    const metrics = createManagerMetrics(registry, { raft: () => undefined, state: () => t.state, health: () => undefined, inDoubtXa: () => t.resolver.inDoubt() });
    const samples = async (name: string) => (await registry.getSingleMetricAsString(name)).split('\n').filter((l) => !l.startsWith('#'));
    t.prepare('kcm:99:k', 2);
    await t.resolver.resolveAll();
    t.advance(61_000);
    await t.resolver.resolveAll();
    expect(await samples('kcm_xa_in_doubt_branches')).toEqual(['kcm_xa_in_doubt_branches{cluster_id="7"} 1']);
    expect(await samples('kcm_xa_in_doubt_oldest_seconds')).toEqual(['kcm_xa_in_doubt_oldest_seconds{cluster_id="7"} 61']);
    metrics.observeXaResolved('commit', 2);
    expect(await samples('kcm_xa_in_doubt_resolved_total')).toEqual(['kcm_xa_in_doubt_resolved_total{outcome="commit"} 2']);
  });
});
