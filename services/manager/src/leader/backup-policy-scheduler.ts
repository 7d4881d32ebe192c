// Leader-only: runs the backup policies (meta/backup-policies.ts, docs/backup-policies.md).
// Every round, for each policy:
//  - a period (full_every_hours long, counted from the epoch) whose backup has not run is
//    due at the first round inside the daily window; its run is claimed in the replicated
//    state, then its manual_backup_cluster job is submitted under a request id made of the
//    cluster and the period (the same on every leader: a retried submission returns the job
//    already made), then the job id is recorded. A claim whose job was never recorded (its
//    leader died) is submitted by the next leader: a leader change neither loses nor doubles
//    a run. The job shows in list_jobs like any other backup.
//  - expiry (backup/retention.ts): the sets and binlogs outside the retention leave the state
//    and are queued for deletion; then every queued object is deleted from its storage.
//  - a policy with a drill schedule: a restore drill (run_restore_drill) once per period of
//    drill_every_days, inside the window, claimed and submitted exactly as a backup run is
//    (meta/restore-drills.ts), once the cluster has a set with recorded checksums.
// Binlog archiving is not touched: it stays continuous (leader/binlog-archiver.ts).

import { createHash } from 'node:crypto';
import type { Logger } from '@kcm/common';
import { parseRequest, type ValidRequest } from '@kcm/protocol';
import { backupSetPrefix } from '../jobs/backup';
import type { BackupStorageOpener } from '../jobs/backup-storage';
import { CommandKind, type Command } from '../meta/commands';
import { allPolicies, pendingDeletions, policyOfCluster, policyRunRequestId, type BackupPolicyRecord, type BackupPolicyRun } from '../meta/backup-policies';
import { backupSetsOf } from '../meta/backup';
import { drillRunRequestId } from '../meta/restore-drills';
import { hasRecordedChecksums } from '../jobs/restore-drill/plan';
import { own } from '../meta/dict';
import type { MetaState } from '../meta/state';
import type { Clock, MetaStore } from '../meta/store';
import { openWindowAt } from '../backup/logical-window';
import { retentionPlan } from '../backup/retention';
import { PeriodicRounds } from './periodic-rounds';

export const DEFAULT_BACKUP_POLICY_INTERVAL_MS = 30_000;
/** The user name the policy's jobs are submitted under (list_jobs, the audit trail). */
export const POLICY_SUBMITTER = 'backup-policy';

/** The start (ms) of the period a policy is due to back up at `nowMs`, if any: inside the window, not run yet. */
export function duePeriod(policy: Pick<BackupPolicyRecord, 'fullEveryHours' | 'startSecond' | 'endSecond' | 'lastRun'>, nowMs: number): number | undefined {
  const periodMs = policy.fullEveryHours * 3_600_000;
  const periodStart = Math.floor(nowMs / periodMs) * periodMs;
  // Also when the clock went back: a period at or before the last one never runs again.
  if (policy.lastRun && policy.lastRun.periodStart >= periodStart) return undefined;
  return openWindowAt(nowMs, policy) ? periodStart : undefined;
}

/** The start (ms) of the drill period due at `nowMs`, if any: the policy schedules drills, inside the window, not run yet. */
export function dueDrillPeriod(policy: Pick<BackupPolicyRecord, 'drill' | 'lastDrill' | 'startSecond' | 'endSecond'>, nowMs: number): number | undefined {
  if (!policy.drill) return undefined;
  const periodMs = policy.drill.everyDays * 86_400_000;
  const periodStart = Math.floor(nowMs / periodMs) * periodMs;
  if (policy.lastDrill && policy.lastDrill.periodStart >= periodStart) return undefined;
  return openWindowAt(nowMs, policy) ? periodStart : undefined;
}

/** A cluster_restore or a restore drill reading the cluster's backups is under way: expiry waits for it. */
function restoreReading(state: MetaState, clusterId: string): boolean {
  for (const queue of Object.values(state.runQueues)) {
    for (const id of queue) {
      const job = state.jobs[id];
      if (job?.jobType === 'cluster_restore' && (job.paras as { src_cluster_id?: string }).src_cluster_id === clusterId) return true;
      if (job?.jobType === 'run_restore_drill' && (job.paras as { cluster_id?: string }).cluster_id === clusterId) return true;
    }
  }
  return false;
}

/** The job of a period: its type, the period's request id, its paras as Emit takes them, and paras only kcm itself adds. */
interface PeriodJob {
  jobType: 'manual_backup_cluster' | 'run_restore_drill';
  requestId: string;
  paras: Record<string, unknown>;
  internalParas?: Record<string, unknown>;
}

/** A job a policy runs once per period: its last run in the policy, when a period is due, its claim and submission commands, its request. */
interface PeriodicKind {
  /** For logs: 'backup policy run', 'restore drill'. */
  what: string;
  lastRun(policy: BackupPolicyRecord): BackupPolicyRun | null | undefined;
  due(policy: BackupPolicyRecord, nowMs: number, state: MetaState): number | undefined;
  claimed(clusterId: string, periodStart: number, at: number, claimedBy: string): Command;
  submitted(clusterId: string, periodStart: number, jobId: string, at: number): Command;
  job(policy: BackupPolicyRecord, periodStart: number): PeriodJob;
}

const BACKUP_RUN: PeriodicKind = {
  what: 'backup policy run',
  lastRun: (policy) => policy.lastRun,
  due: (policy, nowMs) => duePeriod(policy, nowMs),
  claimed: (clusterId, periodStart, at, claimedBy) => ({ kind: CommandKind.BackupPolicyRunClaimed, at, clusterId, periodStart, claimedBy }),
  submitted: (clusterId, periodStart, jobId, at) => ({ kind: CommandKind.BackupPolicyRunSubmitted, at, clusterId, periodStart, jobId }),
  job: (policy, periodStart) => ({
    jobType: 'manual_backup_cluster',
    requestId: policyRunRequestId(policy.clusterId, periodStart),
    paras: { cluster_id: policy.clusterId },
    // The policy's storage travels in the paras the job commits (manual_backup_cluster's resolve keeps it).
    ...(policy.storageName !== null ? { internalParas: { storage_name: policy.storageName } } : {}),
  }),
};

const DRILL_RUN: PeriodicKind = {
  what: 'restore drill',
  lastRun: (policy) => policy.lastDrill,
  // Nothing to check before a set recorded its figures: the period stays unclaimed until then.
  due: (policy, nowMs, state) => (backupSetsOf(state, policy.clusterId).some(hasRecordedChecksums) ? dueDrillPeriod(policy, nowMs) : undefined),
  claimed: (clusterId, periodStart, at, claimedBy) => ({ kind: CommandKind.RestoreDrillRunClaimed, at, clusterId, periodStart, claimedBy }),
  submitted: (clusterId, periodStart, jobId, at) => ({ kind: CommandKind.RestoreDrillRunSubmitted, at, clusterId, periodStart, jobId }),
  job: (policy, periodStart) => ({
    jobType: 'run_restore_drill',
    requestId: drillRunRequestId(policy.clusterId, periodStart),
    paras: { cluster_id: policy.clusterId, storage_iplists: policy.drill?.storageIplists ?? [], computer_iplists: policy.drill?.computerIplists ?? [] },
  }),
};

export interface BackupPolicySchedulerOptions {
  store: MetaStore;
  /** Submits a job as Emit does (the manager's own service): validated, committed, run by the runner. */
  submit(req: ValidRequest): Promise<{ jobId: string }>;
  openStorage: BackupStorageOpener;
  /** This member's name, recorded with each claim. */
  member: string;
  now: Clock;
  logger: Logger;
  intervalMs?: number;
}

export class BackupPolicyScheduler {
  private readonly loop: PeriodicRounds;

  constructor(private readonly opts: BackupPolicySchedulerOptions) {
    this.loop = new PeriodicRounds(() => this.round(), opts.intervalMs ?? DEFAULT_BACKUP_POLICY_INTERVAL_MS);
  }

  start(): void {
    this.loop.start({ runAtOnce: true });
  }

  /** Waits for the round under way: a claim it made is finished by the next leader. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One round now (a round under way is joined). */
  runDue(): Promise<void> {
    return this.loop.run();
  }

  private async round(): Promise<void> {
    for (const policy of allPolicies(this.opts.store.state())) {
      try {
        await this.runPeriod(policy.clusterId, BACKUP_RUN);
        await this.runPeriod(policy.clusterId, DRILL_RUN);
        await this.expire(policy.clusterId);
      } catch (err) {
        this.opts.logger.warn({ err, cluster: policy.clusterId }, 'backup policy round did not finish; the next round carries on');
      }
    }
    await this.deletePending();
  }

  /**
   * One kind of periodic job of the cluster's policy: the period due is claimed, its job
   * submitted under the period's request id, the job id recorded. A claim left without its
   * job (its leader died) is submitted by whoever leads next, under the same request id.
   */
  private async runPeriod(clusterId: string, kind: PeriodicKind): Promise<void> {
    const { store, now } = this.opts;
    let policy = policyOfCluster(store.state(), clusterId);
    const cluster = own(store.state().clusters, clusterId);
    if (!policy || !cluster || cluster.status !== 'ready') return;
    const last = kind.lastRun(policy);
    if (!last || last.jobId !== null) {
      const periodStart = kind.due(policy, now(), store.state());
      if (periodStart === undefined) return;
      const claim = await store.propose(kind.claimed(clusterId, periodStart, now(), this.opts.member));
      if (!claim.ok) {
        this.opts.logger.info({ cluster: clusterId, refusal: claim.message }, `${kind.what} not claimed`);
        return;
      }
      policy = policyOfCluster(store.state(), clusterId);
    }
    const run = policy && kind.lastRun(policy);
    if (!policy || !run || run.jobId !== null) return;
    const { jobId } = await this.opts.submit(this.request(kind.job(policy, run.periodStart)));
    const recorded = await store.propose(kind.submitted(clusterId, run.periodStart, jobId, now()));
    this.opts.logger.info({ cluster: clusterId, period: new Date(run.periodStart).toISOString(), job: jobId, recorded: recorded.ok }, `${kind.what} submitted`);
  }

  /** The period's job as Emit gets a request, under the period's request id (the same on every leader). */
  private request(job: PeriodJob): ValidRequest {
    const parsed = parseRequest({ version: '1.0', job_type: job.jobType, timestamp: String(Math.floor(this.opts.now() / 1000)), user_name: POLICY_SUBMITTER, request_id: job.requestId, paras: job.paras });
    if (!parsed.ok) throw parsed.error;
    Object.assign(parsed.request.paras as Record<string, unknown>, job.internalParas);
    return parsed.request;
  }

  private async expire(clusterId: string): Promise<void> {
    const { store, now } = this.opts;
    const state = store.state();
    const policy = policyOfCluster(state, clusterId);
    if (!policy || restoreReading(state, clusterId)) return;
    const plan = retentionPlan(state, policy, now());
    if (plan.expiredSets.length === 0 && plan.expiredBinlogs.length === 0) return;
    const outcome = await store.propose({
      kind: CommandKind.BackupsExpired,
      at: now(),
      clusterId,
      sets: plan.expiredSets.map((s) => ({ id: s.id, prefix: backupSetPrefix(clusterId, s.id) })),
      binlogs: plan.expiredBinlogs.map((b) => ({ shardId: b.shardId, keys: b.files.map((f) => f.key) })),
    });
    this.opts.logger.info({ cluster: clusterId, sets: plan.expiredSets.map((s) => s.id), binlogs: plan.expiredBinlogs.reduce((n, b) => n + b.files.length, 0), ok: outcome.ok }, 'backups outside the retention expired');
  }

  /** Deletes the objects expiry queued; one that cannot be deleted now stays queued for the next round. */
  private async deletePending(): Promise<void> {
    const { store, now } = this.opts;
    const done: string[] = [];
    for (const pending of pendingDeletions(store.state())) {
      const record = own(store.state().backupStorages, pending.storageName);
      if (!record) {
        done.push(pending.prefix); // the storage was forgotten: nothing of it is kcm's to delete any more
        continue;
      }
      const storage = this.opts.openStorage(record);
      try {
        // An agent op id is [A-Za-z0-9_.:-]: the prefix (with its slashes) goes in as its digest.
        await storage.delete(`expire:${createHash('sha256').update(pending.prefix).digest('hex').slice(0, 40)}`, pending.prefix);
        done.push(pending.prefix);
      } catch (err) {
        this.opts.logger.warn({ err, storage: pending.storageName, what: pending.what }, 'expired backup object not deleted yet; retried next round');
      } finally {
        storage.close();
      }
    }
    if (done.length > 0) await store.propose({ kind: CommandKind.BackupDeletionsDone, at: now(), prefixes: done });
  }
}
