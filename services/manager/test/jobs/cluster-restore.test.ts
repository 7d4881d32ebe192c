// cluster_restore's refusals at submission, against the replicated state alone: each names
// the field and says what is wrong, and a valid request picks the newest backup before
// restore_time and the archived binlogs between that backup and restore_time.

import { KcmError } from '@kcm/protocol';
import { describe, expect, it } from 'vitest';
import { restorePlan } from '../../src/jobs/cluster-restore';
import { emptyMetaState } from '../../src/meta/state';
import { BACKUP_FINISHED_S, restoreState } from './restore-state';

function state() {
  const s = emptyMetaState();
  restoreState(s, { hostaddr: 'h9', port: 58100, root: '/backups' });
  return s;
}

function refusal(fn: () => unknown): KcmError {
  try {
    fn();
  } catch (err) {
    if (err instanceof KcmError) return err;
    throw err;
  }
  throw new Error('not refused');
}

const paras = (over: Partial<{ src_cluster_id: string; dst_cluster_id: string; restore_time: string }> = {}) => ({
  src_cluster_id: '1', dst_cluster_id: '2', restore_time: String(BACKUP_FINISHED_S + 30), ...over,
});

describe('cluster_restore validation', () => {
  it('a restore_time after the backup and within the archive: the backup set and the binlogs between', () => {
    const plan = restorePlan(state(), paras());
    expect(plan.set.id).toBe('5');
    expect(plan.stopTime).toBe(BACKUP_FINISHED_S + 30);
    expect(plan.shards.map((s) => [s.src.shardId, s.dst.id, s.binlogs.map((b) => b.name)])).toEqual([
      ['11', '21', ['mariadb-bin.000002']],
      ['12', '22', ['mariadb-bin.000002']],
    ]);
  });

  it('refuses a restore_time with no full backup before it', () => {
    const err = refusal(() => restorePlan(state(), paras({ restore_time: String(BACKUP_FINISHED_S - 1) })));
    expect(err.errorName).toBe('NOT_FOUND');
    expect(err.message).toMatch(/^paras\.restore_time: cluster 1 has no full backup finished at or before/);
  });

  it('refuses a restore_time beyond the archived binlogs', () => {
    const err = refusal(() => restorePlan(state(), paras({ restore_time: String(BACKUP_FINISHED_S + 101) })));
    expect(err.errorName).toBe('INVALID_PARAS');
    expect(err.message).toMatch(/^paras\.restore_time: .* is beyond the archived binlogs of shard 11 of cluster 1 \(archived up to /);
  });

  it('refuses a destination with another number of shards', () => {
    const err = refusal(() => restorePlan(state(), paras({ dst_cluster_id: '3' })));
    expect(err.errorName).toBe('INVALID_PARAS');
    expect(err.message).toBe('paras.dst_cluster_id: cluster 3 has 1 shard(s), the backup of cluster 1 has 2; the destination must have the same number of shards');
  });

  it('refuses a destination that does not exist or is not ready', () => {
    expect(refusal(() => restorePlan(state(), paras({ dst_cluster_id: '9' }))).message).toMatch(/^paras\.dst_cluster_id: cluster 9 does not exist/);
    const s = state();
    s.clusters['2'].status = 'deleting';
    expect(refusal(() => restorePlan(s, paras())).errorName).toBe('CONFLICT');
  });
});
