// Leader-only: the metadata says which instances a live cluster has and where; this checks
// that they actually run. Every few seconds it probes, through each host's agent, every
// storage and compute node of every ready cluster, and asks the agent to start (an
// idempotent Start) any whose server process is not running. Each agent also supervises
// its own instances; this is the backstop for what the agent does not know to keep
// running (an instance installed before supervision existed, or stopped by hand with an
// explicit Stop), and the one place that sees the desired state (the metadata) against
// the observed one.
//
// Left alone: clusters that are being created or deleted, and clusters with a job queued
// or running (a job may stop an instance on purpose); instances whose agent does not answer
// (the health monitor reports the host); instances the agent does not have (reported once).

import { randomUUID } from 'node:crypto';
import type { Logger } from '@kcm/common';
import type { ClusterRecord, MetaState } from '../meta/state';
import { heldByJob } from '../meta/clusters';
import { PeriodicRounds } from './periodic-rounds';

export const DEFAULT_RECONCILE_INTERVAL_MS = 5000;

/** The agent calls the reconciler needs (Agents provides them). */
export interface ReconcileAgents {
  mariadb(hostaddr: string): {
    probe(port: number): Promise<{ state: string; pid: number; reason: string }>;
    start(opId: string, port: number): Promise<{ pid: number }>;
  };
  postgresProbe(hostaddr: string): { probe(port: number): Promise<{ installed: boolean; running: boolean; problem: string }> };
  postgres(hostaddr: string): { start(opId: string, port: number): Promise<{ pid: number }> };
}

export interface ReconcilerOptions {
  store: { state(): MetaState };
  agents: ReconcileAgents;
  logger: Logger;
  intervalMs?: number;
}

/** One instance as the reconciler sees it. */
interface Placed {
  kind: 'storage node' | 'compute node';
  cluster: ClusterRecord;
  id: string;
  hostaddr: string;
  port: number;
}

type Observed = 'running' | 'down' | 'missing' | 'unreachable';

export class InstanceReconciler {
  private readonly loop: PeriodicRounds;
  /** Last observation per instance, so a lasting condition is logged once. */
  private readonly lastSeen = new Map<string, Observed>();
  /** Starts asked of agents since this member became leader (tests, logs). */
  startsRequested = 0;

  constructor(private readonly opts: ReconcilerOptions) {
    this.loop = new PeriodicRounds(() => this.reconcileRound(), opts.intervalMs ?? DEFAULT_RECONCILE_INTERVAL_MS);
  }

  start(): void {
    this.loop.start({ runAtOnce: true });
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One round over every live cluster; a round still under way is joined, not doubled. */
  reconcileAll(): Promise<void> {
    return this.loop.run();
  }

  private async reconcileRound(): Promise<void> {
    const state = this.opts.store.state();
    const leaving = awaitingRemoval(state);
    const placed = Object.values(state.clusters)
      .filter((c) => isSettled(state, c))
      .flatMap(instancesOf)
      .filter((p) => !leaving.has(`${p.hostaddr}:${p.port}`));
    await Promise.all(placed.map((p) => this.reconcile(p)));
  }

  private async reconcile(p: Placed): Promise<void> {
    const key = `${p.cluster.id}/${p.kind}/${p.id}`;
    const log = this.opts.logger.child({ cluster: p.cluster.name, [p.kind === 'storage node' ? 'node' : 'comp']: p.id, hostaddr: p.hostaddr, port: p.port });
    const { observed, reason } = await this.observe(p);
    const before = this.lastSeen.get(key);
    this.lastSeen.set(key, observed);
    if (observed === 'missing' && before !== 'missing') log.error({ reason }, `${p.kind} of a live cluster is not installed on its host`);
    if (observed === 'running' && before === 'down') log.info(`${p.kind} is running again`);
    if (observed !== 'down') return;
    const opId = `reconcile:${p.cluster.id}:${p.kind === 'storage node' ? 'node' : 'comp'}-${p.id}:${randomUUID()}`;
    log.warn({ reason }, `${p.kind} of a live cluster is not running; asking its agent to start it`);
    this.startsRequested++;
    try {
      const reply = p.kind === 'storage node' ? await this.opts.agents.mariadb(p.hostaddr).start(opId, p.port) : await this.opts.agents.postgres(p.hostaddr).start(opId, p.port);
      log.warn({ pid: reply.pid, op_id: opId }, `${p.kind} started by the reconciler`);
    } catch (err) {
      log.error({ err, op_id: opId }, `${p.kind} could not be started; will try again next round`);
    }
  }

  private async observe(p: Placed): Promise<{ observed: Observed; reason: string }> {
    try {
      if (p.kind === 'storage node') {
        const probe = await this.opts.agents.mariadb(p.hostaddr).probe(p.port);
        if (probe.state === 'unknown') return { observed: 'missing', reason: probe.reason };
        // A process that is alive but not answering may be recovering: only a missing one is started.
        return { observed: probe.state === 'offline' && probe.pid === 0 ? 'down' : 'running', reason: probe.reason };
      }
      const probe = await this.opts.agents.postgresProbe(p.hostaddr).probe(p.port);
      if (!probe.installed) return { observed: 'missing', reason: probe.problem };
      return { observed: probe.running ? 'running' : 'down', reason: probe.problem };
    } catch (err) {
      return { observed: 'unreachable', reason: (err as Error).message };
    }
  }
}

/** A ready cluster no job is working on (a drill's scratch cluster never is): its instances should all be running. */
function isSettled(state: MetaState, cluster: ClusterRecord): boolean {
  return cluster.status === 'ready' && !heldByJob(state, cluster);
}

/**
 * Instances a failed job's recorded rollback is still to remove (see rollback-finisher.ts):
 * they stay in their cluster's record only to hold their ports, and must never be started again.
 */
function awaitingRemoval(state: MetaState): Set<string> {
  return new Set(Object.values(state.pendingRollbacks).flatMap((r) => r.instances.map((i) => `${i.hostaddr}:${i.port}`)));
}

function instancesOf(cluster: ClusterRecord): Placed[] {
  // A fenced old master is not started here: it would come back writable-looking to no one's
  // plan; the failure detector's shard_rejoin starts it read-only and re-attaches it.
  const nodes = Object.values(cluster.shards).flatMap((s) => Object.values(s.nodes)).filter((n) => !n.fenced);
  return [
    ...nodes.map((n): Placed => ({ kind: 'storage node', cluster, id: n.id, hostaddr: n.hostaddr, port: n.port })),
    ...Object.values(cluster.comps).map((c): Placed => ({ kind: 'compute node', cluster, id: c.id, hostaddr: c.hostaddr, port: c.port })),
  ];
}
