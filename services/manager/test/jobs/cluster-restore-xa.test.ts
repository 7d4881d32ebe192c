// cluster_restore's last word on the multi-shard transactions open at restore_time, against
// fake agents: each branch the replay left prepared on a destination master is ended by the
// decision its gtrid's coordinator (a *source* shard id) has on the destination shard
// restored from it: committed when the replayed row says commit, rolled back (abort written)
// when there is none; rolled back when the coordinator shard was not restored at all.

import { silentLogger } from '@kcm/common';
import type { Agents, MariaDbFinishXaRequest, MariaDbXaBranch, XaOutcome } from '@kcm/agent-api';
import { describe, expect, it } from 'vitest';
import { endTransactionsOpenAtRestoreTime, type RestoredShard } from '../../src/jobs/cluster-restore-xa';
import type { ShardRecord } from '../../src/meta/state';

interface FakeMaster {
  branches: MariaDbXaBranch[];
  decisions: Map<string, 'commit' | 'abort'>;
}

const shard = (id: string, host: string): ShardRecord => ({
  id, name: `shard_${id}`, masterNodeId: `${id}1`,
  nodes: { [`${id}1`]: { id: `${id}1`, hostaddr: host, port: 3306, serverId: Number(id), datadir: '/d', logdir: '/l', walLogDir: '/w' } },
});

/** Source shards 11 and 12 restored onto destination shards 21 (host d1) and 22 (host d2). */
function setUp() {
  const masters: Record<string, FakeMaster> = { d1: { branches: [], decisions: new Map() }, d2: { branches: [], decisions: new Map() } };
  const finished: string[] = [];
  const agents = {
    mariadbHa: (host: string) => ({
      async listPreparedXa() {
        return { branches: [...masters[host].branches], unreadable: 0 };
      },
      async decideXa(_port: number, gtrid: string): Promise<{ outcome: XaOutcome; decided_now: boolean }> {
        const row = masters[host].decisions.get(gtrid);
        if (row) return { outcome: row, decided_now: false };
        masters[host].decisions.set(gtrid, 'abort');
        return { outcome: 'abort', decided_now: true };
      },
      async finishXa(req: MariaDbFinishXaRequest) {
        finished.push(`${host} ${req.gtrid} ${req.bqual} ${req.commit ? 'commit' : 'rollback'}`);
        masters[host].branches = masters[host].branches.filter((b) => b.gtrid !== req.gtrid || b.bqual !== req.bqual);
        return { ended: true, held: false };
      },
    }),
  } as unknown as Pick<Agents, 'mariadbHa'>;
  const shards: RestoredShard[] = [{ srcShardId: '11', dst: shard('21', 'd1') }, { srcShardId: '12', dst: shard('22', 'd2') }];
  return { masters, finished, agents, shards };
}

describe('cluster_restore: multi-shard transactions open at restore_time', () => {
  it('a branch whose decision was replayed is committed; one without a decision is rolled back and the abort recorded', async () => {
    const { masters, finished, agents, shards } = setUp();
    masters.d2.branches = [{ gtrid: 'kcm:11:decided', bqual: '12.1' }, { gtrid: 'kcm:11:undecided', bqual: '12.1' }];
    masters.d1.decisions.set('kcm:11:decided', 'commit');
    const ended = await endTransactionsOpenAtRestoreTime(agents, silentLogger(), shards);
    expect(finished.sort()).toEqual(['d2 kcm:11:decided 12.1 commit', 'd2 kcm:11:undecided 12.1 rollback']);
    expect(masters.d1.decisions.get('kcm:11:undecided')).toBe('abort');
    expect(ended).toEqual({ 21: { committed: 0, rolledBack: 0 }, 22: { committed: 1, rolledBack: 1 } });
  });

  it('every branch of a transaction follows its one decision, on whichever destination shard holds it', async () => {
    const { masters, finished, agents, shards } = setUp();
    masters.d1.branches = [{ gtrid: 'kcm:12:t', bqual: '11.1' }];
    masters.d2.branches = [{ gtrid: 'kcm:12:t', bqual: '12.2' }];
    masters.d2.decisions.set('kcm:12:t', 'commit');
    await endTransactionsOpenAtRestoreTime(agents, silentLogger(), shards);
    expect(finished.sort()).toEqual(['d1 kcm:12:t 11.1 commit', 'd2 kcm:12:t 12.2 commit']);
  });

  it('a transaction whose coordinator shard was not restored has none of its coordinator part here: its branches are rolled back', async () => {
    const { masters, finished, agents, shards } = setUp();
    masters.d2.branches = [{ gtrid: 'kcm:99:gone', bqual: '12.1' }];
    await endTransactionsOpenAtRestoreTime(agents, silentLogger(), shards);
    expect(finished).toEqual(['d2 kcm:99:gone 12.1 rollback']);
    expect(masters.d1.decisions.size + masters.d2.decisions.size).toBe(0);
  });

  it('run again (a new leader resuming the step), it finds nothing left and changes nothing', async () => {
    const { masters, finished, agents, shards } = setUp();
    masters.d2.branches = [{ gtrid: 'kcm:11:x', bqual: '12.1' }];
    await endTransactionsOpenAtRestoreTime(agents, silentLogger(), shards);
    const again = await endTransactionsOpenAtRestoreTime(agents, silentLogger(), shards);
    expect(finished).toEqual(['d2 kcm:11:x 12.1 rollback']);
    expect(again).toEqual({ 21: { committed: 0, rolledBack: 0 }, 22: { committed: 0, rolledBack: 0 } });
  });
});
