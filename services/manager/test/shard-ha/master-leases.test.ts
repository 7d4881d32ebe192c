// The leader's half of fencing by lease, against fake agents on a fake clock: what each
// host's renewal names, and how long a failover must wait for a lease to run out.

import { silentLogger } from '@kcm/common';
import type { Agents, MariaDbLeaseRenewal } from '@kcm/agent-api';
import { describe, expect, it } from 'vitest';
import { LEASE_END_MARGIN_MS, MasterLeaseKeeper } from '../../src/leader/master-leases';
import { cluster, stateWith } from '../helpers/cluster-state';

function setUp() {
  const c = cluster('1', 'ready', [['11', 'h1', 57001], ['12', 'h2', 57002], ['13', 'h3', 57003]], []);
  const state = stateWith(c);
  let clock = 100_000;
  const renewals: { host: string; renewal: MariaDbLeaseRenewal }[] = [];
  const unreachable = new Set<string>();
  const agents = {
    mariadbHa: (host: string) => ({
      async renewMasterLeases(renewal: MariaDbLeaseRenewal) {
        renewals.push({ host, renewal });
        if (unreachable.has(host)) throw new Error('deadline exceeded');
        return { fenced_ports: [] };
      },
    }),
  } as unknown as Agents;
  const keeper = new MasterLeaseKeeper({ store: { state: () => state } as never, agents, logger: silentLogger(), intervalMs: 500, leaseMs: 3000, electionTimeoutMs: 1000, now: () => clock, wallClock: () => 1_700_000_000_000 + clock });
  const shard = c.shards[Object.keys(c.shards)[0]];
  const settle = () => new Promise((r) => setImmediate(r));
  return { keeper, renewals, unreachable, shard, settle, advance: (ms: number) => void (clock += ms) };
}

describe('master leases (leader)', () => {
  it('renews each master with its standbys, to the master\'s host only', async () => {
    const { keeper, renewals, settle } = setUp();
    keeper.start();
    keeper.stop();
    await settle();
    expect(renewals).toEqual([{ host: 'h1', renewal: { lease_ms: 3000, sent_at_ms: 1_700_000_100_000, masters: [{ port: 57001, standbys: ['h2:57002', 'h3:57003'] }] } }]);
  });

  it('a new leader counts every lease as renewed until two election timeouts into its term', async () => {
    const { keeper, advance } = setUp();
    keeper.start();
    keeper.stop();
    // Renewed just now by this leader, and a deposed one may renew for up to 2 s more.
    expect(keeper.msUntilLeaseEnds('11')).toBe(2000 + 3000 + LEASE_END_MARGIN_MS);
    advance(10_000);
    expect(keeper.msUntilLeaseEnds('11')).toBe(0);
  });

  it('counts from the last renewal sent, even one that failed (it may have got through)', async () => {
    const { keeper, unreachable, advance, settle } = setUp();
    keeper.start();
    await settle();
    advance(5000);
    unreachable.add('h1');
    keeper.round();
    await settle();
    keeper.stop();
    expect(keeper.msUntilLeaseEnds('11')).toBe(3000 + LEASE_END_MARGIN_MS);
  });

  it('stops renewing a fenced master, and tells its host it has none left', async () => {
    const { keeper, renewals, shard, advance, settle } = setUp();
    keeper.start();
    await settle();
    advance(5000); // past the term's grace
    keeper.round();
    await settle();
    shard.nodes['11'].fenced = { since: 1, byJob: '9', reason: 'failed master' };
    advance(500);
    keeper.round();
    await settle();
    advance(500);
    keeper.round();
    await settle();
    keeper.stop();
    expect(renewals.map((r) => `${r.host}: ${r.renewal.masters.map((m) => m.port).join(',')}`)).toEqual(['h1: 57001', 'h1: 57001', 'h1: ']);
    // Its lease runs out lease + margin after the last renewal that named it, 1 s ago.
    expect(keeper.msUntilLeaseEnds('11')).toBe(3000 + LEASE_END_MARGIN_MS - 1000);
    advance(3000 + LEASE_END_MARGIN_MS - 1000);
    expect(keeper.msUntilLeaseEnds('11')).toBe(0);
  });
});
