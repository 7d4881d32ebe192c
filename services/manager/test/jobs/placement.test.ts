import { describe, expect, it } from 'vitest';
import { KcmError, parseRequest } from '@kcm/protocol';
import { planCluster } from '../../src/jobs/cluster';
import { candidatesFor, placeComps, placementReport, placeShards, type Candidate, type InstanceDemand } from '../../src/jobs/placement';
import { CommandKind } from '../../src/meta/commands';
import { applyCommand } from '../../src/meta/fsm';
import { emptyMetaState, type MachineType, type MetaState } from '../../src/meta/state';

const pool = (...hosts: [string, number, number?][]): Candidate[] => hosts.map(([hostaddr, freePorts, load = 0]) => ({ hostaddr, freePorts, room: freePorts, short: '', load }));
const SMALL: InstanceDemand = { memoryMb: 64, cpuCores: 1, cpuLimitNode: 'share' };

function register(s: MetaState, hostaddr: string, machineType: MachineType, portLow: number, portHigh: number, totalMemMb = 8192, totalCpuCores = 8): void {
  applyCommand(s, {
    kind: CommandKind.MachineRegistered, at: 0, hostaddr, machineType, portLow, portHigh, rackId: 'r', datadir: '/d', logdir: '/l',
    walLogDir: '/w', compDatadir: '/c', totalMemMb, totalCpuCores, facts: null,
  });
}

/** create_cluster paras as the gateway validates them: 1 shard of 3 nodes and 1 compute node unless changed. */
function createParas(change: Record<string, string> = {}) {
  const parsed = parseRequest({
    version: '1.0', job_type: 'create_cluster', timestamp: '1700000000', user_name: 't',
    paras: {
      nick_name: 'n', ha_mode: 'rbr', shards: '1', nodes: '3', comps: '1', max_storage_size: '1', max_connections: '100', cpu_cores: '1',
      cpu_limit_node: 'share', innodb_size: '64', rocksdb_block_cache_size_M: '0', fullsync_level: '1', storage_iplists: [], computer_iplists: [], ...change,
    },
  });
  if (!parsed.ok) throw parsed.error;
  return parsed.request.paras as never;
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

  it('puts the masters of 3 shards of 3 nodes on 3 machines on 3 different machines', () => {
    const shards = placeShards(pool(['a', 10], ['b', 10], ['c', 10]), 3, 3, 'storage_iplists');
    expect(shards.map((s) => s.hosts[0]).sort()).toEqual(['a', 'b', 'c']);
    for (const s of shards) expect(new Set(s.hosts).size).toBe(3);
  });

  it('puts a new shard\'s master on the machine with the fewest masters of any cluster', () => {
    const candidates = pool(['a', 10, 2], ['b', 10, 2], ['c', 10, 2]);
    candidates[0].masters = 1;
    candidates[2].masters = 1;
    const [shard] = placeShards(candidates, 1, 3, 'storage_iplists');
    expect(shard.hosts[0]).toBe('b');
  });

  it('spreads a shard\'s replicas over racks when there are enough racks, over machines otherwise', () => {
    const racked = (...hosts: [string, string][]) => hosts.map(([h, rack]) => ({ ...pool([h, 10])[0], rack }));
    // a and b share rack r1: a 3-node shard takes one machine from each rack.
    const [overRacks] = placeShards(racked(['a', 'r1'], ['b', 'r1'], ['c', 'r2'], ['d', 'r3']), 1, 3, 'storage_iplists');
    expect(new Set(overRacks.hosts.map((h) => ({ a: 'r1', b: 'r1', c: 'r2', d: 'r3' })[h])).size).toBe(3);
    // Two racks for three replicas: distinct machines still.
    const [overMachines] = placeShards(racked(['a', 'r1'], ['b', 'r1'], ['c', 'r2']), 1, 3, 'storage_iplists');
    expect(overMachines.hosts.sort()).toEqual(['a', 'b', 'c']);
    expect(overMachines.spread).toBe(true);
  });

  it('placementReport names each rule a cluster could not meet', () => {
    const s = emptyMetaState();
    for (const [h, rack] of [['10.0.0.1', 'r1'], ['10.0.0.2', 'r2'], ['10.0.0.3', 'r3']]) {
      register(s, h, 'storage', 5000, 5009);
      s.machines[`${h}/storage`].rackId = rack;
    }
    const node = (id: string, hostaddr: string) => ({ id, hostaddr });
    const cluster = (shards: [string, string[]][]) =>
      ({ shards: Object.fromEntries(shards.map(([name, hosts], i) => [String(i), { name, masterNodeId: `${i}-0`, nodes: Object.fromEntries(hosts.map((h, n) => [`${i}-${n}`, node(`${i}-${n}`, h)])) }])) }) as never;
    expect(placementReport(cluster([['shard_1', ['10.0.0.1', '10.0.0.2', '10.0.0.3']], ['shard_2', ['10.0.0.2', '10.0.0.3', '10.0.0.1']]]), s)).toBe(
      "every shard's master on its own machine; every shard's replicas on distinct racks",
    );
    expect(placementReport(cluster([['shard_1', ['10.0.0.1', '10.0.0.2', '10.0.0.2']], ['shard_2', ['10.0.0.1', '10.0.0.3', '10.0.0.2']]]), s)).toBe(
      'not met: the masters of shard_1, shard_2 share machine 10.0.0.1 (fewer storage machines with room than shards); shard_1 has more than one replica on one machine (too few storage machines with room)',
    );
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
    expect(candidatesFor(s, 'storage', [], 'storage_iplists', SMALL).map((c) => [c.hostaddr, c.freePorts])).toEqual([['10.0.0.1', 10], ['10.0.0.2', 2]]);
    expect(candidatesFor(s, 'storage', ['10.0.0.2'], 'storage_iplists', SMALL).map((c) => c.hostaddr)).toEqual(['10.0.0.2']);
    const wrongType = thrown(() => candidatesFor(s, 'storage', ['10.0.0.1', '10.0.0.3'], 'storage_iplists', SMALL));
    expect(wrongType).toMatchObject({ errorName: 'NOT_FOUND', message: 'paras.storage_iplists[1]: 10.0.0.3 is not registered as a storage machine' });
    applyCommand(s, { kind: CommandKind.MachineStatusSet, at: 0, hostaddr: '10.0.0.1', nodeStats: 'dead', reason: 'operator' });
    expect(thrown(() => candidatesFor(s, 'storage', ['10.0.0.1'], 'storage_iplists', SMALL)).message).toBe('paras.storage_iplists[0]: machine 10.0.0.1 is dead, not running');
    expect(candidatesFor(s, 'storage', [], 'storage_iplists', SMALL).map((c) => c.hostaddr)).toEqual(['10.0.0.2']);
    expect(thrown(() => candidatesFor(emptyMetaState(), 'computer', [], 'computer_iplists', SMALL)).message).toBe(
      'paras.computer_iplists: no running computer machine is registered',
    );
  });

  it('a whole cluster plan puts compute nodes on the hosts with the fewest storage nodes', () => {
    const s = emptyMetaState();
    for (const h of ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4']) {
      register(s, h, 'storage', 5000, 5009);
      register(s, h, 'computer', 6000, 6009);
    }
    const plan = planCluster(createParas(), s);
    expect(plan.shards[0].hosts).toEqual(['10.0.0.1', '10.0.0.2', '10.0.0.3']);
    expect(plan.comps).toEqual(['10.0.0.4']);
  });

  it('create_cluster 3x3 on 3 machines (storage and computer) puts the 3 masters on 3 different machines', () => {
    const s = emptyMetaState();
    for (const h of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) {
      register(s, h, 'storage', 5000, 5009);
      register(s, h, 'computer', 6000, 6009);
    }
    const plan = planCluster(createParas({ shards: '3', comps: '2' }), s);
    expect(plan.shards.map((shard) => shard.hosts[0]).sort()).toEqual(['10.0.0.1', '10.0.0.2', '10.0.0.3']);
    expect(plan.shards.every((shard) => shard.spread)).toBe(true);
  });

  describe('disk: the free space last measured on each data directory (issue 35)', () => {
    const GB = 2 ** 30;
    const MB = 2 ** 20;
    const measured = (s: MetaState, hostaddr: string, freeDiskBytes: Record<string, number>, at: number) =>
      applyCommand(s, { kind: CommandKind.MachineFactsMeasured, at, hostaddr, facts: { cores: 8, memoryMb: 8192, freeDiskBytes, mariadbInstalled: true, postgresInstalled: true } });
    const threeHosts = () => {
      const s = emptyMetaState();
      for (const h of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) {
        register(s, h, 'storage', 5000, 5009);
        register(s, h, 'computer', 6000, 6009);
        s.machines[`${h}/storage`].facts = { cores: 8, memoryMb: 8192, freeDiskBytes: { '/d': 300 * MB, '/c': 300 * MB }, mariadbInstalled: true, postgresInstalled: true };
      }
      return s;
    };

    it('a datadir grown after registration takes storage nodes; one filled since takes none, and the refusal names it', () => {
      const s = threeHosts();
      const refused = thrown(() => planCluster(createParas(), s));
      expect(refused.errorName).toBe('NO_RESOURCES');
      expect(refused.message).toContain('10.0.0.1 takes 0 more (disk: 1.0 GB per storage node (max_storage_size), its datadir /d had 300 MB free when measured at registration)');
      for (const h of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) expect(measured(s, h, { '/d': 1.1 * GB, '/c': 1.1 * GB }, Date.UTC(2026, 0, 1)).ok).toBe(true);
      expect(planCluster(createParas(), s).shards[0].hosts.sort()).toEqual(['10.0.0.1', '10.0.0.2', '10.0.0.3']);
      measured(s, '10.0.0.2', { '/d': 20 * MB }, Date.UTC(2026, 0, 1, 0, 5));
      const full = thrown(() => planCluster(createParas(), s));
      expect(full.message).toContain('10.0.0.2 takes 0 more (disk: 1.0 GB per storage node (max_storage_size), its datadir /d had 20 MB free when measured at 2026-01-01T00:05:00.000Z)');
      // The measurement kept what it did not measure: comp_datadir of 10.0.0.2 is still 1.1 GB.
      expect(s.machines['10.0.0.2/computer'].facts?.freeDiskBytes['/c']).toBe(1.1 * GB);
    });

    it('places on the machines whose disks have room rather than on the least loaded one', () => {
      const s = threeHosts();
      register(s, '10.0.0.4', 'storage', 5000, 5009);
      for (const [h, free] of [['10.0.0.1', 10 * GB], ['10.0.0.2', 10 * GB], ['10.0.0.3', 500 * MB], ['10.0.0.4', 10 * GB]] as const) measured(s, h, { '/d': free, '/c': GB }, 1);
      expect(planCluster(createParas(), s).shards[0].hosts.sort()).toEqual(['10.0.0.1', '10.0.0.2', '10.0.0.4']);
      // Two nodes of 4 GB fit on a 10 GB datadir, not three.
      const [candidate] = candidatesFor(s, 'storage', ['10.0.0.1'], 'storage_iplists', { ...SMALL, diskBytes: 4 * GB });
      expect(candidate.room).toBe(2);
    });

    it('a compute node needs room for its install on comp_datadir', () => {
      const s = threeHosts();
      for (const h of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) measured(s, h, { '/d': 10 * GB, '/c': h === '10.0.0.3' ? 10 * GB : 50 * MB }, 1);
      expect(planCluster(createParas({ comps: '2' }), s).comps).toEqual(['10.0.0.3', '10.0.0.3']);
    });

    it('facts measured for a host no longer registered are refused', () => {
      expect(measured(emptyMetaState(), '10.0.0.9', { '/d': GB }, 1)).toMatchObject({ ok: false, refusal: 'NOT_FOUND' });
    });
  });

  describe('memory and cores (NO_RESOURCES names the machine and what is short)', () => {
    /** A cluster already holding storage nodes on `storageHosts` and compute nodes on `compHosts`. */
    const existing = (s: MetaState, id: string, options: { innodbSizeMb: number; cpuCores: number; cpuLimitNode: 'share' | 'quota' }, storageHosts: string[], compHosts: string[] = []) => {
      const nodes = Object.fromEntries(storageHosts.map((hostaddr, i) => [`${id}${i}`, { id: `${id}${i}`, hostaddr, port: 7000 + i, serverId: i + 1, datadir: '/d', logdir: '/l', walLogDir: '/w' }]));
      const comps = Object.fromEntries(compHosts.map((hostaddr, i) => [`${id}${i}`, { id: `${id}${i}`, name: `comp_${id}${i}`, hostaddr, port: 8000 + i, compDatadir: '/c' }]));
      s.clusters[id] = {
        id, name: `cluster_${id}`, nickName: '', status: 'ready', createdByJob: '1', createdAt: 0,
        options: { haMode: 'rbr', maxStorageSizeGb: 1, maxConnections: 100, rocksdbBlockCacheSizeMb: 0, dbcfg: 0, fullsyncLevel: 1, ...options },
        accounts: {} as never,
        shards: { [id]: { id, name: `shard_${id}`, masterNodeId: `${id}0`, nodes } },
        comps,
      };
    };
    const oneMachine = (totalMemMb: number, totalCpuCores: number) => {
      const s = emptyMetaState();
      register(s, '10.0.0.1', 'storage', 5000, 5009, totalMemMb, totalCpuCores);
      register(s, '10.0.0.1', 'computer', 6000, 6009, totalMemMb, totalCpuCores);
      return s;
    };

    it('refuses three nodes of innodb_size 2048 and cpu_cores 8 on one machine of 4096 MB and 2 cores', () => {
      const s = oneMachine(4096, 2);
      const cores = thrown(() => planCluster(createParas({ innodb_size: '2048', cpu_cores: '8' }), s));
      expect(cores).toMatchObject({ errorName: 'NO_RESOURCES' });
      expect(cores.message).toBe(
        'paras.storage_iplists: 3 storage nodes are needed but the candidate machines (10.0.0.1) have room for 0: 10.0.0.1 takes 0 more (cpu_cores 8 per storage node is more than its 2 cores (total_cpu_cores))',
      );
      const memory = thrown(() => planCluster(createParas({ innodb_size: '2048', cpu_cores: '2' }), s));
      expect(memory.message).toBe(
        'paras.storage_iplists: 3 storage nodes are needed but the candidate machines (10.0.0.1) have room for 2: 10.0.0.1 takes 2 more (memory: 2048 MB innodb_size per storage node, 4096 MB of its 4096 MB total_mem free)',
      );
      expect(planCluster(createParas({ innodb_size: '1024', cpu_cores: '2' }), s).shards[0].hosts).toEqual(['10.0.0.1', '10.0.0.1', '10.0.0.1']);
    });

    it('counts the innodb_size of the storage nodes already on the machine, of every cluster', () => {
      const s = oneMachine(4096, 8);
      existing(s, '1', { innodbSizeMb: 3000, cpuCores: 1, cpuLimitNode: 'share' }, ['10.0.0.1']);
      const [candidate] = candidatesFor(s, 'storage', [], 'storage_iplists', { memoryMb: 512, cpuCores: 1, cpuLimitNode: 'share' });
      expect(candidate).toMatchObject({ freePorts: 10, room: 2, short: 'memory: 512 MB innodb_size per storage node, 1096 MB of its 4096 MB total_mem free' });
      // Compute nodes take no memory, so the computer registration is not short of it.
      expect(candidatesFor(s, 'computer', [], 'computer_iplists', { memoryMb: 0, cpuCores: 1, cpuLimitNode: 'share' })[0]).toMatchObject({ room: 10, short: '' });
    });

    it("sums quota cores against total_cpu_cores but lets 'share' instances share the cores", () => {
      const s = oneMachine(65536, 4);
      existing(s, '1', { innodbSizeMb: 64, cpuCores: 1, cpuLimitNode: 'quota' }, ['10.0.0.1', '10.0.0.1'], ['10.0.0.1']);
      existing(s, '2', { innodbSizeMb: 64, cpuCores: 4, cpuLimitNode: 'share' }, ['10.0.0.1', '10.0.0.1', '10.0.0.1']);
      const quota = (cpuCores: number, type: MachineType = 'storage') => candidatesFor(s, type, [], `${type}_iplists`, { memoryMb: 64, cpuCores, cpuLimitNode: 'quota' })[0];
      expect(quota(1)).toMatchObject({ room: 2, short: 'cores: a quota of 1 per storage node, 2 of its 4 cores (total_cpu_cores) not under a quota yet' });
      expect(quota(2).room).toBe(1);
      expect(quota(3).room).toBe(0);
      expect(quota(1, 'computer').room).toBe(3); // the computer registration holds one quota compute node
      expect(candidatesFor(s, 'storage', [], 'storage_iplists', { memoryMb: 64, cpuCores: 4, cpuLimitNode: 'share' })[0]).toMatchObject({ room: 10, short: '' }); // only its ports limit it
      expect(candidatesFor(s, 'storage', [], 'storage_iplists', { memoryMb: 64, cpuCores: 5, cpuLimitNode: 'share' })[0].room).toBe(0);
    });

    it('places on the machines that have room rather than refusing, and refuses a quota over what is left', () => {
      const s = emptyMetaState();
      for (const [h, mem] of [['10.0.0.1', 1024], ['10.0.0.2', 8192], ['10.0.0.3', 8192], ['10.0.0.4', 8192]] as const) {
        register(s, h, 'storage', 5000, 5009, mem, 2);
        register(s, h, 'computer', 6000, 6009, mem, 2);
      }
      existing(s, '1', { innodbSizeMb: 1024, cpuCores: 1, cpuLimitNode: 'quota' }, ['10.0.0.1']);
      const plan = planCluster(createParas({ innodb_size: '1024', cpu_cores: '2', cpu_limit_node: 'quota' }), s);
      expect(plan.shards[0].hosts).toEqual(['10.0.0.2', '10.0.0.3', '10.0.0.4']);
      const err = thrown(() => planCluster(createParas({ shards: '2', innodb_size: '1024', cpu_cores: '2', cpu_limit_node: 'quota' }), s));
      expect(err.message).toMatch(/^paras\.storage_iplists: 6 storage nodes are needed but the candidate machines \(10\.0\.0\.1, 10\.0\.0\.2, 10\.0\.0\.3, 10\.0\.0\.4\) have room for 3: 10\.0\.0\.1 takes 0 more \(memory: .*0 MB of its 1024 MB total_mem free\); 10\.0\.0\.2 takes 1 more \(cores: a quota of 2/);
    });
  });
});
