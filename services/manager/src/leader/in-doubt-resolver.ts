// Leader-only: ends the XA branches compute nodes left prepared (DESIGN.md section 12). A
// multi-shard transaction prepares its branches on the other shards, then commits its
// decision row on the coordinator shard (the gtrid `kcm:<coordinator shard id>:...` names
// it), then commits the branches. A compute node that crashes or loses its connections in
// between leaves branches prepared, holding their row locks, on shard masters.
//
// Every round, for every ready cluster, each shard master lists its kcm branches. A branch
// this leader has seen prepared for longer than `inDoubtAfterMs` is in doubt: its gtrid's
// decision is asked of the coordinator shard's current master (DecideXa: the recorded
// outcome, or `abort` written now when there is none; whoever writes the row first wins, so
// a coordinator committing at that moment is never contradicted), and every branch of the
// gtrid is committed or rolled back by it on the master holding it. A `pending` decision (the
// coordinator's own commit in flight) or an agent that does not answer: next round. A
// coordinator shard that is not in the metadata is left alone and logged as an error: no one
// knows the decision. First sightings are kept in memory only: a new leader counts again,
// which delays a resolution by at most one timeout.
//
// The writes are the agent's to guard: it refuses a read_only instance, so a stale master
// record (a failover not yet committed) makes a round fail and retry, never decide on a
// standby. A branch replicated to a standby is ended on it by the next rounds once it is
// promoted (prepared branches survive promotion on MariaDB 10.11, services/agent xa.ts).
//
// Decision rows are deleted once no branch can need them: when every master of a cluster
// answered a round, rows older than DECISION_ROWS_KEPT_S of gtrids prepared nowhere in it.

import { CALLS_STARTED_PER_TURN, eachAtMost, startInSlices, type Logger } from '@kcm/common';
import { coordinatorShardOf, type Agents, type MariaDbXaBranch } from '@kcm/agent-api';
import type { ClusterRecord, MetaState, ShardRecord, StorageNodeRecord } from '../meta/state';
import { PeriodicRounds } from './periodic-rounds';

export const DEFAULT_XA_RESOLVE_INTERVAL_MS = 1_000;
export const DEFAULT_XA_IN_DOUBT_AFTER_MS = 3_000;
/** A decision row is kept at least this long (s): a compute node still finishing reads none of it, but a branch on an unreachable master might. */
export const DECISION_ROWS_KEPT_S = 600;
/** A cluster's decision rows are pruned at most this often (ms). */
const PRUNE_EVERY_MS = 60_000;
/** In-doubt transactions of one cluster decided and ended at once. */
const RESOLVING_AT_ONCE = 8;
/** A condition that lasts (a branch left alone, an agent down) is logged again this often (ms). */
const RELOG_EVERY_MS = 60_000;

export type XaResolution = 'commit' | 'abort';

export interface InDoubtResolverOptions {
  store: { state(): MetaState };
  agents: Pick<Agents, 'mariadbHa'>;
  logger: Logger;
  intervalMs?: number;
  /** A branch seen prepared this long is in doubt (ms). */
  inDoubtAfterMs?: number;
  now?: () => number;
  /** Branches ended by the resolver, by outcome (the kcm_xa_in_doubt_resolved_total counter). */
  onResolved?(outcome: XaResolution, branches: number): void;
}

/** One cluster's branches in doubt after the latest round (the gauges). */
export interface InDoubtSummary {
  clusterId: string;
  branches: number;
  /** Age of its oldest branch still in doubt, from when this leader first saw it (s); 0 without any. */
  oldestSeconds: number;
}

interface SeenBranch extends MariaDbXaBranch {
  shard: ShardRecord;
  master: StorageNodeRecord;
  key: string;
}

export class InDoubtResolver {
  private readonly loop: PeriodicRounds;
  private readonly inDoubtAfterMs: number;
  /** When this leader first saw each branch prepared, by `cluster/shard gtrid bqual` (kept across a failover of the shard). */
  private readonly firstSeen = new Map<string, number>();
  private readonly lastPruned = new Map<string, number>();
  /** When a lasting condition was last logged, by what it is about. */
  private readonly lastLogged = new Map<string, number>();
  private summaries: InDoubtSummary[] = [];

  constructor(private readonly opts: InDoubtResolverOptions) {
    this.inDoubtAfterMs = opts.inDoubtAfterMs ?? DEFAULT_XA_IN_DOUBT_AFTER_MS;
    this.loop = new PeriodicRounds(() => this.round(), opts.intervalMs ?? DEFAULT_XA_RESOLVE_INTERVAL_MS);
  }

  start(): void {
    if (this.loop.started) return;
    this.firstSeen.clear();
    this.lastPruned.clear();
    this.lastLogged.clear();
    this.loop.start({ runAtOnce: true });
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    this.summaries = []; // a member that is not leader measures nothing
  }

  /** One round now (tests); a round under way is joined. */
  resolveAll(): Promise<void> {
    return this.loop.run();
  }

  /** Branches in doubt per ready cluster after the latest round (leader only; empty elsewhere). */
  inDoubt(): InDoubtSummary[] {
    return this.summaries;
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  private async round(): Promise<void> {
    const state = this.opts.store.state();
    const clusters = Object.values(state.clusters).filter((c) => c.status === 'ready' && !beingRestored(state, c.id));
    const summaries: InDoubtSummary[] = [];
    await startInSlices(CALLS_STARTED_PER_TURN, clusters, async (cluster) => {
      try {
        summaries.push(await this.resolveCluster(cluster));
      } catch (err) {
        this.opts.logger.error({ err, cluster: cluster.name }, 'in-doubt resolver: round failed for the cluster');
      }
    });
    // Sightings of shards gone from the metadata are forgotten; those of unanswered masters are kept.
    const current = new Set(clusters.flatMap((c) => Object.keys(c.shards).map((id) => `${c.id}/${id}`)));
    for (const key of this.firstSeen.keys()) if (!current.has(key.slice(0, key.indexOf(' ')))) this.firstSeen.delete(key);
    const now = this.now();
    for (const [about, at] of this.lastLogged) if (now - at > RELOG_EVERY_MS) this.lastLogged.delete(about);
    this.summaries = summaries.sort((a, b) => a.clusterId.localeCompare(b.clusterId));
  }

  private async resolveCluster(cluster: ClusterRecord): Promise<InDoubtSummary> {
    const shards = Object.values(cluster.shards);
    const lists = await Promise.all(shards.map((shard) => this.listBranches(cluster, shard)));
    const now = this.now();
    const byGtrid = new Map<string, SeenBranch[]>();
    lists.forEach((branches, i) => {
      if (!branches) return;
      const shardKey = `${cluster.id}/${shards[i].id}`;
      const listed = new Set<string>();
      for (const b of branches) {
        const key = `${shardKey} ${b.gtrid} ${b.bqual}`;
        listed.add(key);
        if (!this.firstSeen.has(key)) this.firstSeen.set(key, now);
        const seen: SeenBranch = { ...b, shard: shards[i], master: shards[i].nodes[shards[i].masterNodeId], key };
        byGtrid.set(b.gtrid, [...(byGtrid.get(b.gtrid) ?? []), seen]);
      }
      // Branches of this shard not listed any more were ended (by their compute node, or by us).
      for (const key of this.firstSeen.keys()) if (key.startsWith(`${shardKey} `) && !listed.has(key)) this.firstSeen.delete(key);
    });
    const inDoubt = [...byGtrid]
      .map(([gtrid, branches]) => ({ gtrid, branches, ageMs: now - Math.min(...branches.map((b) => this.firstSeen.get(b.key)!)) }))
      .filter((t) => t.ageMs >= this.inDoubtAfterMs);
    const left: SeenBranch[] = [];
    // A few at once: a pending decision takes the agent's lock wait (2 s) to say so.
    await eachAtMost(RESOLVING_AT_ONCE, inDoubt, async (t) => void left.push(...(await this.resolve(cluster, t.gtrid, t.branches, t.ageMs))));
    if (lists.every((l) => l !== undefined)) await this.prune(cluster, shards, [...byGtrid.keys()], now);
    const ages = left.map((b) => now - this.firstSeen.get(b.key)!);
    return { clusterId: cluster.id, branches: left.length, oldestSeconds: ages.length ? Math.max(...ages) / 1000 : 0 };
  }

  /** The shard master's kcm branches; undefined when it has no master or did not answer. */
  private async listBranches(cluster: ClusterRecord, shard: ShardRecord): Promise<MariaDbXaBranch[] | undefined> {
    const master = shard.nodes[shard.masterNodeId];
    if (!master) return undefined;
    try {
      const reply = await this.opts.agents.mariadbHa(master.hostaddr).listPreparedXa(master.port);
      if (reply.unreadable > 0) this.logLasting(`unreadable ${master.id}`, 'warn', { cluster: cluster.name, shard: shard.name, master: `${master.hostaddr}:${master.port}`, unreadable: reply.unreadable }, 'in-doubt resolver: XA branches with kcm\'s formatID but not its XID form are left alone');
      return reply.branches;
    } catch (err) {
      this.logLasting(`list ${master.id}`, 'warn', { err, cluster: cluster.name, shard: shard.name, master: `${master.hostaddr}:${master.port}` }, 'in-doubt resolver: cannot list the prepared XA branches of a shard master; next round');
      return undefined;
    }
  }

  /** Decides and ends one in-doubt transaction; returns its branches still in doubt. */
  private async resolve(cluster: ClusterRecord, gtrid: string, branches: SeenBranch[], ageMs: number): Promise<SeenBranch[]> {
    const where = (b: SeenBranch) => `${b.shard.name} ${b.bqual}`;
    const context = { cluster: cluster.name, clusterId: cluster.id, gtrid, ageMs, branches: branches.map(where) };
    const coordinatorId = coordinatorShardOf(gtrid);
    const coordinator = coordinatorId === undefined ? undefined : cluster.shards[coordinatorId];
    const coordinatorMaster = coordinator?.nodes[coordinator.masterNodeId];
    if (!coordinator || !coordinatorMaster) {
      // No decision can be read: committing could lose a rollback and rolling back a commit.
      this.logLasting(`orphan ${cluster.id} ${gtrid}`, 'error', { ...context, coordinatorShard: coordinatorId }, coordinator
        ? 'in-doubt XA transaction left prepared: its coordinator shard has no master in the metadata'
        : 'in-doubt XA transaction left prepared: its coordinator shard is not in the cluster\'s metadata; its row locks stay held until an operator ends it');
      return branches;
    }
    let decision;
    try {
      decision = await this.opts.agents.mariadbHa(coordinatorMaster.hostaddr).decideXa(coordinatorMaster.port, gtrid);
    } catch (err) {
      this.logLasting(`decide ${cluster.id} ${gtrid}`, 'warn', { ...context, err, coordinatorShard: coordinator.name }, 'in-doubt resolver: cannot read the decision on the coordinator shard\'s master; next round');
      return branches;
    }
    if (decision.outcome === 'pending') {
      this.opts.logger.info({ ...context, coordinatorShard: coordinator.name }, 'in-doubt resolver: the coordinator\'s decision is being written; next round');
      return branches;
    }
    const outcome = decision.outcome;
    const left: SeenBranch[] = [];
    const held: string[] = [];
    const failed: string[] = [];
    await Promise.all(
      branches.map(async (b) => {
        try {
          const reply = await this.opts.agents.mariadbHa(b.master.hostaddr).finishXa({ port: b.master.port, gtrid, bqual: b.bqual, commit: outcome === 'commit' });
          if (reply.held) {
            held.push(where(b));
            left.push(b);
          } else this.firstSeen.delete(b.key);
        } catch (err) {
          failed.push(`${where(b)}: ${err instanceof Error ? err.message : String(err)}`);
          left.push(b);
        }
      }),
    );
    const ended = branches.length - left.length;
    if (ended > 0) this.opts.onResolved?.(outcome, ended);
    const report = { ...context, coordinatorShard: coordinator.name, outcome, decidedNow: decision.decided_now, ended, held, failed };
    if (left.length === 0) this.opts.logger.warn(report, `in-doubt XA transaction resolved: ${outcome === 'commit' ? 'committed' : 'rolled back'} on every shard holding a branch`);
    else this.opts.logger.warn(report, `in-doubt XA transaction partly resolved (${outcome}); the rest next round`);
    return left;
  }

  private async prune(cluster: ClusterRecord, shards: ShardRecord[], preparedGtrids: string[], now: number): Promise<void> {
    if (now - (this.lastPruned.get(cluster.id) ?? -Infinity) < PRUNE_EVERY_MS) return;
    this.lastPruned.set(cluster.id, now);
    await Promise.all(
      shards.map(async (shard) => {
        const master = shard.nodes[shard.masterNodeId];
        try {
          const { deleted } = await this.opts.agents.mariadbHa(master.hostaddr).pruneXaDecisions({ port: master.port, older_than_seconds: DECISION_ROWS_KEPT_S, keep_gtrids: preparedGtrids });
          if (deleted > 0) this.opts.logger.debug({ cluster: cluster.name, shard: shard.name, deleted }, 'in-doubt resolver: old XA decision rows deleted');
        } catch (err) {
          this.opts.logger.debug({ err, cluster: cluster.name, shard: shard.name }, 'in-doubt resolver: decision rows not pruned; later');
        }
      }),
    );
  }

  /** Logs a condition that may last every round: when first seen, then every RELOG_EVERY_MS. */
  private logLasting(about: string, level: 'warn' | 'error', fields: object, message: string): void {
    const now = this.now();
    if (now - (this.lastLogged.get(about) ?? -Infinity) < RELOG_EVERY_MS) return;
    this.lastLogged.set(about, now);
    this.opts.logger[level](fields, message);
  }
}

/**
 * A destination of a queued or running cluster_restore (its jobs run in the cluster's run
 * queue): the restore's replay leaves branches prepared whose gtrids name the source's
 * coordinator shards, and its own step ends them by the restored decisions
 * (jobs/cluster-restore-xa.ts); the resolver would only call them orphans meanwhile. A
 * restore drill's scratch cluster likewise (its drill runs those steps, then deletes it).
 */
function beingRestored(state: MetaState, clusterId: string): boolean {
  if (state.clusters[clusterId]?.scratchOfDrill) return true;
  return (state.runQueues[`cluster:${clusterId}`] ?? []).some((jobId) => state.jobs[jobId]?.jobType === 'cluster_restore');
}
