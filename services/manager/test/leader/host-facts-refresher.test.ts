// The leader's host-facts refresher against a fake agent whose disks change: it records what
// changed enough to matter, once, and nothing for noise (issue 35, defect 3).

import { describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { AgentUnreachableError, type HostFactsReply, type WithAgent } from '@kcm/agent-api';
import { factsChange, HostFactsRefresher, MIN_DISK_CHANGE_BYTES } from '../../src/leader/host-facts-refresher';
import { CommandKind } from '../../src/meta/commands';
import type { HostFacts } from '../../src/meta/state';
import { LocalStore } from '../helpers/local-store';

const MB = 2 ** 20;
const GB = 2 ** 30;

function registered(store: LocalStore, hostaddr: string, free: number): void {
  for (const [machineType, low, datadir] of [['storage', 5000, '/d'], ['computer', 6000, '/c']] as const) {
    void store.propose({
      kind: CommandKind.MachineRegistered, at: 0, hostaddr, machineType, portLow: low, portHigh: low + 9, rackId: 'r', datadir, logdir: '/l', walLogDir: '/w',
      compDatadir: '/c', totalMemMb: 4096, totalCpuCores: 4, facts: { cores: 4, memoryMb: 8192, freeDiskBytes: { [datadir]: free, '/l': free, '/w': free, '/c': free }, mariadbInstalled: true, postgresInstalled: true },
    });
  }
}

/** One host's agent: every directory on one disk of `free` bytes; records the directories asked. */
function fakeAgent(disk: { free: number; down?: boolean }, asked: string[][]): WithAgent {
  return (async (hostaddr: string, call: (agent: { hostFacts(dirs: string[]): Promise<HostFactsReply> }) => Promise<unknown>) =>
    call({
      async hostFacts(dirs) {
        if (disk.down) throw new AgentUnreachableError(`${hostaddr}:58100`, new Error('connection refused'));
        asked.push(dirs);
        return { cores: 4, memory_mb: 8192, disks: dirs.map((dir) => ({ dir, free_bytes: disk.free })), mariadb_installed: true, postgres_installed: true };
      },
    })) as unknown as WithAgent;
}

describe('host facts kept current by the leader', () => {
  it('records a grown and a filled disk on every machine record of the host, and nothing for a change under the threshold', async () => {
    const store = new LocalStore();
    registered(store, '10.0.0.1', 300 * MB);
    const disk = { free: 300 * MB };
    const asked: string[][] = [];
    const refresher = new HostFactsRefresher({ store, withAgent: fakeAgent(disk, asked), logger: silentLogger(), now: () => 1_000 });
    await refresher.refreshAll();
    expect(refresher.recorded).toBe(0); // the same as registered
    expect(asked).toEqual([['/d', '/l', '/w', '/c']]);

    disk.free = 1.1 * GB;
    await refresher.refreshAll();
    expect(refresher.recorded).toBe(1);
    expect(store.s.machines['10.0.0.1/storage'].facts).toMatchObject({ freeDiskBytes: { '/d': 1.1 * GB, '/l': 1.1 * GB, '/w': 1.1 * GB, '/c': 1.1 * GB }, measuredAt: 1_000 });
    // The computer record keeps only its own directories.
    expect(Object.keys(store.s.machines['10.0.0.1/computer'].facts!.freeDiskBytes).sort()).toEqual(['/c', '/l', '/w']);

    disk.free = 1.1 * GB - 50 * MB; // under 5%: nothing committed
    await refresher.refreshAll();
    expect(refresher.recorded).toBe(1);

    disk.free = 71 * MB; // measured while filling
    await refresher.refreshAll();
    disk.free = 20 * MB; // where it ends: 51 MB less is recorded too
    await refresher.refreshAll();
    expect(refresher.recorded).toBe(3);
    expect(store.s.machines['10.0.0.1/storage'].facts?.freeDiskBytes['/d']).toBe(20 * MB);
  });

  it('leaves the facts as recorded when the agent does not answer, and skips hosts the health monitor does not hear', async () => {
    const store = new LocalStore();
    registered(store, '10.0.0.1', 300 * MB);
    const disk = { free: 2 * GB, down: true };
    const asked: string[][] = [];
    const refresher = new HostFactsRefresher({ store, withAgent: fakeAgent(disk, asked), logger: silentLogger() });
    await refresher.refreshAll();
    expect(store.s.machines['10.0.0.1/storage'].facts?.freeDiskBytes['/d']).toBe(300 * MB);
    disk.down = false;
    const deaf = new HostFactsRefresher({ store, withAgent: fakeAgent(disk, asked), logger: silentLogger(), reachable: () => false });
    await deaf.refreshAll();
    expect(asked).toEqual([]);
  });

  it('factsChange: disk by max(16 MB, 5%) of what is recorded, memory by 5%, any change of cores or engines', () => {
    const facts = (free: number, change: Partial<HostFacts> = {}): HostFacts => ({ cores: 4, memoryMb: 8192, freeDiskBytes: { '/d': free }, mariadbInstalled: true, postgresInstalled: true, ...change });
    expect(factsChange(null, facts(GB), ['/d'])).toBe('no facts recorded');
    expect(factsChange(facts(100 * MB), facts(100 * MB - MIN_DISK_CHANGE_BYTES + 1), ['/d'])).toBeNull();
    expect(factsChange(facts(100 * MB), facts(100 * MB - MIN_DISK_CHANGE_BYTES), ['/d'])).toBe(`/d: ${100 * MB} -> ${100 * MB - MIN_DISK_CHANGE_BYTES} bytes free`);
    expect(factsChange(facts(GB), facts(GB + 50 * MB), ['/d'])).toBeNull();
    expect(factsChange(facts(GB), facts(GB + 52 * MB), ['/d'])).not.toBeNull();
    expect(factsChange(facts(100 * GB), facts(96 * GB), ['/d'])).toBeNull();
    expect(factsChange(facts(100 * GB), facts(94 * GB), ['/d'])).not.toBeNull();
    expect(factsChange(facts(GB), facts(GB, { cores: 8 }), ['/d'])).toBe('cores 4 -> 8');
    expect(factsChange(facts(GB), facts(GB, { memoryMb: 8000 }), ['/d'])).toBeNull();
    expect(factsChange(facts(GB), facts(GB, { memoryMb: 4096 }), ['/d'])).toBe('memory 8192 MB -> 4096 MB');
    expect(factsChange(facts(GB), facts(GB, { postgresInstalled: false }), ['/d'])).toBe('engines installed');
    // A directory of the registration measured for the first time.
    expect(factsChange(facts(GB), { ...facts(GB), freeDiskBytes: { '/d': GB, '/w': GB } }, ['/d', '/w'])).toBe(`/w: ${GB} bytes free, first measured`);
  });
});
