// What MariaDbAgent.Probe and PostgresAgent.ProbePostgres answer for one instance, in one
// place: those handlers and HostProbeAgent.ProbeHost (./index.ts) measure the same way, so
// the per-host answer cannot drift from the per-instance one.

import type { MariaDbProbeReply, ProbePostgresReply } from '@kcm/agent-api';
import type { AgentContext } from '../../capability';
import type { InstanceRegistry } from '../postgres/layout';
import { probeInstance } from '../mariadb/instance/probe';
import { probePostgres } from '../postgres/probe';

/** The instance as measured now, with how often the supervisor restarted it and what it keeps it doing. */
export async function mariadbProbeReply(ctx: AgentContext, port: number): Promise<MariaDbProbeReply> {
  return { ...(await probeInstance(ctx, port)), ...(await supervisionReport(ctx, 'mariadb', port)) };
}

export async function postgresProbeReply(ctx: AgentContext, registry: InstanceRegistry, port: number): Promise<ProbePostgresReply> {
  return { ...(await probePostgres(registry, port)), ...(await supervisionReport(ctx, 'postgres', port)) };
}

async function supervisionReport(ctx: AgentContext, kind: 'mariadb' | 'postgres', port: number): Promise<{ supervisor_restarts: number; desired_state: string }> {
  const { restarts, desired } = await ctx.supervisor.restarts(kind, port);
  return { supervisor_restarts: restarts, desired_state: desired };
}
