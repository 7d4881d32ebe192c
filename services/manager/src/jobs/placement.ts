// Where new instances go. Pure functions over the replicated state, shared by every job
// that adds instances (create_cluster, add_shards, add_nodes, add_comps): the job computes
// a placement, and the apply of its command checks it again and assigns the ports.
//
// Rules: only `running` machines of the right type are candidates (from the request's
// iplist, or every registered one when the list is empty); a shard's replicas go to
// distinct machines when there are enough, and the result says which shards could not be
// spread; a shard's master goes to the machine with the fewest shard masters (any cluster),
// so one lost host does not take several masters down at once; a shard's replicas go to
// distinct racks (create_machine's rack_id) when there are enough, to distinct machines
// otherwise; among equal choices the machine with the fewest instances wins.
// placementReport says, after the fact, which of these rules could not be met.
//
// A machine takes as many new instances as it has free ports, memory and cores for, all
// counted against its registration (create_machine's total_mem and total_cpu_cores: what
// the operator gives kcm on that machine; the measured facts are not used as the budget
// because simulated hosts on one box each measure the whole box):
// - memory: every storage node takes its cluster's innodb_size (existing ones included);
//   compute nodes have no memory para and take none;
// - cores: no instance may ask for more cpu_cores than its machine has. Instances in
//   'share' mode (a cgroup weight) share the cores and are not summed; 'quota' mode is a
//   hard cap, counted as a reservation: the quota cores of a machine's instances together
//   stay within its total_cpu_cores. (update_instance_cgroup changes are not recorded in
//   the metadata, so an instance counts with its cluster's cpu_cores and cpu_limit_node.)
// - disk: a storage node takes max_storage_size of the free space measured on its machine's
//   datadir, a compute node what an install needs on comp_datadir (INSTALL_MIN_FREE_BYTES).
//   The measured facts, kept current by the leader's host-facts refresher, are the budget
//   here: free space is what the host has, whatever the registration said. A machine whose
//   free space is unknown is not limited by it.
// This is a placement check on the committed state, not a quota.

import { formatBytes, INSTALL_MIN_FREE_BYTES } from '@kcm/agent-api';
import { KcmError } from '@kcm/protocol';
import { freePortCount } from '../meta/clusters';
import { own } from '../meta/dict';
import { machineKey, type ClusterOptions, type ClusterRecord, type MachineRecord, type MachineType, type MetaState } from '../meta/state';

export interface Candidate {
  hostaddr: string;
  /** Ports still free in this machine's range. */
  freePorts: number;
  /** How many more instances of the request it can take: free ports, memory and cores. */
  room: number;
  /** Why `room` is below `freePorts` ('' when ports are the limit): memory or cores, in words. */
  short: string;
  /** Instances already on the host (any type): placement prefers the least loaded. */
  load: number;
  /**
   * Shard masters on the host (storage candidates; absent counts as 0). A shard's master goes
   * to the host with the fewest, so losing one host does not take several masters at once.
   */
  masters?: number;
  /** The machine's rack_id (absent: a rack of its own). Replicas of a shard prefer distinct racks. */
  rack?: string;
}

/** What each new instance of a request takes from its machine. */
export interface InstanceDemand {
  /** MB of the machine's total_mem: a storage node's innodb_size; 0 for a compute node. */
  memoryMb: number;
  cpuCores: number;
  cpuLimitNode: ClusterOptions['cpuLimitNode'];
  /**
   * Bytes of measured free space it takes in its data directory (a storage node's datadir,
   * a compute node's comp_datadir); absent or 0: none.
   */
  diskBytes?: number;
}

const GB = 2 ** 30;

export function storageDemand(options: Pick<ClusterOptions, 'innodbSizeMb' | 'cpuCores' | 'cpuLimitNode' | 'maxStorageSizeGb'>): InstanceDemand {
  return { memoryMb: options.innodbSizeMb, cpuCores: options.cpuCores, cpuLimitNode: options.cpuLimitNode, diskBytes: Math.max(options.maxStorageSizeGb * GB, INSTALL_MIN_FREE_BYTES.storageDatadir) };
}

export function computeDemand(options: Pick<ClusterOptions, 'cpuCores' | 'cpuLimitNode'>): InstanceDemand {
  return { memoryMb: 0, cpuCores: options.cpuCores, cpuLimitNode: options.cpuLimitNode, diskBytes: INSTALL_MIN_FREE_BYTES.computeDatadir };
}

/**
 * How many instances of `diskBytes` fit in the free space last measured on the machine's data
 * directory, and its wording; undefined when nothing was measured there.
 */
function diskRoom(machine: MachineRecord, diskBytes: number): { room: number; short: string } | undefined {
  const storage = machine.machineType === 'storage';
  const dir = storage ? machine.datadir : machine.compDatadir;
  // The directory name came from a client: read as an own key only.
  const free = own(machine.facts?.freeDiskBytes, dir);
  if (free === undefined || diskBytes <= 0) return undefined;
  const when = machine.facts?.measuredAt === undefined ? 'at registration' : `at ${new Date(machine.facts.measuredAt).toISOString()}`;
  const per = storage ? `${formatBytes(diskBytes)} per storage node (max_storage_size)` : `${formatBytes(diskBytes)} per compute node`;
  return { room: Math.floor(free / diskBytes), short: `disk: ${per}, its ${storage ? 'datadir' : 'comp_datadir'} ${dir} had ${formatBytes(free)} free when measured ${when}` };
}

/** Memory and quota cores the instances already on a machine take (its type's instances only). */
function machineUse(state: MetaState, hostaddr: string, machineType: MachineType): { memoryMb: number; quotaCores: number } {
  const use = { memoryMb: 0, quotaCores: 0 };
  for (const cluster of Object.values(state.clusters)) {
    const here =
      machineType === 'storage'
        ? Object.values(cluster.shards).reduce((n, shard) => n + Object.values(shard.nodes).filter((node) => node.hostaddr === hostaddr).length, 0)
        : Object.values(cluster.comps).filter((comp) => comp.hostaddr === hostaddr).length;
    const demand = machineType === 'storage' ? storageDemand(cluster.options) : computeDemand(cluster.options);
    use.memoryMb += here * demand.memoryMb;
    if (demand.cpuLimitNode === 'quota') use.quotaCores += here * demand.cpuCores;
  }
  return use;
}

/** How many instances of `demand` fit in the machine's memory and cores, and what limits it. */
function resourceRoom(state: MetaState, machine: MachineRecord, demand: InstanceDemand): { room: number; short: string } {
  const what = machine.machineType === 'storage' ? 'storage node' : 'compute node';
  if (demand.cpuCores > machine.totalCpuCores) {
    return { room: 0, short: `cpu_cores ${demand.cpuCores} per ${what} is more than its ${machine.totalCpuCores} cores (total_cpu_cores)` };
  }
  const use = machineUse(state, machine.hostaddr, machine.machineType);
  const limits: { room: number; short: string }[] = [];
  if (demand.memoryMb > 0) {
    const free = Math.max(0, machine.totalMemMb - use.memoryMb);
    limits.push({ room: Math.floor(free / demand.memoryMb), short: `memory: ${demand.memoryMb} MB innodb_size per ${what}, ${free} MB of its ${machine.totalMemMb} MB total_mem free` });
  }
  if (demand.cpuLimitNode === 'quota') {
    const free = Math.max(0, machine.totalCpuCores - use.quotaCores);
    limits.push({ room: Math.floor(free / demand.cpuCores), short: `cores: a quota of ${demand.cpuCores} per ${what}, ${free} of its ${machine.totalCpuCores} cores (total_cpu_cores) not under a quota yet` });
  }
  const disk = diskRoom(machine, demand.diskBytes ?? 0);
  if (disk) limits.push(disk);
  return limits.sort((a, b) => a.room - b.room)[0] ?? { room: Number.POSITIVE_INFINITY, short: '' };
}

/**
 * The running machines of `machineType` a request may use. Every address of a non-empty
 * iplist must be a registered, running machine of that type; the error names the entry.
 */
export function candidatesFor(state: MetaState, machineType: MachineType, iplist: readonly string[], field: string, demand: InstanceDemand): Candidate[] {
  const seen = new Set<string>();
  const hosts: string[] = [];
  iplist.forEach((hostaddr, i) => {
    const at = `paras.${field}[${i}]`;
    const machine = state.machines[`${hostaddr}/${machineType}`];
    if (!machine) throw KcmError.of('NOT_FOUND', `${at}: ${hostaddr} is not registered as a ${machineType} machine`, { field: at });
    if (machine.nodeStats !== 'running') throw KcmError.of('NO_RESOURCES', `${at}: machine ${hostaddr} is ${machine.nodeStats}, not running`, { field: at });
    if (!seen.has(hostaddr)) hosts.push(hostaddr);
    seen.add(hostaddr);
  });
  if (iplist.length === 0) {
    for (const m of Object.values(state.machines)) {
      if (m.machineType === machineType && m.nodeStats === 'running') hosts.push(m.hostaddr);
    }
    hosts.sort();
  }
  if (hosts.length === 0) {
    throw KcmError.of('NO_RESOURCES', `paras.${field}: no running ${machineType} machine is registered`, { field: `paras.${field}` });
  }
  return hosts.map((hostaddr) => {
    const freePorts = freePortCount(state, hostaddr, machineType);
    const resources = resourceRoom(state, state.machines[machineKey(hostaddr, machineType)], demand);
    return {
      hostaddr,
      freePorts,
      room: Math.min(freePorts, resources.room),
      short: resources.room < freePorts ? resources.short : '',
      load: Object.keys(state.ports[hostaddr] ?? {}).length,
      masters: machineType === 'storage' ? mastersOn(state, hostaddr) : 0,
      rack: state.machines[machineKey(hostaddr, machineType)].rackId,
    };
  });
}

function mastersOn(state: MetaState, hostaddr: string): number {
  let n = 0;
  for (const cluster of Object.values(state.clusters)) {
    for (const shard of Object.values(cluster.shards)) if (shard.nodes[shard.masterNodeId]?.hostaddr === hostaddr) n++;
  }
  return n;
}

export interface ShardPlacement {
  /** Hosts of the shard's nodes; the first is the master. */
  hosts: string[];
  /** False when two replicas share a machine because there were too few machines. */
  spread: boolean;
}

/**
 * Picks a candidate with room, in this order of preference: a host not in `avoid`, a rack
 * not in `avoidRacks`, for a shard's master (`forMaster`) the fewest masters, the least load.
 */
function pick(pool: Candidate[], avoid: Set<string>, forMaster = false, avoidRacks: Set<string> = new Set()): { candidate: Candidate; distinct: boolean } | undefined {
  const usable = pool.filter((c) => c.room > 0);
  const rank = (c: Candidate) => [avoid.has(c.hostaddr) ? 1 : 0, avoidRacks.has(rackOf(c)) ? 1 : 0, forMaster ? (c.masters ?? 0) : 0, c.load, pool.indexOf(c)];
  const better = (a: Candidate, b: Candidate) => {
    const [ra, rb] = [rank(a), rank(b)];
    for (let i = 0; i < ra.length; i++) if (ra[i] !== rb[i]) return ra[i] - rb[i];
    return 0;
  };
  const best = usable.sort(better)[0];
  return best ? { candidate: best, distinct: !avoid.has(best.hostaddr) } : undefined;
}

const rackOf = (c: Candidate) => c.rack ?? `host:${c.hostaddr}`;

function take(c: Candidate): string {
  c.freePorts--;
  c.room--;
  c.load++;
  return c.hostaddr;
}

function totalRoom(pool: Candidate[]): number {
  return pool.reduce((n, c) => n + c.room, 0);
}

/**
 * NO_RESOURCES when the pool has room for fewer than `needed` instances. The message names
 * the free ports, or, when memory or cores are what is short, each machine and what it lacks.
 */
function requireRoom(pool: Candidate[], needed: number, what: string, field: string): void {
  const room = totalRoom(pool);
  if (room >= needed) return;
  const short = pool.filter((c) => c.short);
  const detail =
    short.length === 0
      ? `have ${room} free ports`
      : `have room for ${room}: ${short.map((c) => `${c.hostaddr} takes ${c.room} more (${c.short})`).join('; ')}`;
  throw KcmError.of('NO_RESOURCES', `paras.${field}: ${needed} ${what} are needed but the candidate machines (${pool.map((c) => c.hostaddr).join(', ')}) ${detail}`, {
    field: `paras.${field}`,
  });
}

/**
 * Hosts for `shards` new shards of `nodesPerShard` nodes each. Consumes the candidates'
 * free ports, so a later call on the same candidates sees what this one took.
 */
export function placeShards(pool: Candidate[], shards: number, nodesPerShard: number, field: string): ShardPlacement[] {
  requireRoom(pool, shards * nodesPerShard, 'storage nodes', field);
  const placements: ShardPlacement[] = [];
  for (let s = 0; s < shards; s++) {
    const inShard = new Set<string>();
    const racksInShard = new Set<string>();
    const placement: ShardPlacement = { hosts: [], spread: true };
    for (let n = 0; n < nodesPerShard; n++) {
      const chosen = pick(pool, inShard, n === 0, racksInShard)!; // enough room in total: never undefined
      if (!chosen.distinct) placement.spread = false;
      if (n === 0) chosen.candidate.masters = (chosen.candidate.masters ?? 0) + 1;
      inShard.add(chosen.candidate.hostaddr);
      racksInShard.add(rackOf(chosen.candidate));
      placement.hosts.push(take(chosen.candidate));
    }
    placements.push(placement);
  }
  return placements;
}

/**
 * Hosts for `count` new nodes of one existing shard whose nodes are on `shardHosts`: a
 * machine that holds none of the shard's replicas yet is preferred (add_nodes). Consumes
 * the candidates' free ports like placeShards.
 */
export function placeNodesInShard(pool: Candidate[], shardHosts: readonly string[], count: number, field: string): ShardPlacement {
  requireRoom(pool, count, 'storage nodes', field);
  const inShard = new Set(shardHosts);
  const racksInShard = new Set(pool.filter((c) => inShard.has(c.hostaddr)).map(rackOf));
  const placement: ShardPlacement = { hosts: [], spread: true };
  for (let n = 0; n < count; n++) {
    const chosen = pick(pool, inShard, false, racksInShard)!;
    if (!chosen.distinct) placement.spread = false;
    inShard.add(chosen.candidate.hostaddr);
    racksInShard.add(rackOf(chosen.candidate));
    placement.hosts.push(take(chosen.candidate));
  }
  return placement;
}

/** Hosts for `count` new compute nodes, spread over the candidates. */
export function placeComps(pool: Candidate[], count: number, field: string): string[] {
  requireRoom(pool, count, 'compute nodes', field);
  const used = new Set<string>();
  const hosts: string[] = [];
  for (let i = 0; i < count; i++) {
    const chosen = pick(pool, used)!;
    used.add(chosen.candidate.hostaddr);
    hosts.push(take(chosen.candidate));
  }
  return hosts;
}

/**
 * Candidates of both types share a host's load: placing storage nodes first must make the
 * compute nodes prefer other hosts. Call after placeShards with the storage pool.
 */
export function carryLoad(from: Candidate[], to: Candidate[]): void {
  for (const c of to) {
    const same = from.find((f) => f.hostaddr === c.hostaddr);
    if (same) c.load = Math.max(c.load, same.load);
  }
}

/**
 * Which placement rules a cluster meets, in words (create_cluster's `placement`): masters on
 * distinct machines; each shard's replicas on distinct racks when the registered running
 * storage machines span enough racks, on distinct machines otherwise.
 */
export function placementReport(cluster: ClusterRecord, state: MetaState): string {
  const shards = Object.values(cluster.shards);
  const rackOfHost = (h: string) => state.machines[machineKey(h, 'storage')]?.rackId ?? `host:${h}`;
  const racksAvailable = new Set(Object.values(state.machines).filter((m) => m.machineType === 'storage' && m.nodeStats === 'running').map((m) => m.rackId)).size;
  const unmet: string[] = [];
  const mastersByHost = new Map<string, string[]>();
  for (const shard of shards) {
    const master = shard.nodes[shard.masterNodeId];
    if (master) mastersByHost.set(master.hostaddr, [...(mastersByHost.get(master.hostaddr) ?? []), shard.name]);
  }
  for (const [host, names] of mastersByHost) if (names.length > 1) unmet.push(`the masters of ${names.join(', ')} share machine ${host} (fewer storage machines with room than shards)`);
  for (const shard of shards) {
    const hosts = Object.values(shard.nodes).map((n) => n.hostaddr);
    const racks = new Set(hosts.map(rackOfHost));
    if (new Set(hosts).size < hosts.length) unmet.push(`${shard.name} has more than one replica on one machine (too few storage machines with room)`);
    else if (racksAvailable >= hosts.length && racks.size < hosts.length) unmet.push(`${shard.name} has more than one replica in one rack (the racks with room were too few)`);
  }
  if (unmet.length > 0) return `not met: ${unmet.join('; ')}`;
  const replicas = racksAvailable >= Math.max(0, ...shards.map((s) => Object.keys(s.nodes).length)) ? 'distinct racks' : `distinct machines (${racksAvailable} rack(s) registered: too few to spread replicas over racks)`;
  return `every shard's master on its own machine; every shard's replicas on ${replicas}`;
}
