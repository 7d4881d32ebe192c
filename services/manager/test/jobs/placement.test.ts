import { describe, expect, it } from 'vitest';
import { KcmError, parseRequest } from '@kcm/protocol';
import { planCluster } from '../../src/jobs/cluster';
import { candidatesFor, checkStorageSpace, placeComps, placeShards, type Candidate } from '../../src/jobs/placement';
import { CommandKind } from '../../src/meta/commands';
import { applyCommand } from '../../src/meta/fsm';
import { emptyMetaState, type MachineType, type MetaState } from '../../src/meta/state';

const pool = (...hosts: [string, number, number?][]): Candidate[] => hosts.map(([hostaddr, freePorts, load = 0]) => ({ hostaddr, freePorts, load }));

function register(s: MetaState, hostaddr: string, machineType: MachineType, portLow: number, portHigh: number): void {
  applyCommand(s, {
    kind: CommandKind.MachineRegistered, at: 0, hostaddr, machineType, portLow, portHigh, rackId: 'r', datadir: '/d', logdir: '/l',
    walLogDir: '/w', compDatadir: '/c', totalMemMb: 1, totalCpuCores: 1, facts: null,
  });
}

function thrown(fn: () => unknown): KcmError {
  try {
    fn();
  } catch (err) {
    if (err instanceof KcmError) return err;
    throw err;
  }
  throw new Error('expected a KcmError');
}

describe('placement of new instances', () => {
  it("spreads each shard's replicas over distinct machines when there are enough", () => {
    const shards = placeShards(pool(['a', 10], ['b', 10], ['c', 10]), 2, 3, 'storage_iplists');
    for (const s of shards) {
      expect(new Set(s.hosts).size).toBe(3);
      expect(s.spread).toBe(true);
    }
  });

  it('balances masters and load: the second shard starts on a machine the first did not start on', () => {
    const shards = placeShards(pool(['a', 10], ['b', 10], ['c', 10], ['d', 10]), 2, 3, 'storage_iplists');
    expect(shards[0].hosts).toEqual(['a', 'b', 'c']);
    expect(shards[1].hosts[0]).toBe('d');
  });

  it('with too few machines it shares one between replicas and says the shard is not spread', () => {
    const [shard] = placeShards(pool(['a', 10], ['b', 10]), 1, 3, 'storage_iplists');
    expect(shard.hosts.sort()).toEqual(['a', 'a', 'b']);
    expect(shard.spread).toBe(false);
  });

  it('skips a machine whose port range is full and prefers the least loaded one', () => {
    const [shard] = placeShards(pool(['a', 0], ['b', 5, 4], ['c', 5, 0], ['d', 5, 1]), 1, 3, 'storage_iplists');
    expect(shard.hosts).toEqual(['c', 'd', 'b']);
  });

  it('refuses when the candidates have fewer free ports than instances, naming the field', () => {
    const err = thrown(() => placeShards(pool(['a', 2], ['b', 2]), 2, 3, 'storage_iplists'));
    expect(err.errorName).toBe('NO_RESOURCES');
    expect(err.message).toBe('paras.storage_iplists: 6 storage nodes are needed but the candidate machines (a, b) have 4 free ports');
    expect(thrown(() => placeComps(pool(['a', 1]), 2, 'computer_iplists')).message).toMatch(/^paras\.computer_iplists: 2 compute nodes/);
  });

  it('candidates come from the iplist (each entry a running machine of the right type) or from every running machine', () => {
    const s = emptyMetaState();
    register(s, '10.0.0.1', 'storage', 5000, 5009);
    register(s, '10.0.0.2', 'storage', 5000, 5001);
    register(s, '10.0.0.3', 'computer', 6000, 6009);
    expect(candidatesFor(s, 'storage', [], 'storage_iplists').map((c) => [c.hostaddr, c.freePorts])).toEqual([['10.0.0.1', 10], ['10.0.0.2', 2]]);
    expect(candidatesFor(s, 'storage', ['10.0.0.2'], 'storage_iplists').map((c) => c.hostaddr)).toEqual(['10.0.0.2']);
    const wrongType = thrown(() => candidatesFor(s, 'storage', ['10.0.0.1', '10.0.0.3'], 'storage_iplists'));
    expect(wrongType).toMatchObject({ errorName: 'NOT_FOUND', message: 'paras.storage_iplists[1]: 10.0.0.3 is not registered as a storage machine' });
    applyCommand(s, { kind: CommandKind.MachineStatusSet, at: 0, hostaddr: '10.0.0.1', nodeStats: 'dead', reason: 'operator' });
    expect(thrown(() => candidatesFor(s, 'storage', ['10.0.0.1'], 'storage_iplists')).message).toBe('paras.storage_iplists[0]: machine 10.0.0.1 is dead, not running');
    expect(candidatesFor(s, 'storage', [], 'storage_iplists').map((c) => c.hostaddr)).toEqual(['10.0.0.2']);
    expect(thrown(() => candidatesFor(emptyMetaState(), 'computer', [], 'computer_iplists')).message).toBe(
      'paras.computer_iplists: no running computer machine is registered',
    );
  });

  it('a whole cluster plan puts compute nodes on the hosts with the fewest storage nodes', () => {
    const s = emptyMetaState();
    for (const h of ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4']) {
      register(s, h, 'storage', 5000, 5009);
      register(s, h, 'computer', 6000, 6009);
    }
    const parsed = parseRequest({
      version: '1.0', job_type: 'create_cluster', timestamp: '1700000000', user_name: 't',
      paras: {
        nick_name: 'n', ha_mode: 'rbr', shards: '1', nodes: '3', comps: '1', max_storage_size: '1', max_connections: '100', cpu_cores: '1',
        cpu_limit_node: 'share', innodb_size: '64', rocksdb_block_cache_size_M: '0', fullsync_level: '1', storage_iplists: [], computer_iplists: [],
      },
    });
    if (!parsed.ok) throw parsed.error;
    const plan = planCluster(parsed.request.paras as never, s);
    expect(plan.shards[0].hosts).toEqual(['10.0.0.1', '10.0.0.2', '10.0.0.3']);
    expect(plan.comps).toEqual(['10.0.0.4']);
  });

  it('max_storage_size is checked against the free space the agent measured on each datadir', () => {
    const s = emptyMetaState();
    register(s, '10.0.0.1', 'storage', 5000, 5009);
    register(s, '10.0.0.2', 'storage', 5000, 5009);
    s.machines['10.0.0.1/storage'].facts = { cores: 2, memoryMb: 1024, freeDiskBytes: { '/d': 25 * 2 ** 30 }, mariadbInstalled: true, postgresInstalled: true };
    expect(() => checkStorageSpace(s, ['10.0.0.1', '10.0.0.1', '10.0.0.2'], 10)).not.toThrow();
    const err = thrown(() => checkStorageSpace(s, ['10.0.0.1', '10.0.0.1', '10.0.0.1'], 10));
    expect(err).toMatchObject({ errorName: 'NO_RESOURCES' });
    expect(err.message).toBe('paras.max_storage_size: 3 storage node(s) of 10 GB need 30 GB on 10.0.0.1, but its datadir /d had 25.0 GB free when last measured');
  });
});
