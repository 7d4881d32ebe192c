// The job registry: one entry per async job type of the protocol, checked by the compiler.
// A job type added to libs/protocol (JOB_TYPES + JOB_MODES 'async') fails to compile here
// until it gets its definition or is marked 'unsupported' (answered UNSUPPORTED at
// submission); each definition's result must be the protocol's ResultOf<that type>.
// test/jobs/registry-exhaustive.test.ts compiles a fixture to keep that check honest.

import type { AsyncJobType, ParasOf, ResultOf } from '@kcm/protocol';
import type { RaftNode } from '@kcm/raft';
import { createCluster, deleteCluster } from './cluster';
import { updateInstanceCgroup } from './cgroup';
import { addComps, deleteComp } from './comps';
import { createMachine, deleteMachine, setMachine } from './machines';
import { logicalBackup, logicalRestoreJob, type LogicalJobDeps } from './logical';
import { addNodes, deleteNodes, rebuildNode } from './nodes';
import { raftMissionJob, type RaftMissionDeps } from './raft-mission';
import { addShards, deleteShardsJob } from './shards';
import type { JobDefinition } from './workflow';
import { openLogicalStorage } from '../backup/logical-storage';

/** The definition of job type T: its paras, any step outputs, the protocol's result for T. */
export type JobDefinitionOf<T extends AsyncJobType> = JobDefinition<ParasOf<T>, any, ResultOf<T>> & { jobType: T };

/** Every async job type: its definition, or 'unsupported' until its family lands. */
export type JobTable = { readonly [T in AsyncJobType]: JobDefinitionOf<T> | 'unsupported' };

/** What the runner and the gateway look jobs up in, by canonical job type (only those kcm runs). */
export type JobRegistry = ReadonlyMap<string, JobDefinition>;

export interface JobTableOptions extends Omit<RaftMissionDeps, 'raft'> {
  raft: RaftNode;
  /** Where logical backups are kept (default: the backup storages in the replicated state). */
  logical?: LogicalJobDeps;
}

export function jobTable(options: JobTableOptions): JobTable {
  return {
    create_machine: createMachine,
    delete_machine: deleteMachine,
    set_machine: setMachine,
    create_cluster: createCluster,
    delete_cluster: deleteCluster,
    add_shards: addShards,
    delete_shards: deleteShardsJob(),
    add_comps: addComps,
    delete_comp: deleteComp,
    add_nodes: addNodes,
    delete_nodes: deleteNodes,
    rebuild_node: rebuildNode,
    update_instance_cgroup: updateInstanceCgroup,
    manual_backup_cluster: 'unsupported',
    cluster_restore: 'unsupported',
    logical_backup: logicalBackup,
    logical_restore: logicalRestoreJob(options.logical ?? { openStorage: openLogicalStorage }),
    expand_cluster: 'unsupported',
    repartition_tables: 'unsupported',
    raft_mission: raftMissionJob(options),
  } satisfies JobTable;
}

/** The runnable entries of a table (an 'unsupported' type has none: the gateway answers UNSUPPORTED). */
export function registryOf(table: Partial<Record<AsyncJobType, JobDefinition | 'unsupported'>>): JobRegistry {
  const registry = new Map<string, JobDefinition>();
  for (const [jobType, def] of Object.entries(table)) if (def !== undefined && def !== 'unsupported') registry.set(jobType, def);
  return registry;
}
