// A restore drill's figures (docs/restore-drills.md): its verdict over every shard, RTO and
// data-age RPO. Pure, so the arithmetic is unit tested apart from the engines.

import type { TableChecksumRecord } from '../../meta/state';
import type { DrillMismatch } from '../../meta/restore-drills';
import { compareTableChecksums } from './compare';

/** One source shard's figures recorded at backup time, and what its scratch shard holds after the restore. */
export interface ShardFigures {
  recorded: readonly TableChecksumRecord[];
  restored: readonly TableChecksumRecord[];
}

/** Every table compared, and every difference (none: the drill passed). */
export function drillVerdict(shards: readonly ShardFigures[]): { tablesChecked: number; mismatches: DrillMismatch[] } {
  return {
    tablesChecked: shards.reduce((n, s) => n + s.recorded.length, 0),
    mismatches: shards.flatMap((s) => compareTableChecksums(s.recorded, s.restored)),
  };
}

/**
 * RTO: from the start of the restore (the scratch cluster built, empty) to the restored tables
 * verified, ms. A clock that went back gives 0.
 */
export const restoreRtoMs = (restoreStartedAt: number, verifiedAt: number): number => Math.max(0, verifiedAt - restoreStartedAt);

/**
 * Data-age RPO: how old the restored point was when the drill started (what a restore at that
 * moment would have lost), whole seconds. A point "after" the start (clocks apart) gives 0.
 */
export const dataAgeRpoS = (drillStartedAt: number, pointAt: number): number => Math.max(0, Math.round((drillStartedAt - pointAt) / 1000));
