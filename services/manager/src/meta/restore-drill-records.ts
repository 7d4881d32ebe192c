// The records of restore drills in the replicated state (meta/restore-drills.ts applies their
// commands); apart so that state.ts can name them without an import circle.

/** One table the restored copy got wrong. */
export interface DrillMismatch {
  /** `database.table`. */
  table: string;
  what: string;
}

/** One drill's outcome. Times in ms since the epoch. */
export interface RestoreDrillOutcome {
  clusterId: string;
  jobId: string;
  passed: boolean;
  /** The set whose recorded figures the copy was checked against ('' when the drill failed before choosing). */
  backupId: string;
  /** The set restored: backupId, or the one before it in a point-in-time drill. */
  restoredBackupId: string;
  mode: 'set' | 'point_in_time';
  /** The restored point: the checked set's end. 0 when unknown. */
  pointAt: number;
  /** Restore start to verified; null when the drill did not get that far. */
  rtoMs: number | null;
  /** The drill's start minus the restored point, seconds; null when no set was chosen. */
  rpoS: number | null;
  tablesChecked: number;
  mismatches: DrillMismatch[];
  scratchClusterId: string;
  /** false: a host of the scratch cluster did not answer; its removal is a recorded rollback, finished later. */
  scratchDeleted: boolean;
  finishedAt: number;
  /** Why it failed. */
  error?: string;
}

/** A cluster's drills as the state keeps them: the last one, and the last one that passed. */
export interface ClusterDrills {
  last: RestoreDrillOutcome;
  lastPassed: RestoreDrillOutcome | null;
}
