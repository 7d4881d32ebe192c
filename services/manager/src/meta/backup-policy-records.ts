// The records of backup policies in the replicated state (meta/backup-policies.ts applies
// their commands); apart so that state.ts can name them without an import circle.

import { dict, type Dict } from './dict';

/** One period's run of a policy: claimed, then its job submitted. Its outcome is measured from the job and the set. */
export interface BackupPolicyRun {
  /** ms since the epoch: the start of the period (a multiple of the policy's period). */
  periodStart: number;
  claimedAt: number;
  claimedBy: string;
  /** The manual_backup_cluster job (and the backup set id when it succeeds); null until submitted. */
  jobId: string | null;
}

export interface BackupPolicyRecord {
  clusterId: string;
  fullEveryHours: number;
  /** `HH:MM:SS-HH:MM:SS`, and its bounds in seconds of the local day. */
  window: string;
  startSecond: number;
  endSecond: number;
  keepDays: number | null;
  keepSets: number | null;
  /** The storage of the policy's backups; null: the first registered at each run. */
  storageName: string | null;
  setByJob: string;
  setAt: number;
  lastRun: BackupPolicyRun | null;
  /** A restore drill every `everyDays` days (jobs/restore-drill); absent or null: none scheduled. */
  drill?: RestoreDrillSchedule | null;
  /** The last period's drill, claimed like a backup run (meta/restore-drills.ts). */
  lastDrill?: BackupPolicyRun | null;
}

/** A policy's drill schedule: the period, and the machines of the drills' scratch clusters. */
export interface RestoreDrillSchedule {
  everyDays: number;
  storageIplists: string[];
  computerIplists: string[];
}

/** A stored object (a backup set's prefix, or an archived binlog's key) that expiry removed from the state. */
export interface PendingBackupDeletion {
  storageName: string;
  prefix: string;
  /** What it was, for logs: `set <id>` or `binlog <cluster>/<shard> <name>`. */
  what: string;
  queuedAt: number;
}

export interface BackupPolicyState {
  /** By cluster id: one policy per cluster. */
  policies: Dict<BackupPolicyRecord>;
  /** By prefix. */
  pendingDeletions: Dict<PendingBackupDeletion>;
}

export const emptyBackupPolicyState = (): BackupPolicyState => ({ policies: dict(), pendingDeletions: dict() });

export function backupPolicyStateWithDicts(s: BackupPolicyState | undefined): BackupPolicyState {
  return { policies: dict(s?.policies ?? {}), pendingDeletions: dict(s?.pendingDeletions ?? {}) };
}
