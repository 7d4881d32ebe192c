// The records of daily logical backups in the replicated state (meta/logical-backups.ts
// applies their commands): schedules, their runs, and the backup sets the runs recorded.
// Apart from the apply functions so that state.ts and commands.ts can name them without
// importing the appliers, which import both.

import type { ObjectType } from '@kcm/protocol';
import { dict, type Dict } from './dict';

export interface LogicalBackupRun {
  /** Also the id of the backup set it records; a taken-over run keeps it. */
  runId: string;
  /** The local date (YYYY-MM-DD) on which the run's window opened. */
  windowDay: string;
  claimedAt: number;
  /** The member that claimed it last; more than one when a new leader took it over. */
  claimedBy: string;
  attempts: number;
  finishedAt: number | null;
  ok: boolean | null;
  error: string | null;
}

export interface LogicalBackupSchedule {
  /** `<cluster id>/<object type>/<db_table>`. */
  key: string;
  clusterId: string;
  objectType: ObjectType;
  dbTable: string;
  /** The window as sent (`HH:MM:SS-HH:MM:SS`), and its bounds in seconds of the day; it may cross midnight. */
  window: string;
  startSecond: number;
  endSecond: number;
  scheduledByJob: string;
  scheduledAt: number;
  /** The run of the latest window that had one. */
  lastRun: LogicalBackupRun | null;
}

/** One shard's part of a backup set: where its dump is kept and what it holds. */
export interface LogicalBackupPart {
  shardId: string;
  /** The storage the dump was written to, and its location there. */
  storage: string;
  location: string;
  bytes: number;
  sha256: string;
  /** `database.table` (MariaDB names) of the tables in this part. */
  tables: string[];
}

export interface LogicalBackupSet {
  id: string;
  scheduleKey: string;
  clusterId: string;
  objectType: ObjectType;
  dbTable: string;
  windowDay: string;
  /** When the dump started (ms): a restore_time after it may use this set. */
  takenAt: number;
  parts: LogicalBackupPart[];
}

export interface LogicalBackupState {
  schedules: Dict<LogicalBackupSchedule>;
  /** Finished backup sets by id. */
  sets: Dict<LogicalBackupSet>;
  /** Last run id handed out. */
  runCounter: number;
}

export const emptyLogicalBackupState = (): LogicalBackupState => ({ schedules: dict(), sets: dict(), runCounter: 0 });

export function logicalBackupStateWithDicts(s: LogicalBackupState | undefined): LogicalBackupState {
  if (!s) return emptyLogicalBackupState();
  return { schedules: dict(s.schedules), sets: dict(s.sets), runCounter: s.runCounter };
}

export const scheduleKeyOf = (clusterId: string, objectType: ObjectType, dbTable: string): string => `${clusterId}/${objectType}/${dbTable}`;
