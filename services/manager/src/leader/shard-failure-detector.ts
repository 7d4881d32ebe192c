// Leader-only: watches every shard master of every ready cluster and submits a
// shard_failover job when, and only when, the evidence agrees that it failed:
//
//   - its agent answers and says mariadbd is not running, or that it died and the agent's
//     supervisor restarted it since the last look (a crash: what it had not sent to a
//     standby is not to be trusted, and its standbys are promoted from, not re-attached);
//   - or it is unreachable (agent and SQL ping both fail from here) AND every standby that
//     answers has lost it too (IO thread down, or no TCP connection to it from the
//     standby's own host), for at least `graceMs`.
//
// A manager merely cut off from a healthy master sees the first half only: the standbys
// still reach it, so nothing happens. Clusters with a job queued or running are left alone
// (a failover already under way holds the cluster lock; other jobs stop instances on
// purpose); a shard_rejoin has a lock of its own and does not count. The same round submits
// shard_rejoin for fenced old masters whose agent answers.

import { CALLS_STARTED_PER_TURN, type Logger, ONE_SHOT_MYSQL_OPTIONS, startInSlices } from '@kcm/common';
import mysql from 'mysql2/promise';
import type { Agents, MariaDbHaStatusReply } from '@kcm/agent-api';
import { MasterStatusWatches } from './master-status-watches';
import { CommandKind } from '../meta/commands';
import { heldByJob } from '../meta/clusters';
import type { ClusterRecord, MetaState, ShardRecord, StorageNodeRecord } from '../meta/state';
import type { MetaStore } from '../meta/store';
import { PeriodicRounds } from './periodic-rounds';
import { FAILOVER_STEP_NAMES, failoverLockKey, rejoinLockKey, SHARD_FAILOVER, SHARD_REJOIN, shardRejoinJob, type ShardFailoverParas, type ShardRejoinParas } from '../jobs/shard-ha/failover-job';
import { type DbAccount } from '../secrets/accounts';
import { liveAccount } from '../secrets/live-accounts';
import type { SecretBox } from '../secrets/secret-box';

export const DEFAULT_FAILURE_DETECT_INTERVAL_MS = 500;
export const DEFAULT_FAILURE_GRACE_MS = 1000;
/** How long the master's agent has to vouch for it before a SQL ping is made too (ms). */
export const DEFAULT_SQL_PING_AFTER_MS = 200;
/**
 * A failover of one failed master is not submitted again for this long (a failed job is not
 * retried in a tight loop). It guards one master's term (the node and when it became
 * master), not the shard: the master that replaced it failing a second later, or the same
 * node failing again after it was failed over, rejoined and promoted back, is failed over at
 * once (issue 35: the shard-wide window left a shard whose new master died within 15 s
 * without a writable master).
 */
const RESUBMIT_AFTER_MS = 15_000;

export interface FailureDetectorOptions {
  store: MetaStore;
  agents: Agents;
  logger: Logger;
  /** Opens the storage account's password for the SQL ping. */
  secrets: SecretBox;
  intervalMs?: number;
  graceMs?: number;
  /** Deadline of each probe of a master (agent call and SQL ping) (ms). */
  probeTimeoutMs?: number;
  /** A master's agent that has not answered after this long gets a SQL ping beside it (ms; default 200). */
  sqlPingAfterMs?: number;
  /** True while automatic failover is suppressed for the shard (set_noswitch). */
  switchSuppressed?(state: MetaState, clusterId: string, shardId: string): boolean;
  now?: () => number;
}

export interface MasterVerdict {
  failed: boolean;
  /** The master serves: its agent or a SQL ping says it answers (the kcm_shard_master_up gauge). */
  answers: boolean;
  /** The evidence, in words (becomes the job's reason). */
  evidence: string;
}

export interface ShardMasterHealth {
  clusterId: string;
  shardId: string;
  up: boolean;
}

export class ShardFailureDetector {
  private readonly loop: PeriodicRounds;
  /** Supervisor restarts last seen per master node: a rise means it died since. */
  private readonly restartsSeen = new Map<string, number>();
  /** When the unreachable-and-lost evidence was first seen, per master node. */
  private readonly suspectSince = new Map<string, number>();
  private readonly submittedAt = new Map<string, number>();
  /** The last evidence logged per master node, so a lasting condition is logged once. */
  private readonly lastEvidence = new Map<string, string>();
  /** Shards whose master was found failed inside their no-switch window (logged once). */
  private readonly failedInWindow = new Set<string>();
  /** Whether each watched shard's master answered in the latest round that judged it, by `cluster/shard`. */
  private masterUp = new Map<string, ShardMasterHealth>();
  /** Failovers submitted since this member became leader (tests, logs). */
  failoversSubmitted = 0;
  /** SQL pings made (each a new MariaDB connection): what a round costs beyond its agent calls (bench:scale:failure). */
  sqlPings = 0;
  /** Masters judged from a fresh WatchStatus beat, without a call of their own (bench:scale:failure, tests). */
  judgedFromBeats = 0;
  /** Each host's masters measured by its agent every interval (master-status-watches.ts). */
  readonly watches: MasterStatusWatches;
  /** A beat older than this is not evidence: two intervals and a margin for the agent's own measuring. */
  private readonly beatFreshMs: number;

  constructor(private readonly opts: FailureDetectorOptions) {
    const intervalMs = opts.intervalMs ?? DEFAULT_FAILURE_DETECT_INTERVAL_MS;
    this.loop = new PeriodicRounds(() => this.round(), intervalMs);
    // A beat showing a master down is judged at once, not at the next tick (the loop joins a round under way).
    const judgeNow = () => {
      if (this.loop.started) void this.loop.run();
    };
    this.beatFreshMs = 2 * intervalMs + 250;
    this.watches = new MasterStatusWatches({ agents: opts.agents, intervalMs, quietAfterMs: this.beatFreshMs, logger: opts.logger, now: opts.now, onNews: judgeNow });
  }

  start(): void {
    this.restartsSeen.clear();
    this.suspectSince.clear();
    this.masterUp.clear();
    this.loop.start({ runAtOnce: true });
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    this.watches.stop();
    this.masterUp.clear(); // a member that is not leader measures nothing
  }

  /** The shard masters' health as last measured (leader only; empty elsewhere). */
  masterHealth(): ShardMasterHealth[] {
    return [...this.masterUp.values()];
  }

  /** One round now (tests); a round under way is joined. */
  checkAll(): Promise<void> {
    return this.loop.run();
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  private async round(): Promise<void> {
    const state = this.opts.store.state();
    const masters = new Set<string>();
    const masterPortsByHost = new Map<string, number[]>();
    const work: Array<() => Promise<void>> = [];
    const previous = this.masterUp;
    this.masterUp = new Map();
    for (const cluster of Object.values(state.clusters)) {
      if (cluster.status !== 'ready' || heldByJob(state, cluster)) {
        // Not judged while a job holds the cluster (a restore drill holds its scratch cluster
        // all its life): its shards keep their last measurement.
        for (const shard of Object.values(cluster.shards)) {
          const last = previous.get(`${cluster.id}/${shard.id}`);
          if (last) this.masterUp.set(`${cluster.id}/${shard.id}`, last);
        }
        continue;
      }
      for (const shard of Object.values(cluster.shards)) {
        const master = shard.nodes[shard.masterNodeId];
        if (!master) continue;
        masters.add(master.id);
        const ports = masterPortsByHost.get(master.hostaddr);
        if (ports) ports.push(master.port);
        else masterPortsByHost.set(master.hostaddr, [master.port]);
        const fenced = Object.values(shard.nodes).filter((n) => n.fenced && n.id !== master.id);
        // One rejoin at a time per cluster: a rebuild may outlast the resubmit window.
        const rejoining = (state.runQueues[rejoinLockKey(cluster.id)]?.length ?? 0) > 0;
        if (fenced.length > 0 && !rejoining) work.push(() => this.offerRejoin(cluster, shard, fenced));
        // Watched inside a no-switch window too (never failed over there): what the master
        // went through in the window (a maintenance restart) is the baseline after it.
        const suppressed = this.opts.switchSuppressed?.(state, cluster.id, shard.id) ?? false;
        work.push(() => this.watch(cluster, shard, master, suppressed));
      }
    }
    // A node that is no longer a master starts from a fresh baseline if it becomes one again.
    for (const id of [...this.restartsSeen.keys()]) if (!masters.has(id)) this.restartsSeen.delete(id);
    // Streams for the masters judged now (new ones measure from the next round on).
    await this.watches.want(masterPortsByHost);
    // 3,000 masters' probes started in one turn held the loop for seconds and made their own
    // agent calls miss their deadline (bench:scale:failure).
    await startInSlices(CALLS_STARTED_PER_TURN, work, (start) => start());
  }

  private async watch(cluster: ClusterRecord, shard: ShardRecord, master: StorageNodeRecord, suppressed: boolean): Promise<void> {
    let verdict: MasterVerdict;
    try {
      verdict = await this.judge(cluster, shard, master);
    } catch (err) {
      this.opts.logger.error({ err, cluster: cluster.name, shard: shard.name }, 'failure detection round failed');
      return;
    }
    this.noteEvidence(cluster, shard, master, verdict);
    this.masterUp.set(`${cluster.id}/${shard.id}`, { clusterId: cluster.id, shardId: shard.id, up: verdict.answers });
    const windowKey = `${cluster.id}/${shard.id}`;
    if (!verdict.failed) return void this.failedInWindow.delete(windowKey);
    if (suppressed) {
      // Once per outage, not every round.
      if (!this.failedInWindow.has(windowKey)) this.opts.logger.warn({ cluster: cluster.name, shard: shard.name, evidence: verdict.evidence }, 'shard master failed inside a no-switch window: no failover');
      this.failedInWindow.add(windowKey);
      return;
    }
    const key = `${cluster.id}/${shard.id}/${master.id}/${shard.masterSince ?? 0}`;
    if (this.now() - (this.submittedAt.get(key) ?? -Infinity) < RESUBMIT_AFTER_MS) return;
    this.submittedAt.set(key, this.now());
    const paras: ShardFailoverParas = { cluster_id: cluster.id, shard_id: shard.id, failed_node_id: master.id, reason: verdict.evidence };
    await this.submit(SHARD_FAILOVER, paras as unknown as Record<string, unknown>, failoverLockKey(paras), FAILOVER_STEP_NAMES);
    this.failoversSubmitted++;
    this.opts.logger.warn({ cluster: cluster.name, shard: shard.name, master: `${master.hostaddr}:${master.port}`, evidence: verdict.evidence }, 'shard master failed: failover submitted');
  }

  private noteEvidence(cluster: ClusterRecord, shard: ShardRecord, master: StorageNodeRecord, verdict: MasterVerdict): void {
    // Only the kind of evidence (before any detail in parentheses) decides whether it is news.
    const kind = verdict.evidence.replace(/\s*\(.*$/s, '');
    if (this.lastEvidence.get(master.id) === kind) return;
    this.lastEvidence.set(master.id, kind);
    const log = this.opts.logger.child({ cluster: cluster.name, shard: shard.name, master: `${master.hostaddr}:${master.port}` });
    if (verdict.evidence === 'answers') log.info('shard master answers');
    else log.warn({ evidence: verdict.evidence, failed: verdict.failed }, 'shard master suspect');
  }

  /** The verdict on one master from its agent, a SQL ping and (when it cannot be reached) its standbys. */
  async judge(cluster: ClusterRecord, shard: ShardRecord, master: StorageNodeRecord): Promise<MasterVerdict> {
    const timeoutMs = this.opts.probeTimeoutMs ?? 1000;
    // The agent's word from its latest beat, when fresh, is what a call would have answered.
    const beat = this.watches.fresh(master.hostaddr, master.port, this.beatFreshMs);
    if (beat) this.judgedFromBeats++;
    const agentAnswer = beat
      ? Promise.resolve({ status: beat as MariaDbHaStatusReply | undefined, error: '' })
      : this.opts.agents.mariadbHa(master.hostaddr).replicationStatus(master.port, 0, timeoutMs).then(
          (status) => ({ status, error: '' }),
          (err: Error) => ({ status: undefined as MariaDbHaStatusReply | undefined, error: err.message }),
        );
    // The SQL ping (a new MariaDB connection: ~5 ms of the leader's CPU) only adds evidence
    // when the agent cannot vouch for the master. An agent that answers in time saying it
    // runs and answers SQL, or that it is not running, makes the ping moot; at 3,000 masters
    // every 500 ms, pinging each alongside its agent call took more CPU than two cores have
    // (bench:scale:failure). A late or failed agent answer starts the ping after
    // `sqlPingAfterMs`, in parallel with the rest of the agent call's deadline.
    const hedgeMs = Math.min(this.opts.sqlPingAfterMs ?? DEFAULT_SQL_PING_AFTER_MS, timeoutMs);
    const early = await within(hedgeMs, agentAnswer);
    const needsPing = !early || early.status === undefined || (early.status.installed && early.status.running && !early.status.answering);
    const [agentView, sqlOk] = await Promise.all([
      agentAnswer,
      needsPing ? this.sqlPing(cluster, master, timeoutMs) : false,
    ]);
    const status = agentView.status;
    if (status) {
      if (!status.installed) return { failed: false, answers: false, evidence: 'its agent has no such instance' };
      if (!status.running) return { failed: true, answers: false, evidence: `its agent says mariadbd is not running (${status.reason})` };
      const before = this.restartsSeen.get(master.id);
      this.restartsSeen.set(master.id, status.supervisor_restarts);
      if (before !== undefined && status.supervisor_restarts > before) {
        return { failed: true, answers: false, evidence: `its agent restarted mariadbd after it died (restarts ${before} -> ${status.supervisor_restarts})` };
      }
      // The first look at a master that a failover or switch made master while its cluster
      // was busy (not judged then): a restart since its promotion is one no round has seen.
      if (before === undefined && shard.masterSince !== undefined && status.supervisor_restarted_at_ms > shard.masterSince) {
        return { failed: true, answers: false, evidence: `its agent restarted mariadbd after it died, ${status.supervisor_restarted_at_ms - shard.masterSince} ms after it became master` };
      }
      if (status.answering || sqlOk) {
        this.suspectSince.delete(master.id);
        return { failed: false, answers: true, evidence: 'answers' };
      }
    } else if (sqlOk) {
      // Cut off from its agent only: it serves.
      this.suspectSince.delete(master.id);
      return { failed: false, answers: true, evidence: `its agent does not answer (${agentView.error}) but it answers SQL` };
    }
    const lost = await this.standbysLostIt(shard, master, timeoutMs);
    if (!lost.agree) {
      this.suspectSince.delete(master.id);
      return { failed: false, answers: false, evidence: `unreachable from the manager, but ${lost.detail}` };
    }
    const since = this.suspectSince.get(master.id) ?? this.now();
    this.suspectSince.set(master.id, since);
    const graceMs = this.opts.graceMs ?? DEFAULT_FAILURE_GRACE_MS;
    const evidence = `unreachable from the manager (agent: ${status ? status.reason : agentView.error}; SQL ping failed) and ${lost.detail}`;
    return { failed: this.now() - since >= graceMs, answers: false, evidence };
  }

  private sqlPing(cluster: ClusterRecord, master: StorageNodeRecord, timeoutMs: number): Promise<boolean> {
    this.sqlPings++;
    return sqlPing(master, () => liveAccount(this.opts.secrets, cluster, 'storage'), timeoutMs);
  }

  private async standbysLostIt(shard: ShardRecord, master: StorageNodeRecord, timeoutMs: number): Promise<{ agree: boolean; detail: string }> {
    const standbys = Object.values(shard.nodes).filter((n) => n.id !== master.id && !n.fenced);
    const views = await Promise.all(
      standbys.map((n) =>
        this.opts.agents
          .mariadbHa(n.hostaddr)
          .replicationStatus(n.port, Math.max(200, Math.floor(timeoutMs / 2)), timeoutMs + 500)
          .then((s) => ({ n, s }), () => ({ n, s: undefined })),
      ),
    );
    const answering = views.filter((v) => v.s?.answering);
    const lostBy = answering.filter((v) => !v.s!.io_running || !v.s!.master_reachable);
    if (answering.length === 0) return { agree: false, detail: 'no standby answers (nothing to promote, nothing to confirm with)' };
    const names = (vs: typeof views) => vs.map((v) => `${v.n.hostaddr}:${v.n.port}`).join(', ');
    if (lostBy.length < answering.length) return { agree: false, detail: `standbys still reach it (${names(answering.filter((v) => !lostBy.includes(v)))})` };
    return { agree: true, detail: `every standby lost it (${names(lostBy)})` };
  }

  private async offerRejoin(cluster: ClusterRecord, shard: ShardRecord, fenced: StorageNodeRecord[]): Promise<void> {
    for (const node of fenced) {
      const key = `rejoin/${cluster.id}/${node.id}`;
      if (this.now() - (this.submittedAt.get(key) ?? -Infinity) < RESUBMIT_AFTER_MS) continue;
      const reachable = await this.opts.agents.mariadbHa(node.hostaddr).replicationStatus(node.port, 0, this.opts.probeTimeoutMs ?? 1000).then(() => true, () => false);
      if (!reachable) continue;
      this.submittedAt.set(key, this.now());
      const paras: ShardRejoinParas = { cluster_id: cluster.id, shard_id: shard.id, node_id: node.id };
      await this.submit(SHARD_REJOIN, paras as unknown as Record<string, unknown>, shardRejoinJob.lockKey(paras, this.opts.store.state()), shardRejoinJob.steps(paras).map((s) => s.name));
      this.opts.logger.warn({ cluster: cluster.name, shard: shard.name, node: `${node.hostaddr}:${node.port}` }, 'fenced old master answers again: rejoin submitted');
      return; // one per shard per round: the job takes the cluster lock anyway
    }
  }

  private async submit(jobType: string, paras: Record<string, unknown>, lockKey: string | null, stepNames: string[]): Promise<void> {
    const outcome = await this.opts.store.propose({ kind: CommandKind.JobSubmitted, at: this.now(), jobType, sentJobType: jobType, paras, requestId: null, lockKey, stepNames });
    if (!outcome.ok) this.opts.logger.error({ jobType, refusal: outcome.message }, 'HA job not submitted');
  }
}

/** What `promise` resolves to if it settles within `ms`; undefined otherwise. */
async function within<T>(ms: number, promise: Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, ms, undefined)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Connects with the cluster's storage account and runs SELECT 1 within timeoutMs. */
async function sqlPing(node: StorageNodeRecord, storage: () => DbAccount, timeoutMs: number): Promise<boolean> {
  let conn: mysql.Connection | undefined;
  const timer = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref());
  const attempt = (async () => {
    try {
      conn = await mysql.createConnection({ ...ONE_SHOT_MYSQL_OPTIONS, host: node.hostaddr, port: node.port, ...storage(), connectTimeout: timeoutMs });
      conn.on('error', () => {});
      await conn.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  })();
  const ok = await Promise.race([attempt, timer]);
  void attempt.finally(() => conn?.destroy());
  return ok;
}
