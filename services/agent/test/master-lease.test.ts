// The agent's half of fencing by lease, on a fake clock: a master whose lease ran out is
// fenced when its host cannot reach every standby, and keeps serving while it reaches them
// all (a manager outage alone does not take masters down); a late renewal renews nothing.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { silentLogger } from '@kcm/common';
import { afterEach, describe, expect, it } from 'vitest';
import { MasterLeases, type InstanceRole } from '../src/capabilities/mariadb/ha/master-lease';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function setUp(opts: { role?: InstanceRole } = {}) {
  const stateDir = await mkdtemp(path.join(tmpdir(), 'kcm-lease-'));
  dirs.push(stateDir);
  let clock = 10_000;
  let wall = 1_700_000_000_000;
  const reachable = new Set(['127.0.2.2:3306', '127.0.2.3:3306']);
  const fenced: { port: number; why: string }[] = [];
  const make = () =>
    new MasterLeases({
      stateDir,
      logger: silentLogger(),
      hostaddr: '127.0.2.1',
      roleOf: async () => opts.role ?? 'writable',
      fence: async (port, why) => void fenced.push({ port, why }),
      now: () => clock,
      wallClock: () => wall,
      reachable: async (host, port) => reachable.has(`${host}:${port}`),
    });
  const leases = make();
  const renew = (ports: number[], sentAt = wall) =>
    leases.renew({ lease_ms: 3000, sent_at_ms: sentAt, masters: ports.map((port) => ({ port, standbys: ['127.0.2.2:3306', '127.0.2.3:3306'] })) });
  return {
    leases, make, renew, fenced, reachable,
    advance: (ms: number) => {
      clock += ms;
      wall += ms;
    },
  };
}

describe('master leases (agent)', () => {
  it('fences a master whose lease ran out when its host no longer reaches a standby', async () => {
    const { leases, renew, fenced, reachable, advance } = await setUp();
    await renew([57001]);
    reachable.delete('127.0.2.3:3306');
    advance(2999);
    await leases.check();
    expect(fenced).toEqual([]); // the lease still runs
    advance(2);
    await leases.check();
    expect(fenced).toEqual([{ port: 57001, why: expect.stringMatching(/lease ran out .* does not reach standby 127\.0\.2\.3:3306/) }]);
    // Fenced once, and reported to the leader while it still names it.
    await leases.check();
    expect(fenced).toHaveLength(1);
    expect(await renew([57001])).toEqual({ fenced_ports: [57001] });
  });

  it('keeps a master serving past its lease while its host reaches every standby (the managers alone are gone)', async () => {
    const { leases, renew, fenced, reachable, advance } = await setUp();
    await renew([57001]);
    advance(10_000);
    await leases.check();
    expect(fenced).toEqual([]);
    // ...until a standby is lost too.
    reachable.delete('127.0.2.2:3306');
    await leases.check();
    expect(fenced.map((f) => f.port)).toEqual([57001]);
  });

  it('forgets a port the leader no longer names, and one that turned read-only (a standby now)', async () => {
    const gone = await setUp();
    await gone.renew([57001, 57002]);
    await gone.renew([57002]);
    gone.reachable.clear();
    gone.advance(5000);
    await gone.leases.check();
    expect(gone.fenced.map((f) => f.port)).toEqual([57002]);

    const demoted = await setUp({ role: 'read-only' });
    await demoted.renew([57001]);
    demoted.reachable.clear();
    demoted.advance(5000);
    await demoted.leases.check();
    expect(demoted.fenced).toEqual([]);
  });

  it('takes a renewal\'s time on the way off its lease, and ignores one older than the lease', async () => {
    const { leases, renew, fenced, reachable, advance } = await setUp();
    reachable.clear();
    await renew([57001]);
    advance(2000);
    // Sent 2.5 s ago (held up in a partition): it renews only up to 0.5 s from now.
    await renew([57001], 1_700_000_000_000 + 2000 - 2500);
    advance(600);
    await leases.check();
    expect(fenced.map((f) => f.port)).toEqual([57001]);

    const late = await setUp();
    late.reachable.clear();
    await late.renew([57001]);
    late.advance(2900);
    await late.renew([57001], 1_700_000_000_000 + 2900 - 3100); // 3.1 s on the way: nothing renewed
    late.advance(101);
    await late.leases.check();
    expect(late.fenced.map((f) => f.port)).toEqual([57001]);
  });

  it('after an agent restart, gives every master of the last renewal one lease from the start, then fences it if cut off', async () => {
    const { leases, make, renew, fenced, reachable, advance } = await setUp();
    await renew([57001]);
    leases.stop();
    reachable.clear();
    const restarted = make();
    await restarted.start();
    restarted.stop();
    advance(2999);
    await restarted.check();
    expect(fenced).toEqual([]);
    advance(2);
    await restarted.check();
    expect(fenced.map((f) => f.port)).toEqual([57001]);
  });

  it('does not fence a master that is down (it acknowledges nothing), and fences it once it runs', async () => {
    let role: 'down' | 'writable' = 'down';
    const stateDir = await mkdtemp(path.join(tmpdir(), 'kcm-lease-'));
    dirs.push(stateDir);
    let clock = 0;
    const fenced: number[] = [];
    const leases = new MasterLeases({ stateDir, logger: silentLogger(), hostaddr: '127.0.2.1', roleOf: async () => role, fence: async (port) => void fenced.push(port), now: () => clock, wallClock: () => 1_700_000_000_000 + clock, reachable: async () => false });
    await leases.renew({ lease_ms: 3000, sent_at_ms: 1_700_000_000_000, masters: [{ port: 57001, standbys: ['127.0.2.2:3306'] }] });
    clock = 5000;
    await leases.check();
    expect(fenced).toEqual([]);
    role = 'writable';
    await leases.check();
    expect(fenced).toEqual([57001]);
  });

  it('refuses a renewal with a lease out of range', async () => {
    const { leases } = await setUp();
    await expect(leases.renew({ lease_ms: 0, sent_at_ms: Date.now(), masters: [] })).rejects.toThrow(/lease_ms 0/);
  });
});
