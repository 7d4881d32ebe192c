// The job registry: one entry per async job type of the protocol, checked by the compiler.
// A job type added to libs/protocol (JOB_TYPES + JOB_MODES 'async') fails to compile here
// until it gets its definition or is marked 'unsupported' (answered UNSUPPORTED at
// submission); each definition's result must be the protocol's ResultOf<that type>.
// test/jobs/registry-exhaustive.test.ts compiles a fixture to keep that check honest.

import { createToken, deleteToken } from './tokens';
import { cancelJobJob } from './cancel';
import type { AsyncJobType, ParasOf, ResultOf } from '@kcm/protocol';
import type { RaftNode } from '@kcm/raft';
import { createClusterJob, deleteCluster } from './cluster';
import type { EngineVersionDefaults } from './engine-versions';
import { clusterRestore } from './cluster-restore';
import { updateInstanceCgroup } from './cgroup';
import { addComps, deleteComp } from './comps';
import { createMachine, deleteMachine, setMachine } from './machines';
import { logicalBackupJob, logicalRestoreJob, type LogicalJobDeps } from './logical';
import { addNodes, deleteNodes, rebuildNode } from './nodes';
import { raftMissionJob, type RaftMissionDeps } from './raft-mission';
import { addShards, deleteShardsJob } from './shards';
import { setNoswitch } from './shard-ha/set-noswitch';
import { manualSwitchJob, type ManualSwitchLimits } from './shard-ha/manual-switch';
import type { JobDefinition } from './framework/workflow';
import type { JobRegistry } from './framework/runner';
import { openBackupStorage } from '../backup/storage';
import { manualBackupClusterJob, type BackupJobDeps } from './backup';
import { createBackupStorageJob, deleteBackupStorage } from './backup-storage';
import { rotateBackupKey } from './backup-keys';
import { openLogicalStorage } from '../backup/logical-storage';
import { expandClusterJob } from './moves/expand';
import type { MoveDeps } from './moves/engine';
import { rotateClusterPasswords } from './passwords';
import { repartitionTablesJob } from './repartition/job';
import { upgradeClusterJob } from './upgrade/upgrade-cluster';
import { deleteBackupPolicy, setBackupPolicy } from './backup-policy';
import { runRestoreDrillJob } from './restore-drill/job';

/** The definition of job type T: its paras, any step outputs, the protocol's result for T. */
export type JobDefinitionOf<T extends AsyncJobType> = JobDefinition<ParasOf<T>, any, ResultOf<T>> & { jobType: T };

/** Every async job type: its definition, or 'unsupported' until its family lands. */
export type JobTable = { readonly [T in AsyncJobType]: JobDefinitionOf<T> | 'unsupported' };

export interface JobTableOptions extends Omit<RaftMissionDeps, 'raft'> {
  raft: RaftNode;
  /** manual_switch's limits (manager config manualSwitchMaxBehindTrx, manualSwitchCatchUpMs). */
  manualSwitch?: ManualSwitchLimits;
  /** Full backups: the storage implementations, throttle and sources (defaults: the real ones, config's limits). */
  backup?: Partial<BackupJobDeps>;
  /** Where logical backups are kept (default: the backup storages in the replicated state). */
  logical?: LogicalJobDeps;
  /** The finished-job history kept (config finishedJobsKept): a job cancel_job ends at once is trimmed like any other. */
  keepFinishedJobs?: number;
  /** Table moves: the copy's limits (config move*). */
  moves?: MoveDeps;
  /** Engine versions of a create_cluster naming none (config defaultStorageVersion, defaultComputerVersion). */
  engineVersions?: EngineVersionDefaults;
}

export function jobTable(options: JobTableOptions): JobTable {
  const backup: BackupJobDeps = {
    openStorage: openBackupStorage,
    pvLimitMb: 100,
    maxReplicaDelayS: 60,
    appliedIndex: () => options.raft.status().applied,
    ...options.backup,
  };
  return {
    create_machine: createMachine,
    delete_machine: deleteMachine,
    set_machine: setMachine,
    create_cluster: createClusterJob(options.engineVersions),
    delete_cluster: deleteCluster,
    add_shards: addShards,
    delete_shards: deleteShardsJob(),
    add_comps: addComps,
    delete_comp: deleteComp,
    add_nodes: addNodes,
    delete_nodes: deleteNodes,
    rebuild_node: rebuildNode,
    update_instance_cgroup: updateInstanceCgroup,
    manual_backup_cluster: manualBackupClusterJob(backup),
    cluster_restore: clusterRestore,
    logical_backup: logicalBackupJob(options.logical ?? { openStorage: openLogicalStorage }),
    logical_restore: logicalRestoreJob(options.logical ?? { openStorage: openLogicalStorage }),
    expand_cluster: expandClusterJob(options.moves),
    repartition_tables: repartitionTablesJob(options.moves),
    raft_mission: raftMissionJob(options),
    manual_switch: manualSwitchJob(options.manualSwitch),
    set_noswitch: setNoswitch,
    create_backup_storage: createBackupStorageJob(backup.openStorage),
    delete_backup_storage: deleteBackupStorage,
    rotate_backup_key: rotateBackupKey,
    create_token: createToken,
    delete_token: deleteToken,
    cancel_job: cancelJobJob(options.keepFinishedJobs),
    rotate_cluster_passwords: rotateClusterPasswords,
    upgrade_cluster: upgradeClusterJob(options.manualSwitch),
    set_backup_policy: setBackupPolicy,
    delete_backup_policy: deleteBackupPolicy,
    run_restore_drill: runRestoreDrillJob(options.engineVersions),
  } satisfies JobTable;
}

/** The runnable entries of a table (an 'unsupported' type has none: the gateway answers UNSUPPORTED). */
export function registryOf(table: Partial<Record<AsyncJobType, JobDefinition | 'unsupported'>>): JobRegistry {
  const registry = new Map<string, JobDefinition>();
  for (const [jobType, def] of Object.entries(table)) if (def !== undefined && def !== 'unsupported') registry.set(jobType, def);
  return registry;
}
