// build() wires one manager member: Raft (LevelDB storage, gRPC transport), the metadata
// state machine, the leader-only services, the gateway and metrics. main.ts only listens.

import path from 'node:path';
import type { X509Certificate } from 'node:crypto';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { FastifyInstance } from 'fastify';
import { createLogger, makePrivateDirSync, type Logger } from '@kcm/common';
import { GrpcTransport, LevelStorage, RaftNode, decodeConfChange, type Entry, type Storage, type Transport } from '@kcm/raft';
import { AgentPool, callerGuard, channelCredentials, exportCertExpiry, protocolClientInterceptor, protocolServerGuard, serverCredentials, type Agents } from '@kcm/agent-api';
import { managerProtocolIdentity, MemberVersions } from './group/member-versions';
import { memberServiceDefinition, memberServiceImplementation } from './group/member-describe';
import { commandProtocolGate } from './group/protocol-gate';
import type { ValidRequest } from '@kcm/protocol';
import { openBackupStorage } from './backup/storage';
import type { ManagerConfig } from './config';
import { buildGateway, emitListenerOf, loadHttpsPair, requestBoundTokens } from './gateway';
import { tokenDirectory } from './auth/token-directory';
import type { JobService } from './gateway/job-service';
import { HealthMonitor } from './leader/health-monitor';
import { HostFactsRefresher } from './leader/host-facts-refresher';
import { BinlogArchiver } from './leader/binlog-archiver';
import { CatalogSync } from './leader/catalog-sync';
import { LogicalBackupScheduler } from './leader/logical-backup-scheduler';
import { BackupPolicyScheduler } from './leader/backup-policy-scheduler';
import { registerBackupPolicyMetrics } from './backup/policy-metrics';
import { openLogicalStorage } from './backup/logical-storage';
import { InDoubtResolver } from './leader/in-doubt-resolver';
import { InstanceReconciler } from './leader/instance-reconciler';
import { CommitPacer } from './jobs/framework/commit-pacer';
import { jobTable, registryOf, type JobTableOptions } from './jobs/registry';
import { JobRunner } from './jobs/framework/runner';
import { Leadership, type LeaderService } from './leader/leadership';
import { ManagerService } from './submit/manager-service';
import { PeerDirectory, raftAddressOf, splitMember } from './group/members';
import { CommandKind } from './meta/commands';
import { MetaStateMachine } from './meta/state-machine';
import { registerImageWorkMetrics } from './meta/snapshot/image-work';
import { registerApplyStopMetric } from './meta/apply-stop';
import type { Clock } from './meta/store';
import { createManagerMetrics } from './metrics';
import { noSwitchUntil } from './meta/noswitch';
import { buildQueries } from './queries';
import { RaftMetaStore } from './group/raft-meta-store';
import { RollbackFinisher } from './leader/rollback-finisher';
import { RoutingService } from './submit/routing-service';
import { secretBoxFor } from './secrets/secret-box';
import { setBackupStorageSecrets } from './backup/storage';
import { ShardFailureDetector } from './leader/shard-failure-detector';
import { SHARD_FAILOVER, SHARD_REJOIN, shardFailoverJob, shardRejoinJob } from './jobs/shard-ha/failover-job';
import { MasterLeaseKeeper } from './leader/master-leases';
import { forwardServiceDefinition } from './submit/forward/forward-proto';
import { forwardServiceImplementation } from './submit/forward/forward-server';

export interface Manager {
  config: ManagerConfig;
  gateway: FastifyInstance;
  raft: RaftNode;
  store: RaftMetaStore;
  leadership: Leadership;
  /** Finishes recorded rollbacks while this member leads (tests pause it to reach a state). */
  rollbacks: RollbackFinisher;
  /** Runs the backup policies while this member leads (tests run a round with runDue). */
  backupPolicies: BackupPolicyScheduler;
  /** Runs the jobs while this member leads (tests stop it to look at a settled state). */
  runner: JobRunner;
  /** What the gateway serves: submissions (forwarded to the leader), job status, queries. */
  service: JobService;
  logger: Logger;
  /** Binds the gateway on the member's HTTP address. */
  listen(): Promise<void>;
  /** Stops accepting requests, then leader services, then Raft (storage closed last). */
  stop(): Promise<void>;
}

/** The host agents a manager calls: the engine clients of jobs and the host-agent pool. */
/**
 * What a manager is built on. Each has a production default, so main.ts passes none; tests
 * pass typed fakes (a MemoryStorage, an in-process transport, recording agents).
 */
export interface BuildOptions {
  logger?: Logger;
  /** Called after each job step commits on this member (tests count step runs). */
  onStepDone?(jobId: string, step: string): void;
  /** Raft's log and hard state. Default: LevelDB under `<dataDir>/raft`, bootstrapped from the config. */
  storage?: Storage & { close?(): Promise<void> };
  /**
   * Raft messages between members. Default: gRPC on the member's Raft address, which also
   * serves followers' forwarded submissions (forward/); a given transport carries Raft only.
   */
  transport?: Transport;
  /** The host agents. Default: gRPC clients at `<hostaddr>:<config.agentPort>`. */
  agents?: Agents;
  /** Stamps the commands this member proposes (jobs' submittedAt/finishedAt, health). Default: Date.now. */
  clock?: Clock;
  /** Options of particular jobs (delete_shards' table lister, raft_mission's timeouts). */
  jobs?: Omit<JobTableOptions, 'raft'>;
  /**
   * The leader services this member runs when it leads (default: all). Tests of jobs alone
   * run only the job runner, so that no probe or sync calls the fake agents behind their back.
   */
  leaderServices?: readonly LeaderServiceName[];
}

export const LEADER_SERVICES = ['job runner', 'health monitor', 'host facts', 'catalog sync', 'instance reconciler', 'rollback finisher', 'master leases', 'shard failure detector', 'in-doubt resolver', 'binlog archiver', 'logical backups', 'backup policies'] as const;
export type LeaderServiceName = (typeof LEADER_SERVICES)[number];

export async function buildManager(config: ManagerConfig, opts: BuildOptions = {}): Promise<Manager> {
  const now = opts.clock ?? Date.now;
  const logger = opts.logger ?? createLogger({ name: 'manager', level: config.logLevel, base: { member: config.member } });
  // Refuses to build without a secrets key (unless insecure): passwords are never kept in clear.
  const secrets = secretBoxFor(config);
  // An s3 storage's secret key is opened where a storage is opened (backup/storage.ts).
  setBackupStorageSecrets(secrets);
  if (!secrets.sealsForReal) logger.warn('insecure mode without secretsKeyFile: generated database passwords are stored unencrypted in the Raft log and state');
  // HTTPS unless plain HTTP was asked for (gateway/https-listener.ts). Its files are read now,
  // before anything binds: a missing or mismatched one fails the start naming it.
  const listener = emitListenerOf(config);
  if (listener.scheme === 'https') loadHttpsPair(listener.files, listener.from);
  const promRegistry = new Registry();
  collectDefaultMetrics({ register: promRegistry });

  const bootstrapVoters = config.join ? [] : config.initialMembers.length > 0 ? config.initialMembers : [config.member];
  // The Raft log and snapshots: owner only, whatever mode LevelDB gives its files.
  if (!opts.storage) makePrivateDirSync(config.dataDir);
  const storage = opts.storage ?? (await LevelStorage.open(path.join(config.dataDir, 'raft'), { bootstrap: { voters: bootstrapVoters, learners: [] } }));

  // Followers forward submissions to the leader on its Raft address (forward/).
  let routing: RoutingService | undefined;
  const forwardService = { definition: forwardServiceDefinition, implementation: forwardServiceImplementation(() => routing, logger.child({ component: 'forward' })) };
  // Members state their kcm protocol on every call and refuse one they do not talk to; the
  // Member service tells the others this build's protocol and release (group/member-versions.ts).
  const protocolIdentity = managerProtocolIdentity(config.member, logger.child({ component: 'kcm-protocol' }));
  const memberService = { definition: memberServiceDefinition, implementation: memberServiceImplementation(config.member, Date.now()) };
  const grpcTransport =
    opts.transport ??
    new GrpcTransport({
      id: config.member,
      listen: raftAddressOf(config.member),
      peers: {},
      extraServices: [forwardService, memberService],
      logger: logger.child({ component: 'raft-transport' }),
      // The members' links take their credentials from the same place as the agents'; Raft,
      // snapshots and forwarding accept manager-role certificates only.
      channelCredentials: channelCredentials(),
      serverCredentials: serverCredentials(),
      serverInterceptors: [protocolServerGuard(protocolIdentity), callerGuard({ kind: 'managers' })],
      clientInterceptors: (address) => [protocolClientInterceptor(address, protocolIdentity)],
    });
  const peers = new PeerDirectory(grpcTransport, [...config.initialMembers, ...storage.initialState().confState.voters, ...storage.initialState().confState.learners]);
  // A member we never heard of (the leader that adds us, a new learner) must be answerable.
  const transport: Transport = {
    start: () => grpcTransport.start(),
    send: (msgs) => grpcTransport.send(msgs),
    onMessage: (handler) =>
      grpcTransport.onMessage((m) => {
        peers.learnSender(m);
        handler(m);
      }),
    onUnreachable: (handler) => grpcTransport.onUnreachable(handler),
    onSnapshotStatus: (handler) => grpcTransport.onSnapshotStatus(handler),
    setPeers: (p) => grpcTransport.setPeers(p),
    stop: () => grpcTransport.stop(),
  };

  let runner: JobRunner | undefined;
  let logicalBackups: LogicalBackupScheduler | undefined;
  const observeImageWork = registerImageWorkMetrics(promRegistry);
  const sm = new MetaStateMachine({
    onImageWork: observeImageWork,
    onApplied(cmd) {
      if (cmd.kind === CommandKind.JobSubmitted || cmd.kind === CommandKind.JobFinished) runner?.notify();
      if (cmd.kind === CommandKind.LogicalBackupScheduled) logicalBackups?.notify();
    },
    onConfEntry(entry: Entry) {
      peers.learn([decodeConfChange(entry.data).node]);
    },
  });

  const raft = await RaftNode.start({
    id: config.member,
    storage,
    transport,
    stateMachine: sm,
    tickMs: config.tickMs,
    electionTick: config.electionTick,
    snapshotEntries: config.snapshotEntries,
    logger: logger.child({ component: 'raft' }),
  });
  peers.learnConf(raft.status().conf);
  registerApplyStopMetric(promRegistry, () => sm.applyStop);
  registerBackupPolicyMetrics(promRegistry, { state: () => sm.state, now });
  // The driver has stopped this member (it logged why): say it once more in the manager's own
  // words when the cause is a command kind this kcm does not know (meta/apply-stop.ts).
  raft.on('fatal', (err) => {
    const stop = sm.applyStop;
    if (stop) logger.fatal({ index: stop.index, term: stop.term, kind: stop.kind }, stop.message);
    else logger.fatal({ err }, 'the Raft member stopped; this manager no longer takes part in the group until restarted');
  });

  let monitor: HealthMonitor | undefined;
  const metrics = createManagerMetrics(promRegistry, { raft: () => raft, state: () => sm.state, health: () => (leadership.isLeader ? monitor : undefined), shardMasters: () => failureDetector.masterHealth(), inDoubtXa: () => inDoubtResolver.inDoubt(), now, member: config.member });
  const memberVersions = new MemberVersions({ self: config.member, members: () => [...raft.status().conf.voters, ...raft.status().conf.learners], identity: protocolIdentity, logger: logger.child({ component: 'member-versions' }) });
  memberVersions.start();
  // No command kind is proposed that a member of an older build could not apply (group/protocol-gate.ts).
  const store = new RaftMetaStore(raft, sm, undefined, commandProtocolGate(memberVersions));
  const observedStore = {
    state: () => store.state(),
    async propose(cmd: Parameters<RaftMetaStore['propose']>[0]) {
      const started = performance.now();
      try {
        const outcome = await store.propose(cmd);
        metrics.observeProposal(outcome.ok ? 'ok' : 'refused', (performance.now() - started) / 1000);
        return outcome;
      } catch (err) {
        metrics.observeProposal('error', (performance.now() - started) / 1000);
        throw err;
      }
    },
  };

  // One bounded pool for every agent client (@kcm/agent-api), or the test's fake.
  const agents: Agents = opts.agents ?? new AgentPool(config.agentPort);
  const { withAgent } = agents;
  const engineAgents = agents;
  // Internal job types (submitted by the leader, not accepted from Emit) run like the others.
  const table = jobTable({
    manualSwitch: { maxBehindTrx: config.manualSwitchMaxBehindTrx, catchUpMs: config.manualSwitchCatchUpMs, hold: { holdMs: config.switchHoldMs, drainMs: config.switchDrainMs } },
    engineVersions: { storage: config.defaultStorageVersion, computer: config.defaultComputerVersion },
    ...opts.jobs,
    raft,
    keepFinishedJobs: config.finishedJobsKept,
    backup: { pvLimitMb: config.backupPvLimitMb, maxReplicaDelayS: config.backupMaxReplicaDelayS, compression: config.backupCompression === 'zstd' ? 'zstd' : '', ...opts.jobs?.backup },
    moves: { limits: { chunkRows: config.moveChunkRows, copyRowsPerSecond: config.moveCopyRowsPerSecond, maxTargetLagTrx: config.moveMaxTargetLagTrx }, ...opts.jobs?.moves },
  });
  // Leases on the shard masters: a failover of a master it cannot reach waits for its lease (leader/master-leases.ts).
  const masterLeases = new MasterLeaseKeeper({ store: observedStore, agents: engineAgents, logger: logger.child({ component: 'master-leases' }),
    // A third of the lease at most often: three renewals may be lost before one runs out, at one call per host a round.
    intervalMs: Math.max(config.failureDetectIntervalMs, Math.floor(config.masterLeaseMs / 3)), leaseMs: config.masterLeaseMs, electionTimeoutMs: 2 * config.electionTick * config.tickMs });
  const registry = new Map([...registryOf(table), [SHARD_FAILOVER, shardFailoverJob({ leases: masterLeases, holdMs: config.switchHoldMs })], [SHARD_REJOIN, shardRejoinJob]]);

  // The runner's own commits share Raft rounds with the next submission (see jobs/framework/commit-pacer.ts).
  const pacer = new CommitPacer(observedStore);
  const stepServices = { propose: (cmd: Parameters<RaftMetaStore['propose']>[0]) => observedStore.propose(cmd), agents: engineAgents, withAgent, logger: logger.child({ component: 'jobs' }), now, secrets, groupProtocol: memberVersions };
  runner = new JobRunner(pacer.runnerStore, registry, stepServices, {
    onStepDone(job, step, ms) {
      metrics.observeStep(job, step, ms / 1000);
      opts.onStepDone?.(job.id, step);
    },
    onJobFinished: (job, outcome) => metrics.observeJobFinished(job, outcome),
    caughtUp: () => store.linearizableRead(),
  }, { keepFinishedJobs: config.finishedJobsKept });
  monitor = new HealthMonitor({ store: observedStore, withAgent, logger: logger.child({ component: 'health' }), intervalMs: config.healthIntervalMs, deadAfterMs: config.machineDeadAfterMs, now, onRoundEnd: (s) => metrics.observeHealthProbeRound(s) });

  const activeRunner = runner;
  const activeMonitor = monitor;
  const hostFacts = new HostFactsRefresher({ store: observedStore, withAgent, logger: logger.child({ component: 'host-facts' }), intervalMs: config.hostFactsIntervalMs, now,
    // A host the monitor has not heard yet is asked (its first round may not have ended); one it lost is not.
    reachable: (hostaddr) => activeMonitor.reachability(hostaddr)?.reachable !== false });
  const catalogSync = new CatalogSync({ store: observedStore, agents: engineAgents, secrets, logger: logger.child({ component: 'catalog-sync' }) });
  const reconciler = new InstanceReconciler({ store: observedStore, agents: engineAgents, logger: logger.child({ component: 'reconciler' }), intervalMs: config.reconcileIntervalMs });
  const failureDetector = new ShardFailureDetector({ store: observedStore, agents: engineAgents, secrets, logger: logger.child({ component: 'failure-detector' }), intervalMs: config.failureDetectIntervalMs, graceMs: config.failureGraceMs, now,
    // set_noswitch: no automatic failover of a shard while its window is open.
    switchSuppressed: (state, clusterId, shardId) => noSwitchUntil(state, clusterId, shardId, now()) !== null });
  const inDoubtResolver = new InDoubtResolver({ store: observedStore, agents: engineAgents, logger: logger.child({ component: 'in-doubt-resolver' }), now,
    intervalMs: config.xaResolveIntervalMs, inDoubtAfterMs: config.xaInDoubtAfterMs, onResolved: (outcome, branches) => metrics.observeXaResolved(outcome, branches) });
  const rollbacks = new RollbackFinisher({ store: observedStore, agents: engineAgents, withAgent, logger: logger.child({ component: 'rollback' }), intervalMs: config.rollbackRetryIntervalMs, now, caughtUp: () => store.linearizableRead() });
  logicalBackups = new LogicalBackupScheduler({
    store: observedStore,
    agents: engineAgents,
    openStorage: opts.jobs?.logical?.openStorage ?? openLogicalStorage,
    member: config.member,
    now,
    logger: logger.child({ component: 'logical-backup' }),
  });
  const activeLogicalBackups = logicalBackups;
  const binlogArchiver = new BinlogArchiver({
    store: observedStore, agents: engineAgents, logger: logger.child({ component: 'binlog-archiver' }), now, secrets,
    intervalMs: config.binlogArchiveIntervalMs, onLag: (s) => metrics.observeBinlogArchiveLag(s),
  });
  // The policies' backup jobs are submitted through this member's own job service (set below, once it exists).
  let submitPolicyRun: ((req: ValidRequest) => Promise<{ jobId: string }>) | undefined;
  const backupPolicies = new BackupPolicyScheduler({
    store: observedStore,
    submit: (req) => {
      if (!submitPolicyRun) throw new Error('the job service is not built yet');
      return submitPolicyRun(req);
    },
    openStorage: opts.jobs?.backup?.openStorage ?? openBackupStorage,
    member: config.member,
    now,
    logger: logger.child({ component: 'backup-policy' }),
  });
  const leaderServices: (LeaderService & { name: LeaderServiceName })[] = [
    { name: 'job runner', start: () => activeRunner.start(), stop: () => activeRunner.stop() },
    { name: 'health monitor', start: () => activeMonitor.start(), stop: () => activeMonitor.stop() },
    { name: 'host facts', start: () => hostFacts.start(), stop: () => hostFacts.stop() },
    { name: 'catalog sync', start: () => catalogSync.start(), stop: () => catalogSync.stop() },
    { name: 'instance reconciler', start: () => reconciler.start(), stop: () => reconciler.stop() },
    { name: 'rollback finisher', start: () => rollbacks.start(), stop: () => rollbacks.stop() },
    { name: 'master leases', start: () => masterLeases.start(), stop: () => masterLeases.stop() },
    { name: 'shard failure detector', start: () => failureDetector.start(), stop: () => failureDetector.stop() },
    { name: 'in-doubt resolver', start: () => inDoubtResolver.start(), stop: () => inDoubtResolver.stop() },
    { name: 'binlog archiver', start: () => binlogArchiver.start(), stop: () => binlogArchiver.stop() },
    { name: 'logical backups', start: () => activeLogicalBackups.start(), stop: () => activeLogicalBackups.stop() },
    { name: 'backup policies', start: () => backupPolicies.start(), stop: () => backupPolicies.stop() },
  ];
  const wanted = new Set<LeaderServiceName>(opts.leaderServices ?? LEADER_SERVICES);
  const leadership = new Leadership(
    leaderServices.filter((service) => wanted.has(service.name)),
    logger,
  );
  raft.on('leaderChange', (leader, term) => {
    logger.info({ leader, term }, 'leader changed');
    void leadership.update(leader === config.member, term);
  });
  if (raft.status().leader === config.member) void leadership.update(true, raft.status().term);

  const leaderHasAppliedAllCommitted = (): boolean => {
    const st = raft.status();
    if (st.role !== 'leader' || st.applied < st.commit) return false;
    try {
      return storage.term(st.commit) === st.term;
    } catch {
      return false; // commit beyond the local log or compacted: take the slow path
    }
  };
  const local = new ManagerService({
    store: pacer.submitterStore,
    registry,
    queries: buildQueries({ conf: () => raft.status().conf, leader: () => raft.status().leader, withAgent, agents: engineAgents, now, configTokens: config.tokens, raftStatus: () => raft.status(), memberVersions: () => memberVersions.list() }),
    linearizableRead: () => store.linearizableRead(),
    // A leader that has committed an entry of its own term knows every committed entry; once
    // it has applied them, validation needs no heartbeat round (anything else takes ReadIndex).
    validationBarrier: () => (leaderHasAppliedAllCommitted() ? Promise.resolve() : store.linearizableRead()),
    onSubmitted: () => activeRunner.notify(),
    secrets,
    maxJobsPerCluster: config.maxJobsPerCluster,
    now,
  });
  submitPolicyRun = (req) => local.submitJob(req);
  const service = new RoutingService({
    local,
    self: config.member,
    leader: () => raft.status().leader,
    onLeaderChange: (listener) => raft.on('leaderChange', listener),
  });
  routing = service;
  // No unauthenticated mode but the explicit insecure one, which says so on every start.
  if (config.insecure) logger.warn('INSECURE: Emit is served without authentication (insecure: true / --insecure); never run a real deployment like this');
  else if (config.tokens.length === 0) logger.warn('no tokens in the config: only tokens in the replicated state (create_token) can authenticate');
  const auth = config.insecure ? ({ insecure: true } as const) : { lookup: tokenDirectory(config.tokens, () => sm.state) };
  if (listener.scheme === 'http') logger.warn({ because: listener.because }, 'Emit and the console are served over plain HTTP: bearer tokens and returned passwords cross the network in clear');
  // The served certificate's expiry on /metrics, beside the gRPC one's.
  const https = listener.scheme === 'https'
    ? { files: listener.files, configKey: listener.from, onServing: (current: () => X509Certificate) => exportCertExpiry(promRegistry, { member: config.member, use: 'https' }, current) }
    : undefined;
  const gateway = buildGateway({ service, logger: logger.child({ component: 'gateway' }), auth, member: config.member, registry: promRegistry, https,
    unhealthy: () => (sm.applyStop ? { status: 'apply stopped', reason: sm.applyStop.message } : undefined),
    mintToken: requestBoundTokens(secrets),
    rateLimit: { ratePerSecond: config.emitRatePerSecond, burst: config.emitRateBurst } });

  const { host, port } = splitMember(config.member);
  let stopping: Promise<void> | undefined;
  return {
    config,
    gateway,
    raft,
    store,
    leadership,
    rollbacks,
    backupPolicies,
    runner: activeRunner,
    service,
    logger,
    async listen() {
      await gateway.listen({ host, port });
      logger.info({ url: `${listener.scheme}://${config.member}`, raft: raftAddressOf(config.member), ...(listener.scheme === 'https' ? { certificate: listener.files.cert } : {}) }, 'manager listening');
    },
    stop() {
      stopping ??= (async () => {
        await gateway.close();
        service.close();
        await leadership.update(false, raft.status().term);
        await raft.stop();
        memberVersions.stop();
        agents.close();
      })();
      return stopping;
    },
  };
}
