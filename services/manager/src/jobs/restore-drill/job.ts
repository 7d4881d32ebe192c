// Job: run_restore_drill (beyond the spec, issue 33 item 4; docs/restore-drills.md). Proves a
// backup set restores: a scratch cluster is built on the machines the operator named
// (create_cluster's steps), the set is restored into it (cluster_restore's steps), its tables'
// rows and checksums are compared with the figures recorded when the set was taken, RTO and
// data-age RPO are measured, and the scratch cluster is deleted. Every step is one of those
// families' own or idempotent here; op ids carry the drill's job id, so a new leader resumes
// the drill at its first unfinished step and finds the work before it done.
//
// The scratch cluster is always deleted: by the step after the check, or by the rollback of
// any step that failed. A host that does not answer leaves a recorded rollback (under the
// drill's own record id, which outlives the job), finished by the leader's rollback finisher
// when the host answers (jobs/rollback.ts): never forgotten.
//
// The outcome is recorded in the replicated state whether the drill passed or failed
// (meta/restore-drills.ts): get_cluster_detail and the kcm_restore_drill_* metrics read it.
// A drill whose tables differ ends failed with DATA_CHECK_FAILED, naming them.

import { KcmError, type RestoreDrillResult } from '@kcm/protocol';
import { CommandKind } from '../../meta/commands';
import { clusterCreatedByJob } from '../../meta/clusters';
import { own } from '../../meta/dict';
import { drillsOfCluster, type RestoreDrillOutcome } from '../../meta/restore-drills';
import type { BackupSetRecord, MetaState } from '../../meta/state';
import { clusterById, clusterOfStep, readyCluster } from '../cluster-lookup';
import { createClusterSteps, planCluster, type CreateOutputs } from '../cluster';
import { restorePlanOfSet, restoreSteps, type RestoreOutputs, type RestoreTarget } from '../cluster-restore';
import type { EngineVersionDefaults } from '../engine-versions';
import { orThrow } from '../framework/errors';
import { requireGroupProtocol } from '../../group/protocol-gate';
import type { JobOf, JobStep, StepContext } from '../framework/workflow';
import { rollBackJob, wholeClusterPlan } from '../rollback';
import { dataAgeRpoS, drillVerdict, restoreRtoMs } from './measure';
import { chooseDrillSets, scratchClusterParas, type DrillChoice, type ResolvedDrillParas } from './plan';

interface DrillOutputs extends CreateOutputs, RestoreOutputs {
  /** When the drill started (its RPO's "now") and the point it restores (the checked set's end). */
  'choose the backup set': { startedAt: number; pointAt: number };
  /** When the restore started: the scratch cluster stands, empty (RTO counts from here). */
  'start the restore clock': number;
  'check the restored tables': { verifiedAt: number; tablesChecked: number; mismatches: RestoreDrillOutcome['mismatches'] };
  'delete the scratch cluster': ScratchDeletion;
  'record the drill': RestoreDrillOutcome;
}

type Ctx = StepContext<ResolvedDrillParas, DrillOutputs>;

interface ScratchDeletion {
  scratchClusterId: string;
  /** false: left as a recorded rollback (a host did not answer). */
  deleted: boolean;
  note?: string;
}

/** The id the scratch cluster's removal is recorded under when a host does not answer: not the job's, so it outlives the job. */
export const scratchRollbackId = (drillJobId: string): string => `drill-scratch-${drillJobId}`;

function committed(p: ResolvedDrillParas): { choice: DrillChoice; scratch: NonNullable<ResolvedDrillParas['scratch']> } {
  if (!p.choice || !p.scratch) throw KcmError.of('INTERNAL', 'run_restore_drill was committed without its resolved choice');
  return { choice: p.choice, scratch: p.scratch };
}

function setStillThere(state: MetaState, id: string): BackupSetRecord {
  const set = own(state.backupSets, id);
  if (!set) throw KcmError.of('NOT_FOUND', `backup set ${id} no longer exists (expired by its retention?)`);
  return set;
}

/**
 * The replay's time bound as Unix seconds: the checked set's end, rounded up, plus a second
 * (> 0, as a replay's stop time must be). Its position was reached by then: a point-in-time
 * drill's replay ends at that exact position (stopGtids), files begun later are not read.
 */
const stopTimeOf = (set: BackupSetRecord): number => Math.ceil(set.finishedAt / 1000) + 1;

/** What cluster_restore's steps restore in a drill: the chosen set, into the scratch cluster. */
function drillRestoreTarget(choice: DrillChoice): RestoreTarget {
  const scratchId = (ctx: StepContext<unknown, RestoreOutputs>) => (ctx.outputs as Readonly<DrillOutputs>)['plan placement'].clusterId;
  return {
    dstClusterId: scratchId,
    plan(ctx) {
      const state = ctx.state();
      const restored = setStillThere(state, choice.restoredBackupId);
      const checked = setStillThere(state, choice.checkedBackupId);
      const dst = readyCluster(state, scratchId(ctx), 'the scratch cluster');
      const stopGtids = new Map(checked.shards.map((s) => [s.shardId, s.gtidPos]));
      return restorePlanOfSet(state, { dst, set: restored, stopTime: stopTimeOf(checked), replay: choice.mode === 'point_in_time', stopGtids, dstField: 'the scratch cluster', timeField: 'paras.point_in_time' });
    },
  };
}

/** Removes the scratch cluster; what a host does not let go is recorded and removed later. Idempotent. */
async function deleteScratch(ctx: Ctx): Promise<ScratchDeletion> {
  const recordId = scratchRollbackId(ctx.jobId);
  const cluster = clusterCreatedByJob(ctx.state(), ctx.jobId);
  if (!cluster) {
    const pending = own(ctx.state().pendingRollbacks, recordId);
    return { scratchClusterId: pending?.clusterId ?? ctx.outputs['plan placement']?.clusterId ?? '', deleted: !pending };
  }
  const note = await rollBackJob({ store: ctx, agents: ctx.agents, logger: ctx.logger, now: ctx.now, secrets: ctx.secrets }, recordId, 'run_restore_drill', wholeClusterPlan(cluster));
  return { scratchClusterId: cluster.id, deleted: note === undefined, ...(note ? { note } : {}) };
}

/** The drill's outcome from what its steps measured (those that did not run leave theirs empty). */
function outcomeOf(ctx: Ctx, deletion: ScratchDeletion, error?: string): RestoreDrillOutcome {
  const { choice } = committed(ctx.paras);
  const chosen = ctx.outputs['choose the backup set'];
  const started = ctx.outputs['start the restore clock'];
  const check = ctx.outputs['check the restored tables'];
  const passed = error === undefined && check !== undefined && check.mismatches.length === 0;
  return {
    clusterId: ctx.paras.cluster_id,
    jobId: ctx.jobId,
    passed,
    backupId: choice.checkedBackupId,
    restoredBackupId: choice.restoredBackupId,
    mode: choice.mode,
    pointAt: chosen?.pointAt ?? 0,
    rtoMs: started !== undefined && check ? restoreRtoMs(started, check.verifiedAt) : null,
    rpoS: chosen ? dataAgeRpoS(chosen.startedAt, chosen.pointAt) : null,
    tablesChecked: check?.tablesChecked ?? 0,
    mismatches: check?.mismatches ?? [],
    scratchClusterId: deletion.scratchClusterId,
    scratchDeleted: deletion.deleted,
    finishedAt: ctx.now(),
    ...(error !== undefined ? { error } : !passed ? { error: mismatchText(check?.mismatches ?? []) } : {}),
  };
}

const mismatchText = (mismatches: RestoreDrillOutcome['mismatches']): string =>
  `the restored tables differ from the figures recorded at backup time: ${mismatches.slice(0, 5).map((m) => `${m.table}: ${m.what}`).join('; ')}${mismatches.length > 5 ? `; and ${mismatches.length - 5} more` : ''}`;

/** What run_restore_drill answers and get_cluster_detail shows as a drill. */
export function restoreDrillResult(o: RestoreDrillOutcome): RestoreDrillResult {
  return {
    cluster_id: o.clusterId,
    job_id: o.jobId,
    passed: o.passed ? 'true' : 'false',
    backup_id: o.backupId,
    restored_backup_id: o.restoredBackupId,
    mode: o.mode,
    point_time: String(Math.floor(o.pointAt / 1000)),
    rto_ms: o.rtoMs === null ? '' : String(o.rtoMs),
    rpo_s: o.rpoS === null ? '' : String(o.rpoS),
    tables_checked: String(o.tablesChecked),
    list_mismatch: o.mismatches.map((m) => ({ table: m.table, what: m.what })),
    scratch_cluster_id: o.scratchClusterId,
    scratch_deleted: o.scratchDeleted ? 'true' : 'pending',
    finished_at: String(Math.floor(o.finishedAt / 1000)),
    ...(o.error !== undefined ? { error: o.error } : {}),
  };
}

function validateDrill(p: ResolvedDrillParas, state: MetaState): void {
  clusterById(state, p.cluster_id);
  const choice = chooseDrillSets(state, p);
  // The scratch machines can hold it now (the same check, and field names, as create_cluster's).
  planCluster(scratchClusterParas(state, p, choice), state);
}

/** run_restore_drill, its scratch cluster built with the engine versions a create_cluster naming none gets. */
export const runRestoreDrillJob = (engines?: EngineVersionDefaults): JobOf<'run_restore_drill', DrillOutputs, ResolvedDrillParas> => ({
  jobType: 'run_restore_drill',
  validate: validateDrill,
  resolve(p, state) {
    const choice = chooseDrillSets(state, p);
    return { ...p, choice, scratch: scratchClusterParas(state, p, choice) };
  },
  // One drill of a cluster at a time; the cluster's own jobs (backups) go on meanwhile.
  lockKey: (p) => `restore-drill:${p.cluster_id}`,
  steps(p) {
    const { choice, scratch } = committed(p);
    const drillStep = <K extends keyof DrillOutputs & string>(step: { name: K; run(ctx: Ctx): Promise<DrillOutputs[K]> }) => step as JobStep<ResolvedDrillParas, DrillOutputs>;
    // Steps of other families, run with the drill's context (they read only their own outputs, all part of the drill's).
    const borrowed = (steps: readonly unknown[]) => steps as JobStep<ResolvedDrillParas, DrillOutputs>[];
    return [
      drillStep({
        name: 'choose the backup set',
        async run(ctx) {
          // A manager of protocol 1 would apply the scratch cluster's creation without its mark, and no drill record at all.
          await requireGroupProtocol(ctx, 2, 'run_restore_drill');
          const checked = setStillThere(ctx.state(), choice.checkedBackupId);
          setStillThere(ctx.state(), choice.restoredBackupId);
          return { startedAt: ctx.now(), pointAt: checked.finishedAt };
        },
      }),
      ...borrowed(createClusterSteps(scratch, engines, p.cluster_id)),
      drillStep({ name: 'start the restore clock', run: async (ctx) => ctx.now() }),
      ...borrowed(restoreSteps(drillRestoreTarget(choice))),
      drillStep({
        name: 'check the restored tables',
        async run(ctx) {
          const checked = setStillThere(ctx.state(), choice.checkedBackupId);
          const scratchCluster = clusterOfStep(ctx, ctx.outputs['plan placement'].clusterId);
          const scratchShards = Object.values(scratchCluster.shards).sort((a, b) => Number(a.id) - Number(b.id));
          const recorded = [...checked.shards].sort((a, b) => Number(a.shardId) - Number(b.shardId));
          // Read on each restored master, not held (nothing writes to a scratch cluster).
          const shards = await Promise.all(recorded.map(async (source, i) => {
            const master = scratchShards[i].nodes[scratchShards[i].masterNodeId];
            const reply = await ctx.agents.mariadbHa(master.hostaddr).tableChecksums(master.port, false);
            return { recorded: source.tableChecksums ?? [], restored: reply.tables };
          }));
          return { verifiedAt: ctx.now(), ...drillVerdict(shards) };
        },
      }),
      drillStep({ name: 'delete the scratch cluster', run: (ctx) => deleteScratch(ctx) }),
      drillStep({
        name: 'record the drill',
        async run(ctx) {
          const outcome = outcomeOf(ctx, ctx.outputs['delete the scratch cluster']);
          orThrow(await ctx.propose({ kind: CommandKind.RestoreDrillRecorded, at: ctx.now(), outcome }));
          if (!outcome.passed) throw KcmError.of('DATA_CHECK_FAILED', `restore drill of set ${outcome.backupId} failed: ${outcome.error}`);
          return outcome;
        },
      }),
    ];
  },
  result: (outputs) => restoreDrillResult(outputs['record the drill']),
  /**
   * Whatever failed, the scratch cluster goes (what a host does not let go is recorded and
   * finished later), and the failed drill is recorded unless its last step recorded it.
   */
  async rollback(ctx, failedStep, error) {
    const deletion = await deleteScratch(ctx);
    const recorded = drillsOfCluster(ctx.state(), ctx.paras.cluster_id)?.last;
    if (recorded?.jobId !== ctx.jobId) {
      const outcome = outcomeOf(ctx, deletion, `step ${failedStep} failed: ${error.message}`);
      orThrow(await ctx.propose({ kind: CommandKind.RestoreDrillRecorded, at: ctx.now(), outcome }));
    }
    return deletion.note;
  },
});
