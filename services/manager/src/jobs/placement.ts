// Where new instances go. Pure functions over the replicated state, shared by every job
// that adds instances (create_cluster, add_shards, add_nodes, add_comps): the job computes
// a placement, and the apply of its command checks it again and assigns the ports.
//
// Rules: only `running` machines of the right type are candidates (from the request's
// iplist, or every registered one when the list is empty); a shard's replicas go to
// distinct machines when there are enough, and the result says which shards could not be
// spread; among equal choices the machine with the fewest instances wins.

import { KcmError } from '@kcm/protocol';
import { freePortCount } from '../meta/clusters';
import type { MachineType, MetaState } from '../meta/state';

export interface Candidate {
  hostaddr: string;
  /** Ports still free in this machine's range: how many more instances it can take. */
  freePorts: number;
  /** Instances already on the host (any type): placement prefers the least loaded. */
  load: number;
}

/**
 * The running machines of `machineType` a request may use. Every address of a non-empty
 * iplist must be a registered, running machine of that type; the error names the entry.
 */
export function candidatesFor(state: MetaState, machineType: MachineType, iplist: readonly string[], field: string): Candidate[] {
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
  return hosts.map((hostaddr) => ({
    hostaddr,
    freePorts: freePortCount(state, hostaddr, machineType),
    load: Object.keys(state.ports[hostaddr] ?? {}).length,
  }));
}

export interface ShardPlacement {
  /** Hosts of the shard's nodes; the first is the master. */
  hosts: string[];
  /** False when two replicas share a machine because there were too few machines. */
  spread: boolean;
}

/** Picks the least loaded candidate with a free port, preferring hosts not in `avoid`. */
function pick(pool: Candidate[], avoid: Set<string>): { candidate: Candidate; distinct: boolean } | undefined {
  const usable = pool.filter((c) => c.freePorts > 0);
  const byLoad = (a: Candidate, b: Candidate) => a.load - b.load || pool.indexOf(a) - pool.indexOf(b);
  const fresh = usable.filter((c) => !avoid.has(c.hostaddr)).sort(byLoad)[0];
  if (fresh) return { candidate: fresh, distinct: true };
  const any = usable.sort(byLoad)[0];
  return any ? { candidate: any, distinct: false } : undefined;
}

function take(c: Candidate): string {
  c.freePorts--;
  c.load++;
  return c.hostaddr;
}

function totalFree(pool: Candidate[]): number {
  return pool.reduce((n, c) => n + c.freePorts, 0);
}

/**
 * Hosts for `shards` new shards of `nodesPerShard` nodes each. Consumes the candidates'
 * free ports, so a later call on the same candidates sees what this one took.
 */
export function placeShards(pool: Candidate[], shards: number, nodesPerShard: number, field: string): ShardPlacement[] {
  const needed = shards * nodesPerShard;
  if (totalFree(pool) < needed) {
    throw KcmError.of(
      'NO_RESOURCES',
      `paras.${field}: ${needed} storage nodes are needed but the candidate machines (${pool.map((c) => c.hostaddr).join(', ')}) have ${totalFree(pool)} free ports`,
      { field: `paras.${field}` },
    );
  }
  const placements: ShardPlacement[] = [];
  for (let s = 0; s < shards; s++) {
    const inShard = new Set<string>();
    const placement: ShardPlacement = { hosts: [], spread: true };
    for (let n = 0; n < nodesPerShard; n++) {
      const chosen = pick(pool, inShard)!; // enough free ports in total: never undefined
      if (!chosen.distinct) placement.spread = false;
      inShard.add(chosen.candidate.hostaddr);
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
  if (totalFree(pool) < count) {
    throw KcmError.of(
      'NO_RESOURCES',
      `paras.${field}: ${count} storage nodes are needed but the candidate machines (${pool.map((c) => c.hostaddr).join(', ')}) have ${totalFree(pool)} free ports`,
      { field: `paras.${field}` },
    );
  }
  const inShard = new Set(shardHosts);
  const placement: ShardPlacement = { hosts: [], spread: true };
  for (let n = 0; n < count; n++) {
    const chosen = pick(pool, inShard)!;
    if (!chosen.distinct) placement.spread = false;
    inShard.add(chosen.candidate.hostaddr);
    placement.hosts.push(take(chosen.candidate));
  }
  return placement;
}

/** Hosts for `count` new compute nodes, spread over the candidates. */
export function placeComps(pool: Candidate[], count: number, field: string): string[] {
  if (totalFree(pool) < count) {
    throw KcmError.of(
      'NO_RESOURCES',
      `paras.${field}: ${count} compute nodes are needed but the candidate machines (${pool.map((c) => c.hostaddr).join(', ')}) have ${totalFree(pool)} free ports`,
      { field: `paras.${field}` },
    );
  }
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

const GB = 2 ** 30;

/**
 * max_storage_size (GB per storage node) against the free space each machine's agent
 * reported for its datadir (DESIGN.md section 2: a placement check, not a quota). A machine
 * whose free space is unknown is not refused.
 */
export function checkStorageSpace(state: MetaState, hosts: string[], maxStorageSizeGb: number, field = 'max_storage_size'): void {
  const perHost = new Map<string, number>();
  for (const h of hosts) perHost.set(h, (perHost.get(h) ?? 0) + 1);
  for (const [hostaddr, nodes] of perHost) {
    const machine = state.machines[`${hostaddr}/storage`];
    const free = machine?.facts?.freeDiskBytes[machine.datadir];
    if (free === undefined) continue;
    const needed = nodes * maxStorageSizeGb * GB;
    if (free < needed) {
      throw KcmError.of(
        'NO_RESOURCES',
        `paras.${field}: ${nodes} storage node(s) of ${maxStorageSizeGb} GB need ${nodes * maxStorageSizeGb} GB on ${hostaddr}, but its datadir ${machine.datadir} had ${(free / GB).toFixed(1)} GB free when last measured`,
        { field: `paras.${field}` },
      );
    }
  }
}
