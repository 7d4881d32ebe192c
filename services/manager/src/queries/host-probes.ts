// How the cluster queries measure the instances of one host: one HostProbeAgent.ProbeHost
// call for all of them, or, when the agent is older than that service (UNIMPLEMENTED, during
// an upgrade), the per-instance probes it has always served. Either way each instance gets
// what its own probe answers: a MariaDB probe reply or undefined when it went unanswered; a
// compute node's status and restarts ('unknown' when unanswered or not installed).

import { isUnimplemented, type MariaDbProbeReply, type ProbePostgresReply, type Agents } from '@kcm/agent-api';
import type { InstanceStatus } from './cluster-status';
import type { HostMeasure, InstanceRef, Limit } from './instance-measurements';

export type CompProbe = { status: InstanceStatus; restarts: number };

/** After this long an agent that answered UNIMPLEMENTED is asked for ProbeHost again (it may have been upgraded). */
export const OLDER_AGENT_RECHECK_MS = 60_000;

export class HostProbes {
  /** Hosts whose agent has no ProbeHost, until when (ms of `now`) it is not asked again. */
  private readonly olderAgents = new Map<string, number>();

  constructor(private readonly agents: Agents, private readonly now: () => number = () => performance.now()) {}

  /** Every value in `refs` order: MariaDbProbeReply | undefined for 'mariadb', CompProbe for 'postgres'. */
  readonly measure: HostMeasure = async (host, refs, limit) => {
    if (this.servesProbeHost(host)) {
      try {
        const reply = await limit(() =>
          this.agents.hostProbe(host).probeHost({
            mariadb_ports: refs.filter((r) => r.kind === 'mariadb').map((r) => r.port),
            postgres_ports: refs.filter((r) => r.kind === 'postgres').map((r) => r.port),
          }),
        );
        const mariadb = new Map(reply.mariadb.map((m) => [m.port, m]));
        const postgres = new Map(reply.postgres.map((p) => [p.port, p]));
        return refs.map((r) => {
          const entry = r.kind === 'mariadb' ? mariadb.get(r.port) : postgres.get(r.port);
          // An entry with an error (or none) is what a failed per-instance probe would show.
          const probe = entry && !entry.error ? (entry.probe ?? undefined) : undefined;
          return r.kind === 'mariadb' ? probe : compProbeOf(probe as ProbePostgresReply | undefined);
        });
      } catch (err) {
        if (!isUnimplemented(err)) return refs.map(unanswered);
        this.olderAgents.set(host, this.now() + OLDER_AGENT_RECHECK_MS);
      }
    }
    return Promise.all(refs.map((r) => this.probeOne(host, r, limit)));
  };

  private servesProbeHost(host: string): boolean {
    // Fake agents of unit tests may serve only the per-instance probes.
    if (typeof this.agents.hostProbe !== 'function') return false;
    const until = this.olderAgents.get(host);
    if (until === undefined) return true;
    if (this.now() < until) return false;
    this.olderAgents.delete(host);
    return true;
  }

  private async probeOne(host: string, ref: InstanceRef, limit: Limit): Promise<unknown> {
    try {
      if (ref.kind === 'mariadb') return await limit(() => this.agents.mariadb(host).probe(ref.port));
      return compProbeOf(await limit(() => this.agents.postgresProbe(host).probe(ref.port)));
    } catch {
      return unanswered(ref);
    }
  }
}

const unanswered = (ref: InstanceRef): MariaDbProbeReply | CompProbe | undefined => (ref.kind === 'mariadb' ? undefined : compProbeOf(undefined));

/** A compute node's measured status from its probe: online when running and accepting queries. */
export function compProbeOf(probe: ProbePostgresReply | undefined): CompProbe {
  if (!probe?.installed) return { status: 'unknown', restarts: 0 };
  return { status: probe.running && probe.accepting ? 'online' : 'offline', restarts: probe.supervisor_restarts ?? 0 };
}
