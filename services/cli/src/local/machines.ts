// `kcm local up` registers every local agent's host as both a storage and a computer
// machine, so the fleet takes a create_cluster at once (tryLines prints one that works
// verbatim). Done through the Emit API like any client (create_machine), with a request_id
// per host and type: an `up` after a `down`, or a retry, never registers one twice, and a
// machine already registered (by an earlier `up` or by hand) is left as it is.

import type { ReplyEnvelope } from '@kcm/protocol';
import { createEmitClient } from '../http-client';
import { localEnvelope, waitForLocalJob } from './local-jobs';

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
  timeoutMs?: number;
}

/** Compute nodes' ports on a local host: apart from the storage range, so neither type starves the other. */
export const LOCAL_COMPUTER_PORT_RANGE = '56000-56999';

export function computerParas(storageParas: Record<string, string>): Record<string, string> {
  return { ...storageParas, machine_type: 'computer', port_range: LOCAL_COMPUTER_PORT_RANGE };
}

/** Lines for the operator: what is registered, or why not (never fatal for `up`). */
export async function registerLocalMachines(t: LocalMachinesTarget): Promise<string[]> {
  const client = createEmitClient({ url: t.url, fetch: t.fetch, timeoutMs: 10_000, token: t.token });
  const deadline = Date.now() + (t.timeoutMs ?? 60_000);
  const problems: string[] = [];
  let registered = 0;
  let already = 0;
  try {
    const summary = (await client.emit(localEnvelope('get_machine_summary', {}))).reply;
    const listed = ((summary.attachment ?? {}) as { list_machine?: { hostaddr: string; machine_types?: string[] }[] }).list_machine ?? [];
    const known = new Set(listed.flatMap((m) => (m.machine_types ?? []).map((type) => `${m.hostaddr}/${type}`)));
    const pending: { what: string; ack: ReplyEnvelope }[] = [];
    for (const machine of t.machines) {
      for (const paras of [machine.storageParas, computerParas(machine.storageParas)]) {
        const what = `${machine.hostaddr} (${paras.machine_type})`;
        if (known.has(`${machine.hostaddr}/${paras.machine_type}`)) {
          already++;
          continue;
        }
        const ack = (await client.emit(localEnvelope('create_machine', paras, { request_id: `kcm-local-machine-${machine.hostaddr}-${paras.machine_type}` }))).reply;
        if (ack.error_code !== '0') problems.push(`${what}: ${ack.error_info}`);
        else pending.push({ what, ack });
      }
    }
    for (const { what, ack } of pending) {
      const status = await waitForLocalJob(client, ack, deadline);
      if (status.status === 'done') registered++;
      else problems.push(`${what}: ${status.status === 'failed' ? status.error_info : `job ${ack.job_id} still ${status.status}`}`);
    }
  } catch (err) {
    problems.push(err instanceof Error ? err.message : String(err));
  }
  const lines = [`machines: ${registered} registered now, ${already} already registered (every local host as storage and computer)`];
  return problems.length === 0 ? lines : [...lines, ...problems.map((p) => `machine not registered: ${p}`)];
}

/** A create_cluster the local fleet takes as it is: 1 shard of 3 nodes (spread over the hosts) and 1 compute node, small-memory config. */
export const LOCAL_CREATE_CLUSTER_PARAS: Readonly<Record<string, unknown>> = Object.freeze({
  nick_name: 'demo', ha_mode: 'rbr', shards: '1', nodes: '3', comps: '1', max_storage_size: '1', max_connections: '100', cpu_cores: '1',
  cpu_limit_node: 'share', innodb_size: '128', rocksdb_block_cache_size_M: '0', dbcfg: '1', fullsync_level: '1', storage_iplists: [],
  computer_iplists: [], install_proxysql: '0',
});
