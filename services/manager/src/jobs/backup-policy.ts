// Job family: backup policies (set_backup_policy, delete_backup_policy; issue 33). A job only
// records the policy in the replicated state; the leader's backup policy scheduler
// (leader/backup-policy-scheduler.ts) runs its backups and its expiry.

import { KcmError, parseBackupWindow, type BackupPolicyResult, type ParasOf } from '@kcm/protocol';
import { CommandKind } from '../meta/commands';
import { policyOfCluster, type BackupPolicyRecord } from '../meta/backup-policies';
import { defaultBackupStorage } from '../meta/backup';
import { own } from '../meta/dict';
import type { MetaState } from '../meta/state';
import { clusterById } from './cluster-lookup';
import { orThrow } from './framework/errors';
import type { JobOf } from './framework/workflow';

export const DEFAULT_FULL_EVERY_HOURS = 24;
export const DEFAULT_POLICY_WINDOW = '00:00:00-23:59:59';

type SetParas = ParasOf<'set_backup_policy'>;

function checkSet(p: SetParas, state: MetaState): void {
  clusterById(state, p.cluster_id);
  if (p.storage_name !== undefined && !own(state.backupStorages, p.storage_name)) {
    throw KcmError.of('NOT_FOUND', `paras.storage_name: backup storage ${p.storage_name} does not exist`, { field: 'paras.storage_name' });
  }
  if (p.storage_name === undefined && Object.keys(state.backupStorages).length === 0) {
    throw KcmError.of('CONFLICT', 'paras.storage_name: no backup storage is registered; register one with create_backup_storage first', { field: 'paras.storage_name' });
  }
  if (own(state.clusters, p.cluster_id)?.scratchOfDrill) {
    throw KcmError.of('CONFLICT', `paras.cluster_id: cluster ${p.cluster_id} is a restore drill's scratch cluster, deleted when its drill ends`, { field: 'paras.cluster_id' });
  }
  // The scheduled drills' machines are registered now (each drill checks they can hold its scratch cluster).
  const machines = [['drill_storage_iplists', 'storage'], ['drill_computer_iplists', 'computer']] as const;
  for (const [field, machineType] of machines) {
    (p[field] ?? []).forEach((hostaddr, i) => {
      if (!own(state.machines, `${hostaddr}/${machineType}`)) throw KcmError.of('NOT_FOUND', `paras.${field}[${i}]: ${hostaddr} is not registered as a ${machineType} machine`, { field: `paras.${field}[${i}]` });
    });
  }
}

/** The policy a set_backup_policy records (defaults filled). */
export function policyOf(p: SetParas, jobId: string): Omit<BackupPolicyRecord, 'setAt' | 'lastRun' | 'lastDrill'> {
  const window = p.window ?? DEFAULT_POLICY_WINDOW;
  const bounds = parseBackupWindow(window);
  if (!bounds.ok) throw KcmError.of('INVALID_PARAS', `paras.window ${bounds.rule}`, { field: 'paras.window' });
  return {
    clusterId: p.cluster_id,
    fullEveryHours: p.full_every_hours ?? DEFAULT_FULL_EVERY_HOURS,
    window,
    startSecond: bounds.value.startSecond,
    endSecond: bounds.value.endSecond,
    keepDays: p.keep_days ?? null,
    keepSets: p.keep_sets ?? null,
    storageName: p.storage_name ?? null,
    setByJob: jobId,
    drill: p.drill_every_days === undefined ? null : { everyDays: p.drill_every_days, storageIplists: p.drill_storage_iplists ?? [], computerIplists: p.drill_computer_iplists ?? [] },
  };
}

/** What set_backup_policy answers and get_cluster_detail shows as `backup_policy`. */
export function backupPolicyResult(policy: Omit<BackupPolicyRecord, 'setAt' | 'lastRun' | 'lastDrill'>, defaultStorage: string | undefined): BackupPolicyResult {
  return {
    cluster_id: policy.clusterId,
    full_every_hours: String(policy.fullEveryHours),
    window: policy.window,
    ...(policy.keepDays === null ? {} : { keep_days: String(policy.keepDays) }),
    ...(policy.keepSets === null ? {} : { keep_sets: String(policy.keepSets) }),
    storage: policy.storageName ?? defaultStorage ?? '',
    ...(policy.drill ? { drill_every_days: String(policy.drill.everyDays), drill_storage_iplists: [...policy.drill.storageIplists], drill_computer_iplists: [...policy.drill.computerIplists] } : {}),
  };
}

type RecordedPolicy = { policy: Omit<BackupPolicyRecord, 'setAt' | 'lastRun' | 'lastDrill'>; defaultStorage: string | undefined };

export const setBackupPolicy: JobOf<'set_backup_policy', { 'record policy': RecordedPolicy }> = {
  jobType: 'set_backup_policy',
  validate: checkSet,
  // In the cluster's queue: never beside a delete_cluster of it.
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: (p) => [
    {
      name: 'record policy',
      async run(ctx) {
        const policy = policyOf(p, ctx.jobId);
        orThrow(await ctx.propose({ kind: CommandKind.BackupPolicySet, at: ctx.now(), policy }));
        return { policy, defaultStorage: defaultBackupStorage(ctx.state())?.name };
      },
    },
  ],
  result: (o) => backupPolicyResult(o['record policy'].policy, o['record policy'].defaultStorage),
};

export const deleteBackupPolicy: JobOf<'delete_backup_policy', { 'remove policy': null }> = {
  jobType: 'delete_backup_policy',
  validate(p, state) {
    if (!policyOfCluster(state, p.cluster_id)) throw KcmError.of('NOT_FOUND', `paras.cluster_id: cluster ${p.cluster_id} has no backup policy`, { field: 'paras.cluster_id' });
  },
  lockKey: (p) => `cluster:${p.cluster_id}`,
  steps: (p) => [
    {
      name: 'remove policy',
      async run(ctx) {
        if (!policyOfCluster(ctx.state(), p.cluster_id)) return null; // re-run after a crash: removed already
        // The sets and binlogs stay: kcm stops taking and expiring them, it never wipes backups.
        orThrow(await ctx.propose({ kind: CommandKind.BackupPolicyRemoved, at: ctx.now(), clusterId: p.cluster_id }));
        return null;
      },
    },
  ],
  result: () => ({}),
};
