// Daily logical backups in the replicated state (spec 4.4 logical_backup): each schedule
// names one table, schema or database of a cluster and a daily window; each day's run is
// claimed before its dump starts and finished once its backup set is recorded.
//
// Exactly once per window across leader changes: a leader dumps only a run it has claimed
// in the committed state. A claim survives the leader: the next leader finds the run of
// that window claimed but unfinished and takes it over under the same run id (the dump goes
// to the same storage location, overwriting a half-written or unrecorded one), and only
// one finish is ever accepted per run. A run that finished is never claimed again.

import { type LogicalBackupPart, scheduleKeyOf } from './logical-backup-records';
import { accepted, refused, type ApplyOutcome } from './outcome';
import type { MetaState } from './state';
import type { ObjectType } from '@kcm/protocol';
import type { CommandBase, CommandKind } from './command-numbers';

/** logical_backup: daily schedules of tables, schemas or databases of a cluster (added or replaced). */
export interface LogicalBackupScheduled extends CommandBase<typeof CommandKind.LogicalBackupScheduled> {
  clusterId: string;
  jobId: string;
  objectType: ObjectType;
  entries: { dbTable: string; window: string; startSecond: number; endSecond: number }[];
}

/** The leader's scheduler takes the run of one schedule's window (windowDay: the local date it opened). */
export interface LogicalBackupRunClaimed extends CommandBase<typeof CommandKind.LogicalBackupRunClaimed> {
  scheduleKey: string;
  windowDay: string;
  claimedBy: string;
}

/** A claimed run ended: its backup set when it succeeded, why not otherwise. */
export interface LogicalBackupRunFinished extends CommandBase<typeof CommandKind.LogicalBackupRunFinished> {
  scheduleKey: string;
  runId: string;
  ok: boolean;
  error?: string;
  set?: { takenAt: number; parts: LogicalBackupPart[] };
}

/**
 * Adds or replaces the schedules of one logical_backup request. A replaced schedule keeps
 * its last run, so moving a window on a day it already ran does not run it twice that day.
 */
export function applyLogicalBackupScheduled(state: MetaState, cmd: LogicalBackupScheduled): ApplyOutcome<{ keys: string[] }> {
  if (!state.clusters[cmd.clusterId]) return refused('NOT_FOUND', `cluster ${cmd.clusterId} does not exist`);
  const keys: string[] = [];
  for (const e of cmd.entries) {
    const key = scheduleKeyOf(cmd.clusterId, cmd.objectType, e.dbTable);
    const before = state.logicalBackups.schedules[key];
    state.logicalBackups.schedules[key] = {
      key,
      clusterId: cmd.clusterId,
      objectType: cmd.objectType,
      dbTable: e.dbTable,
      window: e.window,
      startSecond: e.startSecond,
      endSecond: e.endSecond,
      scheduledByJob: cmd.jobId,
      scheduledAt: cmd.at,
      lastRun: before?.lastRun ?? null,
    };
    keys.push(key);
  }
  return accepted({ keys });
}

/**
 * Claims the run of the window that opened on `windowDay`: a new run, or the unfinished one
 * of that window taken over (same run id). Refused when that window's run already finished,
 * or when the schedule ran a later window already.
 */
export function applyLogicalBackupRunClaimed(state: MetaState, cmd: LogicalBackupRunClaimed): ApplyOutcome<{ runId: string; attempts: number }> {
  const schedule = state.logicalBackups.schedules[cmd.scheduleKey];
  if (!schedule) return refused('NOT_FOUND', `logical backup schedule ${cmd.scheduleKey} does not exist`);
  const last = schedule.lastRun;
  if (last && last.windowDay > cmd.windowDay) return refused('CONFLICT', `${cmd.scheduleKey} already has a run for the window of ${last.windowDay}`);
  if (last && last.windowDay === cmd.windowDay) {
    if (last.finishedAt !== null) return refused('CONFLICT', `${cmd.scheduleKey} already ran in the window of ${cmd.windowDay} (run ${last.runId})`);
    last.attempts++;
    last.claimedAt = cmd.at;
    last.claimedBy = cmd.claimedBy;
    return accepted({ runId: last.runId, attempts: last.attempts });
  }
  const runId = String(++state.logicalBackups.runCounter);
  schedule.lastRun = { runId, windowDay: cmd.windowDay, claimedAt: cmd.at, claimedBy: cmd.claimedBy, attempts: 1, finishedAt: null, ok: null, error: null };
  return accepted({ runId, attempts: 1 });
}

/** Finishes a claimed run, recording its backup set when it succeeded; only once per run. */
export function applyLogicalBackupRunFinished(state: MetaState, cmd: LogicalBackupRunFinished): ApplyOutcome<{ setId: string | null }> {
  const schedule = state.logicalBackups.schedules[cmd.scheduleKey];
  const run = schedule?.lastRun;
  if (!schedule || !run || run.runId !== cmd.runId) return refused('NOT_FOUND', `run ${cmd.runId} of ${cmd.scheduleKey} is not the schedule's current run`);
  if (run.finishedAt !== null) return refused('CONFLICT', `run ${cmd.runId} of ${cmd.scheduleKey} already finished`);
  run.finishedAt = cmd.at;
  run.ok = cmd.ok;
  run.error = cmd.ok ? null : (cmd.error ?? 'failed');
  if (!cmd.ok || !cmd.set) return accepted({ setId: null });
  state.logicalBackups.sets[cmd.runId] = {
    id: cmd.runId,
    scheduleKey: schedule.key,
    clusterId: schedule.clusterId,
    objectType: schedule.objectType,
    dbTable: schedule.dbTable,
    windowDay: run.windowDay,
    takenAt: cmd.set.takenAt,
    parts: cmd.set.parts.map((p) => ({ ...p, tables: [...p.tables] })),
  };
  return accepted({ setId: cmd.runId });
}
