// Leader-only: finishes the rollbacks that failed jobs could not finish (meta/rollbacks.ts).
// Every few seconds, for each recorded rollback, it asks each host whose instances are left
// whether its agent answers; where it does, it removes them (instance, directories, cgroup)
// and commits their removal, which returns their ports. The record is replicated, so a new
// leader carries on where the last one stopped; removals are idempotent on the agent.
//
// It leaves a record alone while its own job is unfinished (a new leader may be re-running
// the failed step) and while another job holds the cluster (a delete_cluster removes every
// instance of it anyway; two removers of one instance would only race).

import type { Logger } from '@kcm/common';
import type { WithAgent, Agents } from '@kcm/agent-api';
import { describeInstance, forgetRemoved, removeAll } from '../jobs/rollback';
import type { MetaState, PendingInstance, PendingRollbackRecord } from '../meta/state';
import type { Clock, MetaStore } from '../meta/store';
import { PeriodicRounds } from './periodic-rounds';

export const DEFAULT_ROLLBACK_RETRY_INTERVAL_MS = 3000;

export interface RollbackFinisherOptions {
  store: MetaStore;
  agents: Agents;
  withAgent: WithAgent;
  logger: Logger;
  intervalMs?: number;
  /** Stamps the commands it proposes. Default: Date.now. */
  now?: Clock;
  /**
   * Resolves once the local state holds every committed entry (as the job runner's). A new
   * leader may not have applied its predecessor's last entries yet: it must not act on a
   * record that is already finished, or whose job ended well after all.
   */
  caughtUp?(): Promise<void>;
}

/** Whether the finisher may act on the record now (see the file comment). */
export function finishableNow(state: MetaState, record: PendingRollbackRecord): boolean {
  const job = state.jobs[record.jobId];
  if (job && !job.result) return false;
  if (!state.clusters[record.clusterId]) return false;
  return (state.runQueues[`cluster:${record.clusterId}`] ?? []).length === 0;
}

export class RollbackFinisher {
  private readonly loop: PeriodicRounds;
  /** Last problem per instance, so one that stays left is logged when it changes, not every round. */
  private readonly lastProblem = new Map<string, string>();
  /** Whether the state caught up since this member started leading. */
  private caughtUp = false;

  constructor(private readonly opts: RollbackFinisherOptions) {
    this.loop = new PeriodicRounds(() => this.finishRound(), opts.intervalMs ?? DEFAULT_ROLLBACK_RETRY_INTERVAL_MS);
  }

  start(): void {
    if (this.loop.started) return;
    this.caughtUp = false;
    this.loop.start({ runAtOnce: true });
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One round over every recorded rollback; a round still running is joined, not doubled. */
  finishAll(): Promise<void> {
    return this.loop.run();
  }

  private async finishRound(): Promise<void> {
    if (!this.caughtUp) {
      try {
        await this.opts.caughtUp?.();
      } catch (err) {
        this.opts.logger.debug({ err }, 'rollback finisher: state not caught up yet; next round');
        return;
      }
      this.caughtUp = true;
    }
    const state = this.opts.store.state();
    const records = Object.values(state.pendingRollbacks).filter((r) => finishableNow(state, r));
    await Promise.all(
      records.map((r) => this.finish(r).catch((err: unknown) => this.opts.logger.warn({ err, jobId: r.jobId }, 'rollback finisher: round failed; retrying later'))),
    );
  }

  private async finish(record: PendingRollbackRecord): Promise<void> {
    const log = this.opts.logger.child({ jobId: record.jobId, clusterId: record.clusterId });
    const hosts = [...new Set(record.instances.map((i) => i.hostaddr))];
    const answering = (await Promise.all(hosts.map(async (h) => ((await this.answers(h)) ? h : undefined)))).filter((h) => h !== undefined);
    const due = record.instances.filter((i) => answering.includes(i.hostaddr));
    if (due.length === 0) return;
    const round = await removeAll(this.opts.agents, record.jobId, due);
    for (const { instance, err } of round.left) this.report(log, instance, err instanceof Error ? err.message : String(err));
    if (round.removed.length === 0) return;
    try {
      await forgetRemoved(this.opts.store, this.opts.now ?? Date.now, record.jobId, round.removed);
    } catch (err) {
      // Not leading any more (or no quorum): the next leader removes them again, idempotently.
      log.debug({ err }, 'could not record finished rollback removals');
      return;
    }
    for (const i of round.removed) this.lastProblem.delete(instanceKey(i));
    const left = this.opts.store.state().pendingRollbacks[record.jobId]?.instances.length ?? 0;
    log.info({ removed: round.removed.map(describeInstance), left }, left === 0 ? `${record.jobType} rollback finished` : `${record.jobType} rollback: instances removed`);
  }

  private async answers(hostaddr: string): Promise<boolean> {
    try {
      await this.opts.withAgent(hostaddr, (agent) => agent.health());
      return true;
    } catch {
      return false;
    }
  }

  private report(log: Logger, instance: PendingInstance, problem: string): void {
    const k = instanceKey(instance);
    if (this.lastProblem.get(k) === problem) return;
    this.lastProblem.set(k, problem);
    log.warn({ instance: describeInstance(instance), problem }, 'rollback: removal failed; retrying later');
  }
}

const instanceKey = (i: PendingInstance) => `${i.hostaddr}:${i.port}`;
