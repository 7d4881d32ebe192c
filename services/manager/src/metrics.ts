// The manager's own metrics, beside the gateway's request metrics on the same registry.
// Values that are state (term, indexes, job counts, reachability) are read at scrape time.

import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { RaftNode } from '@kcm/raft';
import { KCM_PROTOCOL, KCM_VERSION } from '@kcm/common';
import { activeTls, exportCertExpiry } from '@kcm/agent-api';
import type { HealthMonitor } from './leader/health-monitor';
import { archiveCoversUntil } from './meta/binlog-archive';
import type { InDoubtSummary, XaResolution } from './leader/in-doubt-resolver';
import type { ShardMasterHealth } from './leader/shard-failure-detector';
import { SHARD_FAILOVER, type ShardFailoverParas } from './jobs/shard-ha/failover-job';
import type { JobRecord, JobResultRecord, MetaState } from './meta/state';
import { registerRestoreDrillMetrics } from './backup/restore-drill-metrics';

export interface ManagerMetrics {
  observeProposal(outcome: 'ok' | 'refused' | 'error', seconds: number): void;
  observeStep(job: JobRecord, step: string, seconds: number): void;
  observeJobFinished(job: JobRecord, outcome: JobResultRecord): void;
  /** A shard's binlog archive lag (RPO) after an archiving round, in seconds. */
  observeBinlogArchiveLag(seconds: number): void;
  /** The wall time of one health-probe round over every registered host (the leader's health monitor). */
  observeHealthProbeRound(seconds: number): void;
  /** In-doubt XA branches the leader's resolver ended, by outcome. */
  observeXaResolved(outcome: XaResolution, branches: number): void;
}

export function createManagerMetrics(
  registry: Registry,
  sources: {
    raft: () => RaftNode | undefined;
    state: () => MetaState;
    health: () => HealthMonitor | undefined;
    /** The shard masters as the leader's failure detector last measured them (empty on followers). */
    shardMasters?: () => ShardMasterHealth[];
    /** In-doubt XA branches per cluster after the leader's resolver's latest round (empty on followers). */
    inDoubtXa?: () => InDoubtSummary[];
    now?: () => number;
    /** This member's name, on its certificate's expiry series. */
    member?: string;
  },
): ManagerMetrics {
  const raftGauge = (name: string, help: string, read: (r: RaftNode) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const r = sources.raft();
        if (r) this.set(read(r));
      },
    });
  raftGauge('kcm_raft_term', 'Current Raft term of this member', (r) => r.status().term);
  raftGauge('kcm_raft_is_leader', '1 when this member is the Raft leader', (r) => (r.status().role === 'leader' ? 1 : 0));
  raftGauge('kcm_raft_commit_index', 'Highest log index known committed', (r) => r.status().commit);
  raftGauge('kcm_raft_applied_index', 'Highest log index applied to the metadata state', (r) => r.status().applied);
  raftGauge('kcm_raft_members', 'Voting members in the current configuration', (r) => r.status().conf.voters.length);

  // Restore drills (docs/restore-drills.md): kcm_restore_drill_*, from the replicated state.
  registerRestoreDrillMetrics(registry, { state: sources.state, now: sources.now ?? Date.now });
  // Which build each member runs, as Prometheus's *_build_info convention has it: a constant 1
  // whose labels are the facts, so a rolling upgrade shows as two version series side by side.
  new Gauge({ name: 'kcm_build_info', help: "This member's kcm release and protocol (always 1)", labelNames: ['version', 'protocol'], registers: [registry] }).set(
    { version: KCM_VERSION, protocol: String(KCM_PROTOCOL) },
    1,
  );

  const proposals = new Counter({ name: 'kcm_raft_proposals_total', help: 'Metadata commands proposed by this member', labelNames: ['outcome'], registers: [registry] });
  const proposalSeconds = new Histogram({
    name: 'kcm_raft_proposal_duration_seconds',
    help: 'Time from propose to applied, by outcome',
    labelNames: ['outcome'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const jobsFinished = new Counter({ name: 'kcm_jobs_total', help: 'Jobs finished by this member as leader, by type and status', labelNames: ['job_type', 'status'], registers: [registry] });
  new Gauge({
    name: 'kcm_jobs',
    help: 'Jobs in the replicated state by status',
    labelNames: ['status'],
    registers: [registry],
    // Object.values over 100,000 kept jobs held the loop 100-200 ms on every scrape (issue
    // 20): unfinished jobs are the run queues' (few); finished ones are counted from the
    // finished list, yielding to the loop every few thousand.
    async collect() {
      const state = sources.state();
      const counts: Record<string, number> = { started: 0, ongoing: 0, done: 0, failed: 0 };
      for (const queue of Object.values(state.runQueues)) for (const id of queue) if (state.jobs[id]) counts[state.jobs[id].status]++;
      const finished = [...state.finishedJobs];
      for (let i = 0; i < finished.length; i++) {
        const job = state.jobs[finished[i]];
        if (job) counts[job.status]++;
        if (i % 5_000 === 4_999) await new Promise<void>((resolve) => setImmediate(resolve));
      }
      for (const [status, n] of Object.entries(counts)) this.set({ status }, n);
    },
  });
  new Gauge({
    name: 'kcm_pending_rollback_instances',
    help: 'Instances that failed jobs could not remove from their hosts yet, by host (removed when the agent answers)',
    labelNames: ['hostaddr'],
    registers: [registry],
    collect() {
      this.reset();
      const counts = new Map<string, number>();
      for (const r of Object.values(sources.state().pendingRollbacks)) for (const i of r.instances) counts.set(i.hostaddr, (counts.get(i.hostaddr) ?? 0) + 1);
      for (const [hostaddr, n] of counts) this.set({ hostaddr }, n);
    },
  });
  const stepSeconds = new Histogram({
    name: 'kcm_job_step_duration_seconds',
    help: 'Duration of job steps run by this member',
    labelNames: ['job_type', 'step'],
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800],
    registers: [registry],
  });
  new Gauge({
    name: 'kcm_agent_reachable',
    help: '1 when the leader last reached the agent of the host, 0 when not (leader only)',
    labelNames: ['hostaddr'],
    registers: [registry],
    collect() {
      this.reset();
      const monitor = sources.health();
      if (!monitor) return;
      const hosts = new Set(Object.values(sources.state().machines).map((m) => m.hostaddr));
      for (const hostaddr of hosts) {
        const r = monitor.reachability(hostaddr);
        if (r) this.set({ hostaddr }, r.reachable ? 1 : 0);
      }
    },
  });

  new Gauge({
    name: 'kcm_shard_master_up',
    help: '1 when the shard\'s master answered the leader\'s last failure-detection probe, 0 when not (leader only)',
    labelNames: ['cluster_id', 'shard_id'],
    registers: [registry],
    collect() {
      this.reset();
      for (const m of sources.shardMasters?.() ?? []) this.set({ cluster_id: m.clusterId, shard_id: m.shardId }, m.up ? 1 : 0);
    },
  });

  // Shard failovers (jobs/shard-ha/failover-job.ts) as the leader that finished them counts
  // them. Every shard's series start at 0 on every member, so the first failover is an increase
  // Prometheus sees (a series born at 1 has none), and KcmFailoverDone/Failed fire on it.
  const failovers = new Counter({
    name: 'kcm_failovers_total',
    help: 'Shard master failovers finished by this member as leader, by cluster, shard and result (done, failed)',
    labelNames: ['cluster_id', 'shard_id', 'result'],
    registers: [registry],
    collect() {
      for (const cluster of Object.values(sources.state().clusters)) {
        for (const shardId of Object.keys(cluster.shards)) for (const result of ['done', 'failed']) this.inc({ cluster_id: cluster.id, shard_id: shardId, result }, 0);
      }
    },
  });
  const countFailover = (job: JobRecord, outcome: JobResultRecord) => {
    if (job.jobType !== SHARD_FAILOVER) return;
    const paras = job.paras as Partial<ShardFailoverParas>;
    failovers.inc({ cluster_id: String(paras.cluster_id), shard_id: String(paras.shard_id), result: outcome.ok ? 'done' : 'failed' });
  };
  // The certificate of this member's gRPC links (Raft, forwarding, agents), renewed without a
  // restart (libs/agent-api tls/reloading.ts); the HTTPS listener adds use="https" to the family.
  exportCertExpiry(registry, { member: sources.member ?? '', use: 'grpc' }, () => activeTls()?.cert);

  new Gauge({
    name: 'kcm_binlog_archive_lag_seconds',
    help: 'How far each shard\'s binlog archive trails the clock (RPO of a point-in-time restore): now minus the newest archived event',
    labelNames: ['cluster_id', 'shard_id'],
    registers: [registry],
    collect() {
      this.reset();
      const state = sources.state();
      const nowS = (sources.now ?? Date.now)() / 1000;
      for (const archive of Object.values(state.binlogArchives ?? {})) {
        const cluster = state.clusters[archive.clusterId];
        if (!cluster?.shards[archive.shardId] || archive.files.length === 0) continue;
        this.set({ cluster_id: archive.clusterId, shard_id: archive.shardId }, Math.max(0, nowS - archiveCoversUntil(archive)));
      }
    },
  });
  const archiveLag = new Histogram({
    name: 'kcm_binlog_archive_lag_observed_seconds',
    help: 'Binlog archive lag of a shard measured by the leader after each archiving round',
    buckets: [1, 2, 5, 10, 15, 30, 60, 120, 300, 900],
    registers: [registry],
  });

  // A round must fit in healthIntervalMs, or dead hosts are found late (issue 20: 1,000 hosts).
  const healthProbeRound = new Histogram({
    name: 'kcm_health_probe_round_seconds',
    help: 'Wall time of the leader\'s health-probe rounds over every registered host (each should end within healthIntervalMs)',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
    registers: [registry],
  });

  // Two-phase commit through compute nodes (leader/in-doubt-resolver.ts): a branch prepared longer
  // than the resolver's timeout is in doubt; ages count from when this leader first saw it.
  new Gauge({
    name: 'kcm_xa_in_doubt_branches',
    help: 'XA branches prepared on shard masters past the in-doubt timeout and not yet ended by the resolver, by cluster (leader only)',
    labelNames: ['cluster_id'],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of sources.inDoubtXa?.() ?? []) this.set({ cluster_id: c.clusterId }, c.branches);
    },
  });
  new Gauge({
    name: 'kcm_xa_in_doubt_oldest_seconds',
    help: 'Age of the cluster\'s oldest in-doubt XA branch since the leader first saw it prepared, 0 when none (leader only)',
    labelNames: ['cluster_id'],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of sources.inDoubtXa?.() ?? []) this.set({ cluster_id: c.clusterId }, c.oldestSeconds);
    },
  });
  const xaResolved = new Counter({
    name: 'kcm_xa_in_doubt_resolved_total',
    help: 'In-doubt XA branches the leader\'s resolver committed or rolled back, by outcome (commit, abort)',
    labelNames: ['outcome'],
    registers: [registry],
  });

  return {
    observeXaResolved(outcome, branches) {
      xaResolved.inc({ outcome }, branches);
    },
    observeHealthProbeRound(seconds) {
      healthProbeRound.observe(seconds);
    },
    observeBinlogArchiveLag(seconds) {
      archiveLag.observe(seconds);
    },
    observeProposal(outcome, seconds) {
      proposals.inc({ outcome });
      proposalSeconds.observe({ outcome }, seconds);
    },
    observeStep(job, step, seconds) {
      stepSeconds.observe({ job_type: job.jobType, step }, seconds);
    },
    observeJobFinished(job, outcome) {
      jobsFinished.inc({ job_type: job.jobType, status: outcome.ok ? 'done' : 'failed' });
      countFailover(job, outcome);
    },
  };
}
