// `kcm local up` registers every local agent's host as both a storage and a computer
// machine, so the fleet takes a create_cluster at once (tryLines prints one that works
// verbatim). Done through the Emit API like any client (create_machine), with a request_id
// per host and type: an `up` after a `down`, or a retry, never registers one twice, and a
// machine already registered (by an earlier `up` or by hand) is left as it is.

import { registerMachines } from '../deploy/register-machines';

export interface LocalMachine {
  hostaddr: string;
  /** create_machine paras of the host as a storage machine; the computer registration derives from it. */
  storageParas: Record<string, string>;
}

export interface LocalMachinesTarget {
  url: string;
  machines: readonly LocalMachine[];
  fetch?: typeof fetch;
  /** The deployment's admin token. */
  token?: string;
  /** The local CA (the managers serve HTTPS). */
  ca?: string | Buffer;
  timeoutMs?: number;
}

/** Compute nodes' ports on a local host: apart from the storage range, so neither type starves the other. */
export const LOCAL_COMPUTER_PORT_RANGE = '56000-56999';

export function computerParas(storageParas: Record<string, string>): Record<string, string> {
  return { ...storageParas, machine_type: 'computer', port_range: LOCAL_COMPUTER_PORT_RANGE };
}

/** Lines for the operator: what is registered, or why not (never fatal for `up`). The same registration as kcm deploy's. */
export async function registerLocalMachines(t: LocalMachinesTarget): Promise<string[]> {
  const outcome = await registerMachines({
    url: t.url,
    machines: t.machines.flatMap((m) => [m.storageParas, computerParas(m.storageParas)]),
    requestIdPrefix: 'kcm-local-machine',
    fetch: t.fetch,
    token: t.token,
    ca: t.ca,
    timeoutMs: t.timeoutMs,
  });
  const lines = [`machines: ${outcome.registered.length} registered now, ${outcome.already.length} already registered (every local host as storage and computer)`];
  return [...lines, ...outcome.problems.map((p) => `machine not registered: ${p}`)];
}

/** A create_cluster the local fleet takes as it is: 1 shard of 3 nodes (spread over the hosts) and 1 compute node, small-memory config. */
export const LOCAL_CREATE_CLUSTER_PARAS: Readonly<Record<string, unknown>> = Object.freeze({
  nick_name: 'demo', ha_mode: 'rbr', shards: '1', nodes: '3', comps: '1', max_storage_size: '1', max_connections: '100', cpu_cores: '1',
  cpu_limit_node: 'share', innodb_size: '128', rocksdb_block_cache_size_M: '0', dbcfg: '1', fullsync_level: '1', storage_iplists: [],
  computer_iplists: [], install_proxysql: '0',
});
