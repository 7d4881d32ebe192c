// The HostProbeAgent service (proto/agent-host-probe.proto): every instance the manager names
// on this host measured in one call, each exactly as its own probe measures it
// (instance-probes.ts), a few at a time so a host with many instances does not open a
// connection to each at once. A probe that fails carries its error in its entry: the
// others still answer.

import path from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { eachAtMost } from '@kcm/common';
import { HostProbeAgentService, type HostMariaDbProbe, type HostPostgresProbe, type MariaDbProbeReply, type ProbeHostReply, type ProbeHostRequest, type ProbePostgresReply } from '@kcm/agent-api';
import type { AgentContext, CapabilityModule } from '../../capability';
import { unary } from '../../grpc-unary';
import { InstanceRegistry } from '../postgres/layout';
import { mariadbProbeReply, postgresProbeReply } from './instance-probes';

/** Instances measured at once on this host. */
export const HOST_PROBE_CONCURRENCY = 8;

const DEADLINE_MARGIN_MS = 300;

/** ms from now until a grpc deadline (a Date, ms since the epoch, or Infinity when none). */
function msUntil(deadline: grpc.Deadline): number {
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return at === Infinity ? Infinity : at - Date.now();
}

export interface ProbeHostOptions {
  concurrency?: number;
  /**
   * Answer by then (ms from now) with what is measured: an instance not measured in time gets
   * an error entry, as its own probe would have missed its deadline, instead of the whole
   * host's reply missing the caller's deadline because of one hung instance.
   */
  budgetMs?: number;
  /** The per-instance measurements (default: instance-probes.ts, what Probe and ProbePostgres answer); unit tests replace them. */
  probes?: { mariadb(port: number): Promise<MariaDbProbeReply>; postgres(port: number): Promise<ProbePostgresReply> };
}

export async function probeHost(ctx: AgentContext, registry: InstanceRegistry, req: ProbeHostRequest, opts: ProbeHostOptions = {}): Promise<ProbeHostReply> {
  const concurrency = opts.concurrency ?? HOST_PROBE_CONCURRENCY;
  const tasks: (() => Promise<void>)[] = [];
  const mariadb: HostMariaDbProbe[] = req.mariadb_ports.map((port) => ({ port, probe: null, error: '' }));
  const postgres: HostPostgresProbe[] = req.postgres_ports.map((port) => ({ port, probe: null, error: '' }));
  const probes = opts.probes ?? { mariadb: (port: number) => mariadbProbeReply(ctx, port), postgres: (port: number) => postgresProbeReply(ctx, registry, port) };
  for (const entry of mariadb) tasks.push(() => settle(entry, () => probes.mariadb(entry.port)));
  for (const entry of postgres) tasks.push(() => settle(entry, () => probes.postgres(entry.port)));
  const all = eachAtMost(concurrency, tasks, (task) => task());
  const budgetMs = opts.budgetMs ?? Infinity;
  if (budgetMs === Infinity) {
    await all;
    return { mariadb, postgres };
  }
  let timer: NodeJS.Timeout | undefined;
  const inTime = await Promise.race([all.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, budgetMs))))]);
  clearTimeout(timer);
  if (inTime) return { mariadb, postgres };
  // A copy: probes still running must not change the reply once it is sent.
  const unmeasured = <E extends { probe: unknown; error: string }>(e: E): E => (e.probe || e.error ? { ...e } : { ...e, error: `not measured within ${Math.round(budgetMs)} ms` });
  return { mariadb: mariadb.map(unmeasured), postgres: postgres.map(unmeasured) };
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
      ProbeHost: (call: grpc.ServerUnaryCall<ProbeHostRequest, ProbeHostReply>, callback: grpc.sendUnaryData<ProbeHostReply>) =>
        // The reply leaves a margin before the caller's deadline (the network, the caller's decoding).
        unary(log, 'HostProbe.ProbeHost', (req: ProbeHostRequest) => probeHost(ctx, registry, req, { budgetMs: msUntil(call.getDeadline()) - DEADLINE_MARGIN_MS }))(call, callback),
    });
  },
};
