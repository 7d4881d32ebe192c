// Leader-only: fencing by lease, the leader's half (the agent's half, and why:
// services/agent/src/capabilities/mariadb/ha/master-lease.ts).
//
// Every interval the leader renews, on each host, its lease on the host's shard masters
// (every cluster's, not fenced), naming each master's standbys. A master's agent that hears
// nothing for `leaseMs` fences the master itself unless its host reaches every standby.
// A failover whose old master's agent cannot be reached asks `msUntilLeaseEnds` and waits
// that long before it promotes: by then the old master is fenced, or it still reaches every
// standby (and then the standbys did not lose it: the detector would not have failed it).
//
// The end of a lease is counted from before the renewal was sent (the agent counts from
// when it arrived, later), on this process's monotonic clock. A member that has just become
// leader cannot know what its predecessor sent: a deposed leader stops renewing at the
// latest one election timeout after it lost its quorum (checkQuorum), which is no later
// than two election timeouts after this member's term began; until then every lease counts
// as renewed now.

import { performance } from 'node:perf_hooks';
import type { Logger } from '@kcm/common';
import type { Agents, MariaDbLeasedMaster } from '@kcm/agent-api';
import type { MetaStore } from '../meta/store';

/** A lease's length (ms): how long a master cut off from the managers and a standby keeps taking writes. */
export const DEFAULT_MASTER_LEASE_MS = 3_000;
/**
 * Beyond the lease, what a failover waits more (ms): the agent's look every 200 ms, its
 * 300 ms reach check of the standbys, the kill, and an event loop that runs late.
 */
export const LEASE_END_MARGIN_MS = 1_500;

export interface MasterLeaseClock {
  /** How long (ms, >= 0) until the lease on this node must have run out on its agent. */
  msUntilLeaseEnds(nodeId: string): number;
}

export interface MasterLeaseKeeperOptions {
  store: MetaStore;
  agents: Agents;
  logger: Logger;
  intervalMs: number;
  leaseMs?: number;
  /** Raft's longest election timeout (ms): how long a deposed leader may still renew. */
  electionTimeoutMs: number;
  /** Monotonic ms (tests). */
  now?: () => number;
  /** Wall-clock ms since the epoch (tests): the renewal's sent_at_ms. */
  wallClock?: () => number;
}

export class MasterLeaseKeeper implements MasterLeaseClock {
  private timer: NodeJS.Timeout | undefined;
  /** When the last renewal naming each node was sent (monotonic ms), by node id. */
  private readonly sentAt = new Map<string, number>();
  /** Hosts with a renewal in flight: one slow host does not hold up the others' renewals. */
  private readonly inFlight = new Set<string>();
  /** Hosts that had masters in the last round: they get one renewal naming none when they have none left. */
  private hostsWithMasters = new Set<string>();
  /** The hosts whose last renewal failed (logged once per outage). */
  private readonly failing = new Set<string>();
  private leaderSince = -Infinity;
  /** Renewals sent (tests, logs). */
  renewalsSent = 0;

  constructor(private readonly opts: MasterLeaseKeeperOptions) {}

  get leaseMs(): number {
    return this.opts.leaseMs ?? DEFAULT_MASTER_LEASE_MS;
  }

  private now(): number {
    return (this.opts.now ?? (() => performance.now()))();
  }

  start(): void {
    this.leaderSince = this.now();
    this.sentAt.clear();
    this.timer = setInterval(() => this.round(), this.opts.intervalMs);
    this.timer.unref();
    this.round();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  msUntilLeaseEnds(nodeId: string): number {
    // What a deposed leader may have sent counts as sent at the end of its grace.
    const last = Math.max(this.sentAt.get(nodeId) ?? -Infinity, this.leaderSince + 2 * this.opts.electionTimeoutMs);
    return Math.max(0, Math.ceil(last + this.leaseMs + LEASE_END_MARGIN_MS - this.now()));
  }

  /** One round: a renewal to every host with masters, each on its own (not awaited). */
  round(): void {
    const byHost = this.mastersByHost();
    for (const host of this.hostsWithMasters) if (!byHost.has(host)) byHost.set(host, { masters: [], nodeIds: [] });
    this.hostsWithMasters = new Set([...byHost].filter(([, v]) => v.masters.length > 0).map(([h]) => h));
    for (const [host, { masters, nodeIds }] of byHost) {
      if (this.inFlight.has(host)) continue;
      this.inFlight.add(host);
      const at = this.now();
      for (const id of nodeIds) this.sentAt.set(id, at);
      this.renewalsSent++;
      this.opts.agents
        .mariadbHa(host)
        .renewMasterLeases({ lease_ms: this.leaseMs, masters, sent_at_ms: (this.opts.wallClock ?? Date.now)() }, 2 * this.opts.intervalMs)
        .then(
          (reply) => {
            if (this.failing.delete(host)) this.opts.logger.info({ host }, 'master leases renewed again');
            if (reply.fenced_ports.length > 0) this.opts.logger.warn({ host, ports: reply.fenced_ports }, 'masters fenced by their agent when their lease ran out');
          },
          (err: Error) => {
            if (!this.failing.has(host)) this.opts.logger.warn({ host, err: err.message }, 'master lease renewal failed');
            this.failing.add(host);
          },
        )
        .finally(() => this.inFlight.delete(host));
    }
  }

  /** Every shard master that is not fenced, with its shard's standbys that are not fenced, by host. */
  private mastersByHost(): Map<string, { masters: MariaDbLeasedMaster[]; nodeIds: string[] }> {
    const byHost = new Map<string, { masters: MariaDbLeasedMaster[]; nodeIds: string[] }>();
    for (const cluster of Object.values(this.opts.store.state().clusters)) {
      for (const shard of Object.values(cluster.shards)) {
        const master = shard.nodes[shard.masterNodeId];
        if (!master || master.fenced) continue;
        const standbys = Object.values(shard.nodes).filter((n) => n.id !== master.id && !n.fenced).map((n) => `${n.hostaddr}:${n.port}`);
        let entry = byHost.get(master.hostaddr);
        if (!entry) byHost.set(master.hostaddr, (entry = { masters: [], nodeIds: [] }));
        entry.masters.push({ port: master.port, standbys });
        entry.nodeIds.push(master.id);
      }
    }
    return byHost;
  }
}
