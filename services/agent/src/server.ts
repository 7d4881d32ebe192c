// The agent's gRPC server: binds <hostaddr>:<port> and routes each rpc to its capability.
// The agent knows nothing of clusters; it executes commands on this host.

import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { KCM_VERSION, makePrivateDirSync, type Logger } from '@kcm/common';
import { AgentService, callerGuard, protocolServerGuard, serveBeats, serverCredentials, type HealthReply, type HostFactsRequest, type PrepareDirsRequest } from '@kcm/agent-api';
import { debianEnginePaths, hostFacts } from './capabilities/host-facts';
import { EngineCache } from './capabilities/engines/engine-cache';
import { Engines, type EngineDefaults } from './capabilities/engines/engines';
import { prepareDirs } from './capabilities/prepare-dirs';
import { capabilityModules } from './capabilities/index';
import type { AgentContext } from './capability';
import { OpLedger } from './ops/op-ledger';
import { DesiredStates } from './capabilities/desired-state';
import { InstanceSupervisor } from './capabilities/supervisor';
import { rejoinCgroup } from './capabilities/cgroup/rejoin';
import { unary } from './grpc-unary';
import { startPlane, type RunningPlane } from './plane/server';
import { createAgentMetrics } from './metrics/agent-metrics';
import { servingRecorder } from './metrics/transfers';
import { startMetricsListener, type RunningMetricsListener } from './metrics/metrics-listener';

/** The kcm release this agent reports in Health (its protocol travels in every reply's metadata). */
export const AGENT_VERSION = KCM_VERSION;

export interface AgentOptions {
  hostaddr: string;
  port: number;
  logger: Logger;
  /** The host-wide engine cache (capabilities/engines); default /var/cache/kcm/engines. */
  engineCacheDir?: string;
  /** Versions an install that names none gets; default the system-installed packages' versions. */
  engineDefaults?: EngineDefaults;
  /** The agent's own state directory; default /var/lib/kcm/agent-<hostaddr>. */
  stateDir?: string;
  /** How often the supervisor checks the instances wanted running (ms); default 1000. */
  superviseIntervalMs?: number;
  /**
   * The data plane's port (plane/server.ts); default the gRPC port + 1, where peers look for
   * it, or an ephemeral one when `port` is 0. Only with mutual TLS.
   */
  planePort?: number;
  /**
   * The plain-HTTP /metrics port on hostaddr (metrics/metrics-listener.ts); none when
   * undefined. kcm-agent's --metrics-port defaults it to the gRPC port + 2.
   */
  metricsPort?: number;
}

export interface RunningAgent {
  /** `host:port` actually bound. */
  address: string;
  /** `host:port` of the data plane; undefined without mutual TLS. */
  planeAddress?: string;
  /** `host:port` of /metrics; undefined when not asked for. */
  metricsAddress?: string;
  stop(): Promise<void>;
}

export async function startAgent(opts: AgentOptions): Promise<RunningAgent> {
  const startedAt = Date.now();
  const engines = new Engines(new EngineCache(opts.engineCacheDir), opts.engineDefaults);
  const stateDir = opts.stateDir ?? path.join('/var/lib/kcm', `agent-${opts.hostaddr}`);
  // It holds instance records and each MariaDB instance's admin secret: owner only.
  makePrivateDirSync(stateDir);
  const supervisor = new InstanceSupervisor({
    desired: new DesiredStates(path.join(stateDir, 'desired')),
    logger: opts.logger.child({ component: 'supervisor' }),
    intervalMs: opts.superviseIntervalMs,
    onRestarted: (kind, port, pid) => rejoinCgroup({ kind: kind === 'mariadb' ? 'mysql' : 'pg', hostaddr: opts.hostaddr, port }, pid),
  });
  const metrics = createAgentMetrics({ census: () => supervisor.census() });
  const ctx: AgentContext = { hostaddr: opts.hostaddr, logger: opts.logger, engines, stateDir, ops: new OpLedger(path.join(stateDir, 'ops')), supervisor };
  let address = `${opts.hostaddr}:${opts.port}`;
  const health = (): HealthReply => ({ hostaddr: opts.hostaddr, version: AGENT_VERSION, uptime_ms: Date.now() - startedAt, pid: process.pid });
  // Managers only, except agents' data-plane calls with a transfer ticket (tls/guard.ts); and
  // only callers of a kcm protocol this build talks to (protocol-version.ts: first, so every
  // reply, the guard's refusals included, states this agent's protocol).
  const protocolGuard = protocolServerGuard({ self: () => ({ kind: 'agent', name: address }), peerKind: 'manager', warn: (fields, msg) => opts.logger.warn(fields, msg) });
  // Last: a call the guards refused never reaches it; one they pass runs inside this agent's transfer recorder.
  const server = new grpc.Server({ interceptors: [protocolGuard, callerGuard({ kind: 'agent', self: () => address }), servingRecorder(metrics.received)] });
  server.addService(AgentService.service, {
    Health: unary<unknown, HealthReply>(opts.logger, 'Health', async () => health()),
    Watch: (call: Parameters<typeof serveBeats>[0]) => serveBeats(call, health),
    HostFacts: unary(opts.logger, 'HostFacts', (req: HostFactsRequest) => {
      metrics.noteDataDirs(req.dirs);
      return hostFacts(req.dirs, debianEnginePaths);
    }),
    PrepareDirs: unary(opts.logger, 'PrepareDirs', async (req: PrepareDirsRequest) => {
      const reply = await prepareDirs(req.dirs);
      metrics.noteDataDirs(req.dirs);
      opts.logger.info({ op_id: req.op_id, dirs: req.dirs, problems: reply.problems }, 'prepared directories');
      return reply;
    }),
  });
  for (const module of capabilityModules) module.register(server, ctx);
  const bindAddress = `${opts.hostaddr.includes(':') ? `[${opts.hostaddr}]` : opts.hostaddr}:${opts.port}`;
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(bindAddress, serverCredentials(), (err, bound) => (err ? reject(err) : resolve(bound)));
  });
  address = `${opts.hostaddr}:${port}`;
  opts.logger.info({ address }, 'agent listening');
  let plane: RunningPlane | undefined;
  try {
    plane = await startPlane({ hostaddr: opts.hostaddr, port: opts.planePort ?? (opts.port === 0 ? 0 : port + 1), self: () => address, ctx, onTransfer: (op, result, bytes) => metrics.observeTransfer(op, result, bytes) });
  } catch (err) {
    server.forceShutdown();
    throw new Error(`the data plane of ${address} cannot listen: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  let metricsListener: RunningMetricsListener | undefined;
  if (opts.metricsPort !== undefined) {
    try {
      metricsListener = await startMetricsListener({ hostaddr: opts.hostaddr, port: opts.metricsPort, registry: metrics.registry, logger: opts.logger });
    } catch (err) {
      await plane?.close();
      server.forceShutdown();
      throw new Error(`the metrics listener of ${address} cannot listen on port ${opts.metricsPort}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
  // After a host or agent restart, this first pass brings back what was running.
  supervisor.start();
  return {
    address,
    planeAddress: plane?.address,
    metricsAddress: metricsListener?.address,
    stop: async () => {
      await metricsListener?.close();
      await plane?.close();
      // No restart may begin once stopping; one under way gets a moment to finish, so a
      // server it spawns is not left behind by a caller that cleans up right after.
      await Promise.race([supervisor.stop(), new Promise((r) => setTimeout(r, 10_000).unref())]);
      await new Promise<void>((resolve) => {
        ctx.ops.close();
        server.tryShutdown(() => resolve());
        // Do not let a stuck in-flight call hold shutdown forever.
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2000).unref();
      });
    },
  };
}
