// Pointing every compute node's foreign server for the shards at their masters as the
// metadata names them now (after the topology commit): SyncCatalog on each, retried until
// each has it. A failover is not done while any compute node still routes to the old master.
// A failover then closes every connection the compute hosts still hold to the old master
// (CutConnectionsTo): a session waiting on it (a statement in flight when it was cut off, or
// a connection still being opened) fails now instead of being answered when, if ever, the old
// master's reply gets through.

import { randomUUID } from 'node:crypto';
import { KcmError } from '@kcm/protocol';
import type { Agents } from '@kcm/agent-api';
import type { ClusterRecord } from '../../meta/state';
import { shardEndpoints } from '../instance-ops';
import type { SecretBox } from '../../secrets/secret-box';

export const REPOINT_COMPUTES_WITHIN_MS = 60_000;

export interface ComputeRepointOutcome {
  comps: { comp_id: string; hostaddr: string; port: number; servers_changed: string[]; attempts: number }[];
  /** Per compute host, the connections to the old master closed, or why they could not be (failover only). */
  connections_cut?: Record<string, string>;
}

export async function repointComputes(
  agents: Agents,
  secrets: SecretBox,
  jobId: string,
  cluster: () => ClusterRecord,
  signal: AbortSignal,
  opts: { withinMs?: number; /** A failover's old master: the compute hosts' connections to it are closed after. */ oldMaster?: { hostaddr: string; port: number } } = {},
): Promise<ComputeRepointOutcome> {
  const { withinMs = REPOINT_COMPUTES_WITHIN_MS, oldMaster } = opts;
  const deadline = Date.now() + withinMs;
  const comps = Object.values(cluster().comps);
  const done = await Promise.all(
    comps.map(async (comp) => {
      let attempts = 0;
      for (;;) {
        attempts++;
        try {
          // Read each time: what is synced is the topology as committed now.
          const reply = await agents.postgres(comp.hostaddr).syncCatalog(`job:${jobId}:repoint:comp-${comp.id}:${randomUUID()}`, comp.port, shardEndpoints(secrets, cluster()));
          return { comp_id: comp.id, hostaddr: comp.hostaddr, port: comp.port, servers_changed: reply.servers_changed, attempts };
        } catch (err) {
          if (signal.aborted || Date.now() > deadline) {
            throw KcmError.of('AGENT_UNREACHABLE', `compute node ${comp.hostaddr}:${comp.port} could not be re-pointed within ${withinMs} ms: ${(err as Error).message}`, { cause: err });
          }
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    }),
  );
  if (!oldMaster) return { comps: done };
  const cut: Record<string, string> = Object.create(null);
  await Promise.all(
    [...new Set(comps.map((c) => c.hostaddr))].map(async (host) => {
      // Best effort: a compute host that cannot be asked keeps its sessions' own fate (their
      // statement fails once the old master's host answers again: it was killed or fenced).
      cut[host] = await agents.mariadbHa(host).cutConnectionsTo(oldMaster.hostaddr, oldMaster.port).then(
        (r) => `${r.closed} closed`,
        (err: Error) => `not cut: ${err.message}`,
      );
    }),
  );
  return { comps: done, connections_cut: cut };
}
