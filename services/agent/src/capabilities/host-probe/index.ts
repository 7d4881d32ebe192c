// The HostProbeAgent service (proto/agent-host-probe.proto): every instance the manager names
// on this host measured in one call, each exactly as its own probe measures it
// (instance-probes.ts), a few at a time so a host with many instances does not open a
// connection to each at once. A probe that fails carries its error in its entry: the
// others still answer.

import path from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { HostProbeAgentService, type HostMariaDbProbe, type HostPostgresProbe, type ProbeHostReply, type ProbeHostRequest } from '@kcm/agent-api';
import type { AgentContext, CapabilityModule } from '../../capability';
import { unary } from '../../grpc-unary';
import { InstanceRegistry } from '../postgres/layout';
import { mariadbProbeReply, postgresProbeReply } from './instance-probes';

/** Instances measured at once on this host. */
export const HOST_PROBE_CONCURRENCY = 8;

export async function probeHost(ctx: AgentContext, registry: InstanceRegistry, req: ProbeHostRequest, concurrency = HOST_PROBE_CONCURRENCY): Promise<ProbeHostReply> {
  const tasks: (() => Promise<void>)[] = [];
  const mariadb: HostMariaDbProbe[] = req.mariadb_ports.map((port) => ({ port, probe: null, error: '' }));
  const postgres: HostPostgresProbe[] = req.postgres_ports.map((port) => ({ port, probe: null, error: '' }));
  for (const entry of mariadb) tasks.push(() => settle(entry, () => mariadbProbeReply(ctx, entry.port)));
  for (const entry of postgres) tasks.push(() => settle(entry, () => postgresProbeReply(ctx, registry, entry.port)));
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await tasks[next++]();
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, tasks.length) }, worker));
  return { mariadb, postgres };
}

async function settle<P>(entry: { probe: P | null; error: string }, measure: () => Promise<P>): Promise<void> {
  try {
    entry.probe = await measure();
  } catch (err) {
    entry.error = err instanceof Error ? err.message : String(err);
  }
}

export const hostProbeCapability: CapabilityModule = {
  name: 'host-probe',
  register(server: grpc.Server, ctx: AgentContext): void {
    const log = ctx.logger.child({ capability: 'host-probe' });
    // The same registry files the PostgresAgent service keeps (postgres/index.ts).
    const registry = new InstanceRegistry(path.join(ctx.stateDir, 'postgres'));
    server.addService(HostProbeAgentService.service, {
      ProbeHost: unary(log, 'HostProbe.ProbeHost', (req: ProbeHostRequest) => probeHost(ctx, registry, req)),
    });
  },
};
